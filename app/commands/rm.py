"""`ember rm MODEL`: forget a model and free the disk Ember used for it."""

from __future__ import annotations

import argparse

NAME = "rm"
HELP = "Remove a model (deletes files only if Ember downloaded them; asks first unless -y)."
ORDER = 34


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="a registry name or alias")
    parser.add_argument("-y", "--yes", action="store_true", help="do not ask for confirmation")


def run(args: argparse.Namespace) -> int:
    import sys

    from ember.app.commands._model_format import human_bytes, say
    from ember.app.loading import open_registry
    from ember.models.registry.probe import model_size
    from ember.text import escape

    registry = open_registry()
    record = registry.get(args.model)
    present = record.format != "remote" and record.path.exists()
    size = model_size(record.path, record.format) if present else 0
    if record.owned and present:
        action = f"delete {record.path} ({human_bytes(size)})"
    else:
        action = f"forget it (the files at {record.path} stay where they are)"
    if not args.yes:
        if not sys.stdin.isatty():
            say(f"ember rm {record.name}: would {action}; pass -y to confirm", err=True)
            return 1
        answer = input(escape(f"Remove {record.name}: {action}? [y/N] ")).strip().lower()
        if answer not in ("y", "yes"):
            print("Nothing removed.")
            return 1
    freed = registry.remove(record.name)
    say(f"Removed {record.name}" + (f", freed {human_bytes(freed)}" if freed else ""))
    return 0
