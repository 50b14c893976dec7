"""Copying text: OSC 52 (the terminal's clipboard) plus a fallback that works without it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

# Platform clipboard tools, tried in order when present.
_TOOLS: list[list[str]] = [
    ["pbcopy"],
    ["wl-copy"],
    ["xclip", "-selection", "clipboard"],
    ["xsel", "--clipboard", "--input"],
    ["clip.exe"],
]


def copy_fallback(text: str, cache_dir: Path) -> str:
    """Copy with a platform tool if one works, else save to a file; returns where it went."""
    for tool in _TOOLS:
        if shutil.which(tool[0]) is None:
            continue
        try:
            subprocess.run(tool, input=text.encode(), timeout=3, check=True, capture_output=True)
            return tool[0]
        except (OSError, subprocess.SubprocessError):
            continue
    cache_dir.mkdir(parents=True, exist_ok=True)
    target = cache_dir / "clipboard.txt"
    target.write_text(text, encoding="utf-8")
    return str(target)
