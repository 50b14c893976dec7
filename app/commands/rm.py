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

    from ember.app.commands._model_format import human_bytes
    from ember.app.loading import open_registry
    from ember.models.registry.probe import model_size

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
            print(f"ember rm {record.name}: would {action}; pass -y to confirm", file=sys.stderr)
            return 1
        answer = input(f"Remove {record.name}: {action}? [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            print("Nothing removed.")
            return 1
    freed = registry.remove(record.name)
    print(f"Removed {record.name}" + (f", freed {human_bytes(freed)}" if freed else ""))
    return 0
