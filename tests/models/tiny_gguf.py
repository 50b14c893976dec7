"""Tiny valid GGUF files and safetensors folders for the registry and Hub tests (built in ms)."""

from __future__ import annotations

import json
from pathlib import Path


def write_tiny_gguf(path: Path, arch: str = "llama", rows: int = 8, seed: int = 0) -> Path:
    """A small valid GGUF (one F32 tensor, an architecture and a context length)."""
    import gguf
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_context_length(128)
    writer.add_chat_template("{% for m in messages %}{{ m.content }}{% endfor %}")
    data = np.random.default_rng(seed).standard_normal((rows, 32)).astype(np.float32)
    writer.add_tensor("token_embd.weight", data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_tiny_safetensors(folder: Path, model_type: str = "llama") -> Path:
    """A tiny HF-layout folder: config.json, tokenizer files and one safetensors shard."""
    import numpy as np
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    config = {"model_type": model_type, "architectures": ["LlamaForCausalLM"], "hidden_size": 32}
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages }}"}))
    (folder / "tokenizer.json").write_text(json.dumps({"version": "1.0", "model": {"type": "BPE"}}))
    weights = {"model.embed_tokens.weight": np.zeros((8, 32), dtype=np.float32)}
    save_file(weights, str(folder / "model.safetensors"))
    return folder
