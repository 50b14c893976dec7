"""`ember ps`: the models a running server holds in memory."""

from __future__ import annotations

import argparse
import json

from ember.app.commands._server_client import add_server_flags, call

NAME = "ps"
HELP = "Show the models a running `ember serve` has loaded."
ORDER = 42


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_server_flags(parser)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    models = call(args, "GET", "/api/ps").get("models", [])
    if args.json:
        print(json.dumps(models, indent=2))
        return 0
    if not models:
        print("no model loaded")
        return 0
    print(f"{'NAME':<32} {'SIZE':>10}  UNTIL")
    for card in models:
        size = f"{card.get('size', 0) / 1e6:.0f} MB" if card.get("size") else "-"
        print(f"{str(card['name'])[:32]:<32} {size:>10}  {card.get('expires_at', '')}")
    return 0
