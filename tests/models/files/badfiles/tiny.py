"""Tiny valid GGUF files written with gguf.GGUFWriter (llama, qwen2, qwen3, gemma3; 2 layers).

Tensor types mix F32 (norms), F16, Q8_0 and Q4_0 (through gguf.quants.quantize) so the quant
summary and the block-size checks have something to see.
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q

HIDDEN, FFN, N_HEADS, N_KV, HEAD_DIM, N_LAYERS = 64, 128, 2, 1, 32, 2
TOKENS = ["<unk>", "<s>", "</s>", "<end_of_turn>"] + [chr(ord("a") + i) for i in range(28)]
VOCAB = len(TOKENS)  # 32 by default; n_vocab= grows the vocabulary (and the file)
TEMPLATE = "{% for m in messages %}{{ m['content'] }}{% endfor %}"


def _add(
    writer: gguf.GGUFWriter, rng: np.random.Generator, name: str, shape: tuple[int, ...], qtype: Q
) -> None:
    """Add a random tensor of torch-order `shape`, stored as `qtype`."""
    data = rng.standard_normal(shape).astype(np.float32)
    if qtype == Q.F32:
        writer.add_tensor(name, data)
    elif qtype == Q.F16:
        writer.add_tensor(name, data.astype(np.float16))
    else:
        writer.add_tensor(name, gguf.quants.quantize(data, qtype), raw_dtype=qtype)


def _tokens(n_vocab: int) -> list[str]:
    return TOKENS[:n_vocab] + [f"t{i}" for i in range(len(TOKENS), n_vocab)]


def _metadata(
    writer: gguf.GGUFWriter, arch: str, chat_template: bool, n_vocab: int, context_length: int
) -> None:
    writer.add_name(f"tiny-{arch}")
    writer.add_block_count(N_LAYERS)
    writer.add_context_length(context_length)
    writer.add_embedding_length(HIDDEN)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(N_HEADS)
    writer.add_head_count_kv(N_KV)
    writer.add_key_length(HEAD_DIM)
    writer.add_value_length(HEAD_DIM)
    writer.add_rope_freq_base(10000.0 if arch != "gemma3" else 1000000.0)
    writer.add_layer_norm_rms_eps(1e-6)
    if arch == "gemma3":
        writer.add_sliding_window(16)
    writer.add_tokenizer_model("llama")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(_tokens(n_vocab))
    writer.add_token_scores([0.0] * n_vocab)
    writer.add_token_types([1] * n_vocab)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    if chat_template:
        writer.add_chat_template(TEMPLATE)


def _layer_tensors(arch: str) -> list[tuple[str, tuple[int, ...], Q]]:
    q_dim, kv_dim = N_HEADS * HEAD_DIM, N_KV * HEAD_DIM
    parts: list[tuple[str, tuple[int, ...], Q]] = [
        ("attn_norm.weight", (HIDDEN,), Q.F32),
        ("attn_q.weight", (q_dim, HIDDEN), Q.Q4_0),
        ("attn_k.weight", (kv_dim, HIDDEN), Q.F16),
        ("attn_v.weight", (kv_dim, HIDDEN), Q.Q8_0),
        ("attn_output.weight", (HIDDEN, q_dim), Q.F32),
        ("ffn_norm.weight", (HIDDEN,), Q.F32),
        ("ffn_gate.weight", (FFN, HIDDEN), Q.Q4_0),
        ("ffn_up.weight", (FFN, HIDDEN), Q.Q4_0),
        ("ffn_down.weight", (HIDDEN, FFN), Q.Q8_0),
    ]
    if arch == "qwen2":
        parts += [("attn_q.bias", (q_dim,), Q.F32), ("attn_k.bias", (kv_dim,), Q.F32)]
        parts += [("attn_v.bias", (kv_dim,), Q.F32)]
    if arch in ("qwen3", "gemma3"):
        parts += [("attn_q_norm.weight", (HEAD_DIM,), Q.F32)]
        parts += [("attn_k_norm.weight", (HEAD_DIM,), Q.F32)]
    if arch == "gemma3":
        parts += [("post_attention_norm.weight", (HIDDEN,), Q.F32)]
        parts += [("post_ffw_norm.weight", (HIDDEN,), Q.F32)]
    return parts


def write_tiny_gguf(
    path: Path,
    arch: str = "llama",
    *,
    tied: bool | None = None,
    chat_template: bool = True,
    n_vocab: int = VOCAB,
    context_length: int = 256,
    seed: int = 0,
    split_max_tensors: int = 0,
) -> Path:
    """Write a valid 2-layer GGUF of `arch` to path (gemma3 ties embeddings by default).

    split_max_tensors > 0 writes a gguf-split model instead: <stem>-0000i-of-0000N.gguf beside
    path; the first shard's path is returned.
    """
    if n_vocab < 4:
        raise ValueError("n_vocab must cover the 4 special tokens")
    tied = arch == "gemma3" if tied is None else tied
    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), arch, split_max_tensors=split_max_tensors)
    _metadata(writer, arch, chat_template, n_vocab, context_length)
    _add(writer, rng, "token_embd.weight", (n_vocab, HIDDEN), Q.Q8_0)
    _add(writer, rng, "output_norm.weight", (HIDDEN,), Q.F32)
    if not tied:
        _add(writer, rng, "output.weight", (n_vocab, HIDDEN), Q.F16)
    for i in range(N_LAYERS):
        for name, shape, qtype in _layer_tensors(arch):
            _add(writer, rng, f"blk.{i}.{name}", shape, qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    if split_max_tensors:
        return writer.format_shard_names(path)[0]
    return path
