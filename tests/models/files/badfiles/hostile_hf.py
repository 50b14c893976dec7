"""Hostile Hugging Face folders: a tiny valid folder with one file made wrong in one way.

HOSTILE: case id -> (edit(folder), fragment the one-line ModelFileError must contain: the file
and the field). write_hostile(folder, case) builds one. Every loader (ember show, the torch
runner, --draft) must refuse each with that same line.
"""

from __future__ import annotations

import json
import struct
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.fixtures.quick_hf import write_tiny_hf

Edit = Callable[[Path], None]


def _config(change: dict[str, Any]) -> Edit:
    def edit(folder: Path) -> None:
        path = folder / "config.json"
        path.write_text(json.dumps(json.loads(path.read_text()) | change))  # NaN stays NaN

    return edit


def _raw(name: str, content: bytes) -> Edit:
    def edit(folder: Path) -> None:
        (folder / name).write_bytes(content)

    return edit


def _torch_zip(folder: Path) -> None:
    """What torch.save writes (a zip holding data.pkl), under the safetensors name."""
    path = folder / "model.safetensors"
    path.unlink()
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
        archive.writestr("archive/version", "3")


def _header_dtype_list(folder: Path) -> None:
    path = folder / "model.safetensors"
    raw = path.read_bytes()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + length])
    header["model.norm.weight"]["dtype"] = ["BF16"]
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    # data offsets count from the end of the header, so a longer header keeps them valid
    path.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + length :])


HOSTILE: dict[str, tuple[Edit, str]] = {
    "rope_factor_zero": (
        _config({"rope_scaling": {"rope_type": "linear", "factor": 0}, "rope_theta": 1e4}),
        "config.json: rope_scaling.factor: must be > 0, got 0",
    ),
    "string_for_number": (
        _config({"hidden_size": "64"}),
        "config.json: hidden_size: must be an integer, got '64'",
    ),
    "object_for_float": (
        _config({"rms_norm_eps": {"value": 1e-6}}),
        "config.json: rms_norm_eps: must be a number, got an object",
    ),
    "list_for_string": (
        _config({"hidden_act": ["silu"]}),
        "config.json: hidden_act: must be a string, got ['silu']",
    ),
    "bool_for_int": (
        _config({"num_hidden_layers": True}),
        "config.json: num_hidden_layers: must be an integer, got True",
    ),
    "nan": (
        _config({"rope_theta": float("nan")}),
        "config.json: rope_theta: must be a finite number, got nan",
    ),
    "infinity": (
        _config({"rms_norm_eps": float("inf")}),
        "config.json: rms_norm_eps: must be a finite number, got inf",
    ),
    "negative_size": (
        _config({"intermediate_size": -128}),
        "config.json: intermediate_size: must be in 1..",
    ),
    "huge_number": (
        _config({"vocab_size": 10**30}),
        "config.json: vocab_size: must be in 1..16777216, got an integer of 31 digits",
    ),
    "nested_200k_deep": (
        _raw("config.json", b"[" * 200_000 + b"]" * 200_000),
        "config.json: not valid JSON (nested too deeply)",
    ),
    "torch_zip_as_safetensors": (_torch_zip, "model.safetensors: pickle checkpoint refused"),
    "header_dtype_is_a_list": (
        _header_dtype_list,
        "model.safetensors: tensor model.norm.weight: dtype: unknown dtype ['BF16']",
    ),
    "template_not_utf8": (
        _raw("chat_template.jinja", b"{{ messages }}\xff\xfe"),
        "chat_template.jinja: not valid UTF-8 (byte 14)",
    ),
    "token_is_a_number": (
        _raw("tokenizer_config.json", b'{"bos_token": 5}'),
        "tokenizer_config.json: bos_token: must be a string or an object with content, got 5",
    ),
}


def write_hostile(folder: Path, case: str) -> Path:
    """A tiny llama folder at folder with HOSTILE[case] applied."""
    write_tiny_hf(folder, "llama", legacy_config=True)
    HOSTILE[case][0](folder)
    return folder
