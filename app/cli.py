"""`ember` and its subcommands.

Each subcommand is one module in `ember.app.commands` exposing NAME, HELP, ORDER,
`add_arguments(parser)` and `run(args) -> int`. Those modules import nothing heavy at the top,
so `ember --help` and `ember --version` stay instant; bodies call into the parts lazily.
With no subcommand, `ember` opens the chat app (the `chat` command).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from types import ModuleType

from ember import __version__
from ember.app.cli_parse import parse_anywhere
from ember.errors import EmberError
from ember.text import escape

DEFAULT_COMMAND = "chat"


def _command_modules() -> list[ModuleType]:
    from ember.app import commands

    found: list[ModuleType] = []
    for info in pkgutil.iter_modules(commands.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"ember.app.commands.{info.name}")
        if hasattr(module, "NAME") and hasattr(module, "run"):
            found.append(module)
    return sorted(found, key=lambda m: (getattr(m, "ORDER", 100), m.NAME))


def build_parser() -> argparse.ArgumentParser:
    """The full `ember` argument parser (also used to generate the README's CLI reference)."""
    parser = argparse.ArgumentParser(
        prog="ember",
        description="Chat with local LLMs in the terminal. With no command, opens the chat app.",
    )
    parser.add_argument("--version", action="version", version=f"ember {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in _command_modules():
        child = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(child)
        child.set_defaults(_module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `ember` console script."""
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser()
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


if __name__ == "__main__":
    raise SystemExit(main())
