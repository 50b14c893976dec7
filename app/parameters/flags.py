"""Command-line flags built from the parameter table: the flag name, type, metavar, choices
and help of a row, so `--temperature` says what the settings file and the server say."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from typing import Any

from ember.app.parameters import PARAMETERS


def add_flag(
    parser: argparse.ArgumentParser | Any,
    name: str,
    *,
    kind: Callable[[str], Any] | None = None,
    help_suffix: str = " (default: settings)",
) -> None:
    """Add name's flag to parser (or an argument group): None when not given, so the settings
    apply. kind overrides the row's type (a size parser, `auto` for ctx)."""
    row = PARAMETERS[name]
    extra: dict[str, Any] = {}
    if row.metavar:
        extra["metavar"] = row.metavar
    if row.choices and not row.metavar:
        extra["choices"] = row.choices
    parser.add_argument(
        row.flag,
        type=kind or row.kind,
        help=row.help + (help_suffix if row.setting else ""),
        **extra,
    )


def add_flags(parser: argparse.ArgumentParser | Any, names: Iterable[str]) -> None:
    """add_flag for each name, in order."""
    for name in names:
        add_flag(parser, name)
