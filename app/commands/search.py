"""`ember search TEXT`: models on the Hugging Face Hub, most downloaded first."""

from __future__ import annotations

import argparse

NAME = "search"
HELP = "Search the Hugging Face Hub for models (most downloaded first)."
ORDER = 37


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("text", nargs="?", default="", help="words in the repo name")
    kind = parser.add_mutually_exclusive_group()
    kind.add_argument("--gguf", action="store_true", help="only repos with GGUF files")
    kind.add_argument(
        "--safetensors", action="store_true", help="only repos with safetensors weights"
    )
    parser.add_argument("--limit", type=int, default=20, help="how many results (default 20)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    from ember.app.commands._model_format import human_bytes, human_count, print_json, print_table
    from ember.models.hub.client import search

    fmt = "gguf" if args.gguf else "safetensors" if args.safetensors else None
    hits = search(args.text, fmt, max(1, args.limit))
    if args.json:
        print_json([h.to_dict() for h in hits])
        return 0
    if not hits:
        print(f"No models match {args.text!r}.")
        return 0
    rows = [
        [
            h.repo_id,
            human_count(h.downloads),
            ",".join(h.formats) or "-",
            human_count(h.parameters),
            human_bytes(h.storage_bytes),
        ]
        for h in hits
    ]
    print_table(rows, ["REPO", "DOWNLOADS", "FORMATS", "PARAMS", "REPO SIZE"])
    return 0
