"""The CLI reference (docs/cli.md), generated from the real argument parser's --help.

`python -m ember.cli_reference --write` rewrites the section of docs/cli.md between the
markers; a test checks that the file matches, so the reference never drifts from the code.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

START = "<!-- cli-reference:start -->"
END = "<!-- cli-reference:end -->"


def _help(parser: argparse.ArgumentParser) -> str:
    os.environ["COLUMNS"] = "100"  # stable wrapping whatever the terminal
    return parser.format_help().rstrip()


def render() -> str:
    """Markdown for `ember --help` and every subcommand's --help."""
    from ember.__main__ import build_parser

    os.environ["COLUMNS"] = "100"
    parser = build_parser()
    parts = ["```", "$ ember --help", _help(parser), "```"]
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, child in sub.choices.items():
        parts += ["", f"### ember {name}", "", "```", f"$ ember {name} --help", _help(child), "```"]
    return "\n".join(parts)


def splice(text: str, reference: str) -> str:
    """The reference file's text with the reference placed between the markers."""
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{reference}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    args = argv if argv is not None else sys.argv[1:]
    reference_file = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
    if not reference_file.exists():  # an installed package has no docs/ to update
        print(render())
        return 0
    text = reference_file.read_text(encoding="utf-8")
    updated = splice(text, render())
    if "--write" in args:
        reference_file.write_text(updated, encoding="utf-8")
        return 0
    print(render())
    return 0 if updated == text else 1


if __name__ == "__main__":
    raise SystemExit(main())
