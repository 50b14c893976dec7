"""`ember list`: the models Ember knows (registered, downloaded or added in place)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ember.models.registry.store import ModelRecord

NAME = "list"
HELP = "List local models: name, format, architecture, quant, size, last used."
ORDER = 31


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    import time

    from ember.app.commands._model_format import human_bytes, print_json, print_table
    from ember.app.loading import open_registry
    from ember.models.registry.starter import STARTER_NAME, starter_installed

    registry = open_registry()
    if starter_installed() and registry.find(STARTER_NAME) is None:
        registry.resolve(STARTER_NAME)  # the packaged starter is always listed once installed
    records = registry.list_models()
    if args.json:
        print_json([r.to_dict() | {"present": r.path.exists()} for r in records])
        return 0
    unregistered = _hf_cache_hint(records)
    if not records:
        print("No local models. Try `ember pull ORG/REPO` or `ember add PATH`.")
        if unregistered:
            print(unregistered)
        return 0
    rows = []
    for r in records:
        used = (
            time.strftime("%Y-%m-%d %H:%M", time.localtime(r.last_used_at))
            if r.last_used_at
            else "-"
        )
        missing = "" if r.format == "remote" or r.path.exists() else " (missing)"
        name = r.name + (f" ({', '.join(r.aliases)})" if r.aliases else "")
        rows.append(
            [
                name,
                r.format,
                r.architecture or "-",
                r.quant or "-",
                human_bytes(r.size_bytes) + missing,
                used,
            ]
        )
    print_table(rows, ["NAME", "FORMAT", "ARCH", "QUANT", "SIZE", "LAST USED"])
    if unregistered:
        print(unregistered)
    return 0


def _hf_cache_hint(records: list[ModelRecord]) -> str:
    """A line about models in the Hugging Face cache that are not registered yet, or ''."""
    from ember.models.hub.cache import discover

    known = {str(r.path) for r in records}
    extra = [m for m in discover() if str(m.path) not in known]
    if not extra:
        return ""
    return f"{len(extra)} more in the Hugging Face cache; register them in place with `ember add --hf-cache`."
