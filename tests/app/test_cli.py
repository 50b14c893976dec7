from __future__ import annotations

import subprocess
import sys

from ember import __version__


def _ember(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ember", *args], capture_output=True, text=True, timeout=60
    )


def test_version() -> None:
    out = _ember("--version")
    assert out.returncode == 0
    assert out.stdout.strip() == f"ember {__version__}"


def test_help_imports_nothing_heavy() -> None:
    code = (
        "import sys; from ember.__main__ import build_parser; build_parser().format_help();"
        "heavy = [m for m in ('torch', 'llama_cpp', 'textual', 'transformers', 'huggingface_hub')"
        " if m in sys.modules]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_help_lists_usage() -> None:
    out = _ember("--help")
    assert out.returncode == 0
    assert "usage: ember" in out.stdout
