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
    writer.add_block_count(2)
    writer.add_embedding_length(32)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    writer.add_chat_template("{% for m in messages %}{{ m.content }}{% endfor %}")
    data = np.random.default_rng(seed).standard_normal((rows, 32)).astype(np.float32)
    writer.add_tensor("token_embd.weight", data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def write_tiny_safetensors(folder: Path, model_type: str = "llama", shards: int = 1) -> Path:
    """A tiny HF-layout folder: config.json, tokenizer files, shards (+ index when more than one)."""
    import numpy as np
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    config = {
        "model_type": model_type,
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
    }
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages }}"}))
    (folder / "tokenizer.json").write_text(json.dumps({"version": "1.0", "model": {"type": "BPE"}}))
    if shards == 1:
        weights = {"model.embed_tokens.weight": np.zeros((8, 32), dtype=np.float32)}
        save_file(weights, str(folder / "model.safetensors"))
        return folder
    weight_map = {}
    for i in range(1, shards + 1):
        name = f"model-{i:05d}-of-{shards:05d}.safetensors"
        tensor = f"model.layers.{i - 1}.mlp.up_proj.weight"
        save_file({tensor: np.full((8, 32), i, dtype=np.float32)}, str(folder / name))
        weight_map[tensor] = name
    index = {"metadata": {"total_size": shards * 8 * 32 * 4}, "weight_map": weight_map}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return folder
