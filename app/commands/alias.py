"""`ember alias NAME MODEL`: another name for a model."""

from __future__ import annotations

import argparse

NAME = "alias"
HELP = "Give a model another name: ember alias NAME MODEL."
ORDER = 36


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="the new name")
    parser.add_argument("model", help="an existing model name or alias")


def run(args: argparse.Namespace) -> int:
    from ember.app.commands._model_format import say
    from ember.app.loading import open_registry

    record = open_registry().alias(args.name, args.model)
    say(f"{args.name} -> {record.name}")
    return 0
