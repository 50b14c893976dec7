"""`ember du`: disk used by each model and in total."""

from __future__ import annotations

import argparse

NAME = "du"
HELP = "Show the disk space each model uses, and the total."
ORDER = 35


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    from ember.app.commands._model_format import human_bytes, print_json, print_table
    from ember.models.registry import Registry

    registry = Registry()
    usage = registry.disk_usage()
    owned = {r.name: r.owned for r in registry.list_models()}
    if args.json:
        print_json(
            {
                "models": usage.by_model,
                "total_bytes": usage.total_bytes,
                "owned_bytes": usage.owned_bytes,
            }
        )
        return 0
    rows = [
        [name, human_bytes(size), "ember" if owned.get(name) else "in place"]
        for name, size in sorted(usage.by_model.items(), key=lambda kv: -kv[1])
    ]
    rows.append(
        ["TOTAL", human_bytes(usage.total_bytes), f"{human_bytes(usage.owned_bytes)} by ember"]
    )
    print_table(rows, ["MODEL", "SIZE", "FILES"])
    return 0
