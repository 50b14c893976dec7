"""`ember` and its subcommands: the parser and the dispatch.

Each subcommand is one module exposing NAME, HELP, ORDER, `add_arguments(parser)` and
`run(args) -> int`: app's are in `ember.app.commands`; `chat` (the Textual app) is ember.tui.command,
which sits above app, so the full command list is put together by ember/__main__.py (the `ember`
console script). Those modules import nothing heavy at the top, so `ember --help` and
`ember --version` stay instant; bodies call into the parts lazily.
With no subcommand, `ember` opens the chat app (the `chat` command).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from collections.abc import Sequence
from types import ModuleType

from ember import __version__
from ember.app.cli_parse import parse_anywhere
from ember.errors import EmberError
from ember.text import escape

DEFAULT_COMMAND = "chat"


def command_modules() -> list[ModuleType]:
    """app's subcommands (every command but `chat`)."""
    from ember.app import commands

    found: list[ModuleType] = []
    for info in pkgutil.iter_modules(commands.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"ember.app.commands.{info.name}")
        if hasattr(module, "NAME") and hasattr(module, "run"):
            found.append(module)
    return found


def build_parser(commands: Sequence[ModuleType] | None = None) -> argparse.ArgumentParser:
    """The `ember` argument parser over `commands` (app's own when None); ember/__main__.py
    builds the full one, the chat command included."""
    parser = argparse.ArgumentParser(
        prog="ember",
        description="Chat with local LLMs in the terminal. With no command, opens the chat app.",
    )
    parser.add_argument("--version", action="version", version=f"ember {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    found = command_modules() if commands is None else commands
    for module in sorted(found, key=lambda m: (getattr(m, "ORDER", 100), m.NAME)):
        child = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(child)
        child.set_defaults(_module=module)
    return parser


def main(argv: list[str] | None = None, commands: Sequence[ModuleType] | None = None) -> int:
    """Parse argv and run the command it names (see build_parser for `commands`)."""
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(commands)
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version")):
        argv = [DEFAULT_COMMAND, *argv]
    args = parse_anywhere(parser, argv)
    module = getattr(args, "_module", None)
    if module is None:
        parser.print_help()
        return 2
    try:
        return int(module.run(args) or 0)
    except EmberError as exc:
        print(f"ember: error: {escape(str(exc))}", file=sys.stderr)  # one line, inert
        return 1
    except KeyboardInterrupt:
        print("ember: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug or an input no check caught: one line, traceback in the log
        from ember.app.crash import report

        print(f"ember: error: {escape(report(f'ember {args.command}', exc))}", file=sys.stderr)
        return 1

