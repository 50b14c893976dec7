"""Making a file or folder really read-only in a test, for root too (chattr +i)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def read_only(*paths: Path) -> Iterator[None]:
    """chmod a-w for a normal user; root ignores modes, so the immutable attribute instead."""
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in paths}
        for p in paths:
            p.chmod(0o555 if p.is_dir() else 0o444)
        try:
            yield
        finally:
            for p, mode in modes.items():
                p.chmod(mode)
        return
    done: list[Path] = []
    try:
        for p in paths:
            proc = subprocess.run(["chattr", "+i", str(p)], capture_output=True, text=True)
            if proc.returncode != 0:
                pytest.skip(f"cannot make a file read-only for root here: {proc.stderr.strip()}")
            done.append(p)
        yield
    finally:
        for p in done:
            subprocess.run(["chattr", "-i", str(p)], check=True)
