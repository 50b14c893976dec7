"""`ember show MODEL`: what a model is (architecture, parameters, quants, context, size, digest)."""

from __future__ import annotations

import argparse
from typing import Any

NAME = "show"
HELP = "Show a model's architecture, parameters, quant mix, context length, size and digest."
ORDER = 30

_LABELS = {
    "name": "name",
    "format": "format",
    "architecture": "architecture",
    "model_name": "model name",
    "parameters": "parameters",
    "quant": "quant",
    "quant_mix": "quant mix",
    "context_length": "context length",
    "size_bytes": "file size",
    "path": "path",
    "sha256": "sha256",
    "chat_template_source": "chat template",
    "aliases": "aliases",
    "source": "source",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model", help="a registry name or alias, a .gguf file or a safetensors folder"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    parser.add_argument(
        "--no-digest",
        action="store_true",
        help="skip the SHA-256 (hashing a large unregistered file reads all of it)",
    )


def describe(ref: str, digest: bool = True) -> dict[str, Any]:
    """Everything `ember show` prints about a model, as a JSON-ready dict (digest=False leaves
    out a SHA-256 that is not already known, which would mean reading the whole file)."""
    from ember.app.loading import open_registry

    registry = open_registry()
    resolved = registry.resolve(ref)
    out: dict[str, Any] = {"name": resolved.name, "format": resolved.format}
    if resolved.format == "remote":
        out["url"] = resolved.url
        return out
    from ember.models.files.inspect import inspect_model

    info = inspect_model(resolved.path).to_dict()
    model_name = info.pop("name", None)
    out.update({k: v for k, v in info.items() if v is not None and k != "path"})
    if model_name and model_name != resolved.name:
        out["model_name"] = model_name
    record = registry.find(resolved.name)
    out["path"] = str(resolved.path)
    if resolved.sha256 or digest:
        out["sha256"] = resolved.sha256 or registry.digest(resolved.path, resolved.format)
    if record is not None:
        out["aliases"] = list(record.aliases)
        if record.source_repo:
            parts = [record.source_repo, record.source_revision, record.source_file]
            out["source"] = " ".join(p for p in parts if p)
    return out


def _text(value: Any, key: str) -> str:
    from ember.app.commands._model_format import human_bytes, human_count

    if key == "size_bytes":
        return f"{human_bytes(value)} ({value} bytes)"
    if key == "parameters" and isinstance(value, int):
        return f"{human_count(value)} ({value})"
    if isinstance(value, dict):
        return ", ".join(f"{k} {_mix_value(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "-"
    return str(value)


def _mix_value(value: Any) -> str:
    from ember.app.commands._model_format import human_bytes

    if isinstance(value, dict):
        parts = []
        if "tensors" in value:
            parts.append(f"{value['tensors']} tensors")
        if "bytes" in value:
            parts.append(human_bytes(value["bytes"]))
        return "(" + ", ".join(parts) + ")" if parts else str(value)
    if isinstance(value, int):
        return f"({human_bytes(value)})"
    return f"({value})"


def run(args: argparse.Namespace) -> int:
    from ember.app.commands._model_format import print_json, say

    if args.json:
        print_json(describe(args.model, digest=not args.no_digest))
        return 0
    # Text: everything else first, the digest last, so a large file's hashing keeps nothing
    # from the screen while it reads.
    details = describe(args.model, digest=False)
    pending = "sha256" not in details and not args.no_digest and details.get("format") != "remote"
    keys = [k for k in _LABELS if k in details] + [k for k in details if k not in _LABELS]
    width = max(len(_LABELS.get(k, k.replace("_", " "))) for k in [*keys, "sha256"])
    for key in keys:
        label = _LABELS.get(key, key.replace("_", " "))
        say(f"{label.ljust(width)}  {_text(details[key], key)}")
    if pending:
        print(f"{'sha256'.ljust(width)}  ", end="", flush=True)
        print(_digest(args.model), flush=True)
    return 0


def _digest(ref: str) -> str:
    from ember.app.loading import open_registry

    registry = open_registry()
    resolved = registry.resolve(ref)
    return registry.digest(resolved.path, resolved.format)
