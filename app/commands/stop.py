"""`ember stop MODEL`: unload a model from a running server now."""

from __future__ import annotations

import argparse

from ember.app.commands._server_client import add_server_flags, call

NAME = "stop"
HELP = "Unload MODEL from a running `ember serve` (frees its memory)."
ORDER = 43


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="a model the server has loaded (see `ember ps`)")
    add_server_flags(parser)


def run(args: argparse.Namespace) -> int:
    call(args, "POST", "/ember/unload", {"model": args.model})
    print(f"unloaded {args.model}")
    return 0
