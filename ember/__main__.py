"""`ember` (the console script) and `python -m ember`: every command, the chat app's included.

The composition root: the one module that sees both app (its subcommands) and tui (the `chat`
command opens the Textual app, which imports app). Nothing imports this module but the entry
points and ember/cli_reference.py.
"""

from __future__ import annotations

import argparse
from types import ModuleType


def commands() -> list[ModuleType]:
    """Every `ember` subcommand module."""
    from ember.app.cli import command_modules
    from ember.tui import command as chat

    return [chat, *command_modules()]


def build_parser() -> argparse.ArgumentParser:
    """The full `ember` argument parser (also the README's CLI reference)."""
    from ember.app import cli

    return cli.build_parser(commands())


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `ember` console script."""
    from ember.app import cli

    return cli.main(argv, commands())


if __name__ == "__main__":
    raise SystemExit(main())
