"""ModelHParams from GGUF metadata keys (`{arch}.block_count`, `{arch}.attention.head_count_kv`, ...).

Defaults follow llama.cpp (llama-model.cpp) where a key is optional: head_count_kv = head_count,
key_length = embedding_length / head_count, value_length = key_length, rope.freq_base = 10000,
rope.dimension_count = key_length, rope.scaling.type = linear (a factor of 0 or 1, or none at all,
means no scaling; the old key rope.scale_linear stands in for rope.scaling.factor). What each
family hard-codes (families.py of llama.cpp's src/models) is in _FAMILY below: gemma3's 10000
base on sliding layers and every 6th layer global; gemma2's every 2nd layer global, 4096-token
window, soft-caps of 50 and 30 and tied head; smollm3's RoPE-less 4th layers; phi3's disabled
sliding window and its LongRoPE factors (tensors rope_factors_long/short, chosen by context).
Every key is read through Fields: a wrong type or range is one ModelFileError naming the file
and the key.
"""

from __future__ import annotations

from ember.models.errors import ModelFileError
from ember.models.files.fields import REQUIRED, Fields, built
from ember.models.files.hparams.hparams import (
    MAX_CONTEXT,
    MAX_DIM,
    MAX_LAYERS,
    MAX_ROPE_THETA,
    MOE_ARCHS,
    ModelHParams,
    RopeScaling,
    sliding_pattern,
)

GEMMA3_SWA_PATTERN = 6  # llama.cpp: every 6th gemma3 layer is global
GEMMA3_LOCAL_THETA = 10000.0
_ROPE_KINDS = ("none", "linear", "yarn", "dynamic", "longrope")
INTERLEAVED_ROPE = ("llama", "smollm3", "mistral3")  # llama.cpp's LLAMA_ROPE_TYPE_NORM families
SMOLLM3_NOPE_INTERVAL = 4  # llama.cpp: every 4th smollm3 layer has no RoPE
GEMMA2_WINDOW, GEMMA2_PATTERN = 4096, 2  # llama.cpp's gemma2 defaults
GEMMA2_SOFTCAPS = (50.0, 30.0)  # attention, final logits (llama_hparams defaults)


class _Meta(Fields):
    """Fields over `{arch}.` keys; per-layer arrays are refused where one value is expected."""

    def __init__(self, metadata: dict[str, object], arch: str, source: str) -> None:
        super().__init__(metadata, source)
        self.arch = arch

    def key(self, suffix: str) -> str:
        return f"{self.arch}.{suffix}"

    def size(self, suffix: str, default: object = REQUIRED, hi: int = MAX_DIM) -> int:
        if isinstance(self.raw(self.key(suffix)), list):
            raise self.error(self.key(suffix), "per-layer values are not supported")
        return self.integer(self.key(suffix), default, lo=1, hi=hi)

    def opt_num(self, suffix: str, hi: float = 1e9) -> float | None:
        return self.opt_number(self.key(suffix), positive=True, hi=hi)


def _rope_scaling(m: _Meta, context_length: int, shapes: dict[str, tuple[int, ...]]) -> RopeScaling:
    kind = m.string(m.key("rope.scaling.type"), "linear", choices=_ROPE_KINDS)
    legacy = m.opt_number(m.key("rope.scale_linear"), lo=0.0, hi=1e6)
    factor = m.opt_number(m.key("rope.scaling.factor"), legacy, lo=0.0, hi=1e6)
    multiplier = m.number(m.key("rope.scaling.attn_factor"), 1.0, positive=True, hi=1e6)
    # llama.cpp falls back to the trained context when the original length is absent
    original = m.size("rope.scaling.original_context_length", context_length, hi=MAX_CONTEXT)
    if "rope_factors_long.weight" in shapes and kind == "linear" and not factor:
        kind = "longrope"  # phi3's converter writes the factor tensors and no scaling type
    if kind == "longrope":  # llama.cpp applies no LongRoPE factor of its own: the multiplier is it
        return built(
            m.source,
            RopeScaling,
            kind=kind,
            factor=max(1.0, context_length / original),
            original_context_length=original,
            attn_factor=1.0,
            attn_multiplier=multiplier,
        )
    if kind == "none" or factor in (None, 0.0, 1.0) and kind == "linear":
        return RopeScaling(attn_multiplier=multiplier)
    log_mul = m.opt_num("rope.scaling.yarn_log_multiplier")
    return built(
        m.source,
        RopeScaling,
        kind=kind,
        factor=factor if factor else 1.0,
        original_context_length=original if kind in ("yarn", "dynamic") else None,
        beta_fast=m.opt_num("rope.scaling.yarn_beta_fast"),
        beta_slow=m.opt_num("rope.scaling.yarn_beta_slow"),
        mscale=1.0 if log_mul is not None and kind == "yarn" else None,
        mscale_all_dim=log_mul if kind == "yarn" else None,
        attn_multiplier=multiplier,
    )


