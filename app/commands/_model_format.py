"""Human formatting shared by the model commands (show, list, du, pull, search).

Everything they print comes from outside (file names, GGUF metadata, Hub answers, names a
person typed), so text goes through ember.text.escape: one line each, no control characters.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from ember.text import escape


def human_bytes(num_bytes: int | float | None) -> str:
    """1234567 -> '1.2 MB' (decimal units, as the Hub shows sizes)."""
    if num_bytes is None:
        return "-"
    value = float(num_bytes)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(value) < 1000 or unit == "TB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} TB"


def human_count(count: int | float | None) -> str:
    """268098176 -> '268.1M'."""
    if count is None:
        return "-"
    value = float(count)
    for unit in ("", "K", "M", "B"):
        if abs(value) < 1000 or unit == "B":
            return f"{value:.0f}" if unit == "" else f"{value:.1f}{unit}"
        value /= 1000
    return f"{value:.1f}B"


def print_json(value: Any) -> None:
    """Pretty JSON on stdout (ASCII-escaped: control characters are \\u escapes)."""
    json.dump(value, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def say(text: str, *, err: bool = False) -> None:
    """Print one line of text built from outside data, escaped (stdout, or stderr)."""
    print(escape(text), file=sys.stderr if err else sys.stdout)


def print_table(rows: list[list[str]], header: list[str]) -> None:
    """Left-aligned columns separated by two spaces; every cell escaped to one line."""
    rows = [[escape(str(cell)) for cell in row] for row in rows]
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print(
            "  ".join(
                str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)
            ).rstrip()
        )
