"""`ember add PATH`: register a local GGUF file or safetensors folder in place (no copy)."""

from __future__ import annotations

import argparse

NAME = "add"
HELP = "Register a local .gguf file or safetensors folder in place (validated, never copied)."
ORDER = 33


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "path", nargs="?", help="a .gguf file or a folder with config.json and .safetensors"
    )
    parser.add_argument("--name", help="registry name (default: the file stem or folder name)")
    parser.add_argument(
        "--hf-cache",
        action="store_true",
        help="register every model found in the Hugging Face cache",
    )


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ember.app.commands._model_format import human_bytes, say
    from ember.app.loading import open_registry
    from ember.models.errors import RegistryError

    registry = open_registry()
    if args.hf_cache:
        from ember.models.hub.cache import discover

        found = discover()
        for model in found:
            name = (
                model.repo_id if model.format == "safetensors" else f"{model.repo_id}:{model.label}"
            )
            record = registry.add_path(model.path, name=name)
            say(f"{record.name}: {human_bytes(record.size_bytes)} at {record.path}")
        if not found:
            print("No models found in the Hugging Face cache.")
        return 0
    if not args.path:
        raise RegistryError("ember add: give a PATH, or --hf-cache")
    record = registry.add_path(Path(args.path), name=args.name)
    say(
        f"Added {record.name}: {record.format}, {record.architecture or '?'}, {human_bytes(record.size_bytes)} at {record.path}"
    )
    return 0