def _swa_pattern(m: _Meta, n_layers: int) -> int | None:
    """Every-Nth-layer-global pattern from an int or a per-layer bool array (True = sliding)."""
    key = m.key("attention.sliding_window_pattern")
    value = m.raw(key)
    if value is None:
        return {"gemma3": GEMMA3_SWA_PATTERN, "gemma2": GEMMA2_PATTERN}.get(m.arch)
    if not isinstance(value, list):
        return m.integer(key, lo=1, hi=MAX_LAYERS)
    if len(value) != n_layers:
        raise m.error(key, f"has {len(value)} entries for {n_layers} layers")
    layers = [m.item_boolean(key, i, v) for i, v in enumerate(value)]
    pattern = sliding_pattern(layers)
    if pattern is None and not all(layers):
        raise m.error(key, "unsupported layer pattern (not every Nth layer global)")
    return pattern


def _vocab_size(m: _Meta, n_tokens: int | None, shapes: dict[str, tuple[int, ...]]) -> int:
    if m.has(m.key("vocab_size")):
        return m.size("vocab_size")
    if n_tokens is not None:
        return n_tokens
    embd = shapes.get("token_embd.weight")
    if embd is None:
        raise ModelFileError(
            f"{m.source}: no vocabulary size: no tokenizer.ggml.tokens and no token_embd.weight"
        )
    return embd[0]


