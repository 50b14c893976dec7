"""`ember du`: disk used by each model and in total, and by Ember's caches."""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "du"
HELP = "Show the disk space each model uses, the total, and the caches."
# cache folders (under the cache dir) and what they hold; all are safe to delete
CACHES = {
    "packed": "torch runner's converted weights",
    "prefix": "prompt KV snapshots",
    "downloads": "partial downloads",
}
ORDER = 35


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    from ember.app.commands._model_format import human_bytes, print_json, print_table
    from ember.app.loading import open_registry

    registry = open_registry()
    usage = registry.disk_usage()
    owned = {r.name: r.owned for r in registry.list_models()}
    caches = cache_usage()
    if args.json:
        print_json(
            {
                "models": usage.by_model,
                "total_bytes": usage.total_bytes,
                "owned_bytes": usage.owned_bytes,
                "caches": caches,
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
    print()
    print_table(
        [[name, human_bytes(caches[name]), what] for name, what in CACHES.items()],
        ["CACHE", "SIZE", "HOLDS"],
    )
    return 0


def cache_usage() -> dict[str, int]:
    """Bytes under each cache folder (0 where absent)."""
    from ember.paths import get_paths

    root = get_paths().cache_dir
    return {name: _tree_bytes(root / name) for name in CACHES}


def _tree_bytes(folder: Path) -> int:
    if not folder.is_dir():
        return 0
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
