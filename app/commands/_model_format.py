"""Human formatting shared by the model commands (show, list, du, pull, search)."""

from __future__ import annotations

import json
import sys
from typing import Any


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
    """Pretty JSON on stdout."""
    json.dump(value, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def print_table(rows: list[list[str]], header: list[str]) -> None:
    """Left-aligned columns separated by two spaces."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print(
            "  ".join(
                str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)
            ).rstrip()
        )
