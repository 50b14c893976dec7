"""docs/cli.md is the real --help output (regenerate: python -m ember.cli_reference --write)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ember.cli_reference import END, START, render, splice

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_readme_cli_reference_is_current() -> None:
    text = REFERENCE.read_text(encoding="utf-8")
    assert START in text and END in text
    assert splice(text, render()) == text, "run: python -m ember.cli_reference --write"


def test_reference_covers_every_subcommand() -> None:
    from ember.__main__ import build_parser

    reference = render()
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name in sub.choices:
        assert f"$ ember {name} --help" in reference