def _query_scalar(m: _Meta, hidden: int, n_heads: int, n_layers: int) -> float | None:
    if m.arch == "gemma2":  # llama.cpp reads no scale key: 27B (46 layers) uses hidden/heads
        return float(hidden // n_heads) if n_layers == 46 else None
    scale = m.opt_number(m.key("attention.scale"), lo=1e-6, hi=1e6)
    if scale is not None:
        return scale**-2.0  # scale = scalar ** -0.5
    if m.arch == "gemma3" and n_layers == 62:  # gemma3 27B scales by hidden/heads (llama.cpp)
        return float(hidden // n_heads)
    return None


def _window(m: _Meta) -> int | None:
    """Sliding window in tokens (None: full attention); phi3's is ignored, as llama.cpp does."""
    if m.arch == "phi3":  # llama.cpp: "Phi SWA is currently disabled" (its PR 13676)
        return None
    default = GEMMA2_WINDOW if m.arch == "gemma2" else None
    return m.opt_integer(m.key("attention.sliding_window"), default, lo=0, hi=MAX_CONTEXT) or None


def _softcaps(m: _Meta) -> dict[str, float | None]:
    attn, final = GEMMA2_SOFTCAPS if m.arch == "gemma2" else (None, None)
    return {
        "attn_logit_softcap": m.opt_number(
            m.key("attn_logit_softcapping"), attn, positive=True, hi=1e9
        ),
        "final_logit_softcap": m.opt_number(
            m.key("final_logit_softcapping"), final, positive=True, hi=1e9
        ),
    }


def _rotary(m: _Meta, head_dim: int, context: int) -> dict[str, object]:
    """Partial rotary dims, smollm3's NoPE layers and mistral3's query temperature."""
    key = m.key("rope.dimension_count")
    rope_dim = m.integer(key, head_dim, lo=2, hi=head_dim)
    if rope_dim % 2:
        raise m.error(key, f"{rope_dim} is odd (RoPE rotates pairs)")
    out: dict[str, object] = {"rope_dim": None if rope_dim == head_dim else rope_dim}
    if m.arch == "smollm3":
        out["nope_layer_interval"] = SMOLLM3_NOPE_INTERVAL
    scale = m.opt_num("attention.temperature_scale") if m.arch == "mistral3" else None
    if scale is not None:  # llama.cpp: the floor divisor is the original (yarn) context
        out["attn_temperature_scale"] = scale
        out["attn_temperature_length"] = m.size(
            "rope.scaling.original_context_length", context, hi=MAX_CONTEXT
        )
    return out


def _experts(m: _Meta) -> dict[str, object]:
    """The MoE fields of a MoE architecture (llama.cpp: qwen3moe renormalises the top-k weights;
    an expert_count of 0 is refused here by name, as is a used count above it)."""
    if m.arch not in MOE_ARCHS:
        return {}
    n_experts = m.integer(m.key("expert_count"), lo=1, hi=MAX_DIM)
    used = m.integer(m.key("expert_used_count"), lo=1, hi=MAX_DIM)
    if used > n_experts:
        raise m.error(m.key("expert_used_count"), f"{used} is more than expert_count {n_experts}")
    return {
        "n_experts": n_experts,
        "n_experts_used": used,
        "expert_ffn_size": m.size("expert_feed_forward_length"),
        "norm_topk_prob": True,
    }


def from_gguf(
    metadata: dict[str, object],
    n_tokens: int | None,
    shapes: dict[str, tuple[int, ...]],
    source: str = "metadata",
) -> ModelHParams:
    """ModelHParams from GGUF metadata; tensor shapes fill in vocab size, biases and tying."""
    arch = Fields(metadata, source).string("general.architecture")
    if not arch:
        raise ModelFileError(f"{source}: general.architecture: empty")
    m = _Meta(metadata, arch, source)
    n_layers = m.size("block_count", hi=MAX_LAYERS)
    hidden = m.size("embedding_length")
    n_heads = m.size("attention.head_count")
    head_dim = m.size("attention.key_length", hidden // n_heads or REQUIRED)
    context = m.size("context_length", hi=MAX_CONTEXT)
    window = _window(m)
    theta = m.number(m.key("rope.freq_base"), 10000.0, lo=1.0, hi=MAX_ROPE_THETA)
    local_theta = GEMMA3_LOCAL_THETA if arch == "gemma3" else None
    return built(
        source,
        ModelHParams,
        architecture=arch,
        n_layers=n_layers,
        hidden_size=hidden,
        ffn_size=m.size(
            "feed_forward_length", m.raw(m.key("expert_feed_forward_length")) or REQUIRED
        ),
        n_heads=n_heads,
        n_kv_heads=m.size("attention.head_count_kv", n_heads),
        head_dim=head_dim,
        head_dim_v=m.size("attention.value_length", head_dim),
        vocab_size=_vocab_size(m, n_tokens, shapes),
        context_length=context,
        rope_theta=theta,
        norm_eps=m.number(m.key("attention.layer_norm_rms_epsilon"), positive=True, hi=1.0),
        rope_scaling=_rope_scaling(m, context, shapes),
        rope_local_theta=m.opt_number(
            m.key("rope.freq_base_swa"), local_theta, lo=1.0, hi=MAX_ROPE_THETA
        ),
        sliding_window=window,
        sliding_window_pattern=_swa_pattern(m, n_layers) if window else None,
        **_softcaps(m),
        tie_embeddings="output.weight" not in shapes or arch == "gemma2",  # gemma2: always tied
        qkv_bias="blk.0.attn_q.bias" in shapes or "blk.0.attn_qkv.bias" in shapes,
        attn_output_bias="blk.0.attn_output.bias" in shapes,
        mlp_bias=any(f"blk.0.ffn_{n}.bias" in shapes for n in ("gate", "up", "down")),
        qk_norm="blk.0.attn_q_norm.weight" in shapes,
        query_pre_attn_scalar=_query_scalar(m, hidden, n_heads, n_layers),
        hidden_act="gelu_tanh" if arch.startswith("gemma") else "silu",
        norm_weight_offset=0.0,
        rope_interleaved=arch in INTERLEAVED_ROPE,
        **_rotary(m, head_dim, context),
        **_experts(m),
    )
