"""ModelHParams from GGUF metadata keys (`{arch}.block_count`, `{arch}.attention.head_count_kv`, ...).

Defaults follow llama.cpp (llama-model.cpp) where a key is optional: head_count_kv = head_count,
key_length = embedding_length / head_count, value_length = key_length, rope.freq_base = 10000.
gemma3 hard-codes what its GGUF files leave out: a 10000 RoPE base on sliding layers and every
6th layer global.
"""

from __future__ import annotations

from ember.models.errors import ModelFileError
from ember.models.files.hparams.hparams import ModelHParams, RopeScaling

_GEMMA3_SWA_PATTERN = 6
_GEMMA3_LOCAL_THETA = 10000.0
_ROPE_KIND = {"none": "none", "linear": "linear", "yarn": "yarn", "dynamic": "dynamic"}


class _Meta:
    """Typed reads of metadata keys with one-line errors naming the key."""

    def __init__(self, metadata: dict[str, object], arch: str) -> None:
        self.md = metadata
        self.arch = arch

    def key(self, suffix: str) -> str:
        return f"{self.arch}.{suffix}"

    def get_int(self, suffix: str, default: int | None = None) -> int:
        key = self.key(suffix)
        value = self.md.get(key, default)
        if value is None:
            raise ModelFileError(f"metadata key {key} is missing")
        if isinstance(value, list):
            raise ModelFileError(f"metadata key {key}: per-layer values are not supported")
        if isinstance(value, bool) or not isinstance(value, int):
            raise ModelFileError(f"metadata key {key}: expected an integer, got {value!r}")
        return value

    def opt_int(self, suffix: str) -> int | None:
        return self.get_int(suffix) if self.key(suffix) in self.md else None

    def get_float(self, suffix: str, default: float | None = None) -> float | None:
        key = self.key(suffix)
        value = self.md.get(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ModelFileError(f"metadata key {key}: expected a number, got {value!r}")
        return float(value)

    def req_float(self, suffix: str, default: float | None = None) -> float:
        value = self.get_float(suffix, default)
        if value is None:
            raise ModelFileError(f"metadata key {self.key(suffix)} is missing")
        return value


def _rope_scaling(m: _Meta) -> RopeScaling:
    kind = m.md.get(m.key("rope.scaling.type"), "none")
    factor = m.get_float("rope.scaling.factor")
    if not isinstance(kind, str) or kind not in _ROPE_KIND:
        raise ModelFileError(f"metadata key {m.key('rope.scaling.type')}: unsupported {kind!r}")
    if kind == "none" or factor in (None, 1.0) and kind == "linear":
        return RopeScaling()
    return RopeScaling(
        kind=_ROPE_KIND[kind],
        factor=factor if factor is not None else 1.0,
        # llama.cpp falls back to the trained context when yarn's original length is absent
        original_context_length=m.opt_int("rope.scaling.original_context_length")
        or (m.get_int("context_length") if kind == "yarn" else None),
        beta_fast=m.get_float("rope.scaling.yarn_beta_fast"),
        beta_slow=m.get_float("rope.scaling.yarn_beta_slow"),
        attn_factor=m.get_float("rope.scaling.attn_factor"),
    )


def _swa_pattern(m: _Meta, n_layers: int) -> int | None:
    """Every-Nth-layer-global pattern from an int or a per-layer bool array (True = sliding)."""
    value = m.md.get(m.key("attention.sliding_window_pattern"))
    if value is None:
        return _GEMMA3_SWA_PATTERN if m.arch == "gemma3" else None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, list) and len(value) == n_layers:
        for pattern in range(1, n_layers + 2):
            if all(bool(v) == ((i + 1) % pattern != 0) for i, v in enumerate(value)):
                return pattern
    raise ModelFileError(
        f"metadata key {m.key('attention.sliding_window_pattern')}: unsupported layer pattern"
    )


def _vocab_size(m: _Meta, n_tokens: int | None, shapes: dict[str, tuple[int, ...]]) -> int:
    if m.key("vocab_size") in m.md:
        return m.get_int("vocab_size")
    if n_tokens is not None:
        return n_tokens
    embd = shapes.get("token_embd.weight")
    if embd is None:
        raise ModelFileError(
            "no vocabulary size: no tokenizer.ggml.tokens and no token_embd.weight"
        )
    return embd[0]


def _query_scalar(m: _Meta, hidden: int, n_heads: int, n_layers: int) -> float | None:
    scale = m.get_float("attention.scale")
    if scale is not None:
        if not 1e-6 < scale < 1e6:
            raise ModelFileError(f"metadata key {m.key('attention.scale')}: {scale} out of range")
        return scale**-2.0  # scale = scalar ** -0.5
    if m.arch == "gemma3" and n_layers == 62:  # gemma3 27B scales by hidden/heads (llama.cpp)
        return float(hidden // n_heads)
    return None


def from_gguf(
    metadata: dict[str, object], n_tokens: int | None, shapes: dict[str, tuple[int, ...]]
) -> ModelHParams:
    """ModelHParams from GGUF metadata; tensor shapes fill in vocab size, bias and tying."""
    arch = metadata.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise ModelFileError("metadata key general.architecture is missing")
    m = _Meta(metadata, arch)
    n_layers = m.get_int("block_count")
    hidden = m.get_int("embedding_length")
    n_heads = m.get_int("attention.head_count")
    if n_heads <= 0:
        raise ModelFileError(f"metadata key {m.key('attention.head_count')}: must be > 0")
    head_dim = m.get_int("attention.key_length", hidden // n_heads)
    sliding_window = m.opt_int("attention.sliding_window")
    is_gemma3 = arch == "gemma3"
    return ModelHParams(
        architecture=arch,
        n_layers=n_layers,
        hidden_size=hidden,
        ffn_size=m.get_int("feed_forward_length"),
        n_heads=n_heads,
        n_kv_heads=m.get_int("attention.head_count_kv", n_heads),
        head_dim=head_dim,
        head_dim_v=m.get_int("attention.value_length", head_dim),
        vocab_size=_vocab_size(m, n_tokens, shapes),
        context_length=m.get_int("context_length"),
        rope_theta=m.req_float("rope.freq_base", 10000.0),
        norm_eps=m.req_float("attention.layer_norm_rms_epsilon"),
        rope_scaling=_rope_scaling(m),
        rope_local_theta=m.get_float(
            "rope.freq_base_swa", _GEMMA3_LOCAL_THETA if is_gemma3 else None
        ),
        sliding_window=sliding_window,
        sliding_window_pattern=_swa_pattern(m, n_layers) if sliding_window else None,
        attn_logit_softcap=m.get_float("attn_logit_softcapping"),
        final_logit_softcap=m.get_float("final_logit_softcapping"),
        tie_embeddings="output.weight" not in shapes,
        qkv_bias="blk.0.attn_q.bias" in shapes,
        qk_norm="blk.0.attn_q_norm.weight" in shapes,
        query_pre_attn_scalar=_query_scalar(m, hidden, n_heads, n_layers),
        hidden_act="gelu_tanh" if arch.startswith("gemma") else "silu",
        norm_weight_offset=0.0,
        rope_interleaved=arch == "llama",
    )
