"""Hypothesis strategies for hostile metadata: any JSON value (or GGUF-typed value) in any field.

config_edits / gguf_edits draw a valid starting point and up to four edits, each putting an
arbitrary value at a field the readers know (or an unknown one), nested fields included.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

from tests.fixtures.quick_hf import hf_config

# values near the edges of what readers check: zero, signs, int widths, strings of numbers
EDGES: list[Any] = [
    0, -1, 1, 2, 3, 6, 16, 2**31, 2**32, 2**63, 2**64, 10**30, -(2**63), 0.0, -0.0, 1e-30, 0.5,
    1.0, 1e308, float("nan"), float("inf"), float("-inf"), True, False, None, "", "64", "1e6",
    "none", "default", "linear", "yarn", "llama3", "dynamic", "longrope", "sliding_attention",
    "full_attention", "gelu_pytorch_tanh", "silu", "relu", "gemma3_text", "llama", [], {},
    [True, False], ["sliding_attention", "full_attention"], {"content": 1}, {"rope_type": "yarn"},
]  # fmt: skip

_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(EDGES)
)
JSON_VALUES = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)

CONFIG_KEYS = [
    "architectures", "model_type", "num_hidden_layers", "hidden_size", "intermediate_size",
    "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size",
    "max_position_embeddings", "tie_word_embeddings", "rms_norm_eps", "rope_theta",
    "rope_scaling", "rope_parameters", "rope_local_base_freq", "sliding_window",
    "sliding_window_pattern", "_sliding_window_pattern", "layer_types", "use_sliding_window",
    "max_window_layers", "attention_bias", "mlp_bias", "hidden_act", "hidden_activation",
    "query_pre_attn_scalar", "attn_logit_softcapping", "final_logit_softcapping",
    "use_bidirectional_attention", "text_config", "unknown_key",
]  # fmt: skip
ROPE_KEYS = [
    "rope_type", "type", "factor", "original_max_position_embeddings", "low_freq_factor",
    "high_freq_factor", "beta_fast", "beta_slow", "attention_factor", "rope_theta",
]  # fmt: skip
CONFIG_PATHS = (
    [(k,) for k in CONFIG_KEYS]
    + [("rope_scaling", k) for k in ROPE_KEYS]
    + [("rope_parameters", k) for k in ROPE_KEYS]
    + [("rope_parameters", layer, k) for layer in ("full_attention", "sliding_attention") for k in ROPE_KEYS]
    + [("layer_types", 0), ("architectures", 0), ("text_config", "num_hidden_layers")]
)  # fmt: skip


def put(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    """Set doc[path] = value, creating (or replacing) objects on the way; an int last step sets
    that item of an existing list."""
    *parents, last = path
    if isinstance(last, int):
        items = doc.get(parents[0])
        if isinstance(items, list) and items:
            items[last % len(items)] = value
        return
    for key in parents:
        child = doc.get(key)
        if not isinstance(child, dict):
            child = doc[key] = {}
        doc = child
    doc[last] = value


@st.composite
def config_edits(draw: st.DrawFn) -> dict[str, Any]:
    """A config.json of a tiny model (either transformers generation) with hostile edits."""
    arch = draw(st.sampled_from(["llama", "qwen2", "qwen3", "gemma3"]))
    config = copy.deepcopy(hf_config(arch, tied=arch == "gemma3", legacy=draw(st.booleans())))
    if draw(st.booleans()) and arch == "gemma3":  # the multimodal form: sizes in text_config
        config = {
            "architectures": ["Gemma3ForConditionalGeneration"],
            "model_type": "gemma3",
            "text_config": config,
        }
    for path, value in draw(
        st.lists(st.tuples(st.sampled_from(CONFIG_PATHS), JSON_VALUES), min_size=1, max_size=4)
    ):
        target = config
        inner = config.get("text_config")
        if isinstance(inner, dict) and path[0] != "text_config" and draw(st.booleans()):
            target = inner  # into the text_config
        put(target, path, value)
    return config


GGUF_SUFFIXES = [
    "block_count", "embedding_length", "feed_forward_length", "attention.head_count",
    "attention.head_count_kv", "attention.key_length", "attention.value_length",
    "context_length", "vocab_size", "rope.freq_base", "rope.freq_base_swa",
    "attention.layer_norm_rms_epsilon", "rope.scaling.type", "rope.scaling.factor",
    "rope.scale_linear", "rope.scaling.original_context_length", "rope.scaling.yarn_beta_fast",
    "rope.scaling.yarn_beta_slow", "rope.scaling.attn_factor", "attention.sliding_window",
    "attention.sliding_window_pattern", "attn_logit_softcapping", "final_logit_softcapping",
    "attention.scale",
]  # fmt: skip
# what a GGUF value can be: the file's scalar types, strings, and arrays of one type
_GGUF_SCALARS = (
    st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(width=32)
    | st.floats()
    | st.booleans()
    | st.text(max_size=12)
    | st.sampled_from([v for v in EDGES if not isinstance(v, dict | type(None))])
)
GGUF_VALUES = (
    _GGUF_SCALARS
    | st.lists(st.booleans(), max_size=8)
    | st.lists(st.integers(0, 2**32), max_size=8)
    | st.lists(st.text(max_size=4), max_size=4)
)


def gguf_metadata(arch: str) -> dict[str, Any]:
    """Valid metadata of a tiny `arch` model (vocabulary size from the tensors)."""
    md: dict[str, Any] = {
        "general.architecture": arch,
        f"{arch}.block_count": 2,
        f"{arch}.embedding_length": 64,
        f"{arch}.feed_forward_length": 128,
        f"{arch}.attention.head_count": 4,
        f"{arch}.attention.head_count_kv": 2,
        f"{arch}.context_length": 4096,
        f"{arch}.attention.layer_norm_rms_epsilon": 1e-6,
    }
    if arch == "gemma3":
        md[f"{arch}.attention.sliding_window"] = 512
    return md


@st.composite
def gguf_edits(draw: st.DrawFn) -> dict[str, Any]:
    """GGUF metadata of a tiny model with hostile values at known keys."""
    arch = draw(st.sampled_from(["llama", "qwen2", "qwen3", "gemma3"]))
    md = gguf_metadata(arch)
    edits = draw(
        st.lists(st.tuples(st.sampled_from(GGUF_SUFFIXES), GGUF_VALUES), min_size=1, max_size=4)
    )
    for suffix, value in edits:
        md[f"{arch}.{suffix}"] = value
    return md
