"""Which tensors each supported architecture needs, and their shapes, from ModelHParams.

Public API:
    HFNames                                                    a checkpoint's naming: where the
                                                               decoder lives (model., or
                                                               model.language_model. / language_model.model.
                                                               in multimodal gemma3) and the head
    HFNames.of(tensor_names) -> HFNames                        detected from a checkpoint
    hf_tensor_name(gguf_name, arch, names=HFNames()) -> str     the Hugging Face name of the same
    gguf_tensor_name(hf_name, arch, names=HFNames()) -> str | None   and back (None: not a decoder weight)
    check_tensor_shapes(hp, shapes, hf_names=None) -> None     ModelFileError on missing/wrong

Shapes are (out_features, in_features) for matrices, i.e. GGUF's ne reversed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from ember.models.errors import ModelFileError
from ember.models.files.hparams.hparams import ModelHParams


@dataclass(frozen=True)
class ExpectedTensor:
    """A tensor an architecture reads: its shape and whether it must be present."""

    shape: tuple[int, ...]
    required: bool = True


ROPE_FACTOR_TENSORS = ("rope_freqs.weight", "rope_factors_long.weight", "rope_factors_short.weight")
FUSED_ARCHS = ("phi3",)  # q|k|v in one attn_qkv tensor, gate|up in one ffn_up tensor
SANDWICH_ARCHS = ("gemma2", "gemma3")  # post-attention and post-FFN norms too


def _attention(hp: ModelHParams) -> dict[str, tuple[int, ...]]:
    hidden, q_dim = hp.hidden_size, hp.n_heads * hp.head_dim
    k_dim, v_dim = hp.n_kv_heads * hp.head_dim, hp.n_kv_heads * hp.head_dim_v
    shapes: dict[str, tuple[int, ...]] = {
        "attn_norm.weight": (hidden,),
        "attn_output.weight": (hidden, hp.n_heads * hp.head_dim_v),
        "ffn_norm.weight": (hidden,),
    }
    if hp.architecture in FUSED_ARCHS:
        shapes["attn_qkv.weight"] = (q_dim + k_dim + v_dim, hidden)
        if hp.qkv_bias:
            shapes["attn_qkv.bias"] = (q_dim + k_dim + v_dim,)
        return shapes
    shapes |= {
        "attn_q.weight": (q_dim, hidden),
        "attn_k.weight": (k_dim, hidden),
        "attn_v.weight": (v_dim, hidden),
    }
    if hp.qkv_bias:
        shapes |= {"attn_q.bias": (q_dim,), "attn_k.bias": (k_dim,), "attn_v.bias": (v_dim,)}
    return shapes


def _layer(hp: ModelHParams, i: int) -> dict[str, ExpectedTensor]:
    hidden = hp.hidden_size
    shapes = _attention(hp)
    if hp.is_moe:  # the router, and every expert's matrices stacked (GGUF's 3-D tensors)
        n, width = hp.n_experts, hp.expert_ffn_size
        shapes |= {
            "ffn_gate_inp.weight": (n, hidden),
            "ffn_gate_exps.weight": (n, width, hidden),
            "ffn_up_exps.weight": (n, width, hidden),
            "ffn_down_exps.weight": (n, hidden, width),
        }
    elif hp.architecture in FUSED_ARCHS:  # phi3: gate rows first, then up
        shapes |= {
            "ffn_up.weight": (2 * hp.ffn_size, hidden),
            "ffn_down.weight": (hidden, hp.ffn_size),
        }
    else:
        shapes |= {
            "ffn_gate.weight": (hp.ffn_size, hidden),
            "ffn_up.weight": (hp.ffn_size, hidden),
            "ffn_down.weight": (hidden, hp.ffn_size),
        }
    if hp.attn_output_bias:
        shapes |= {"attn_output.bias": (hidden,)}
    if hp.mlp_bias:
        shapes |= {"ffn_gate.bias": (hp.ffn_size,), "ffn_up.bias": (hp.ffn_size,)}
        shapes |= {"ffn_down.bias": (hidden,)}
    if hp.qk_norm:
        shapes |= {"attn_q_norm.weight": (hp.head_dim,), "attn_k_norm.weight": (hp.head_dim,)}
    if hp.architecture in SANDWICH_ARCHS:
        shapes |= {"post_attention_norm.weight": (hidden,), "post_ffw_norm.weight": (hidden,)}
    out = {f"blk.{i}.{name}": ExpectedTensor(shape) for name, shape in shapes.items()}
    if hp.is_moe:  # a router bias is optional (gpt-oss has one), but checked when present
        out[f"blk.{i}.ffn_gate_inp.bias"] = ExpectedTensor((hp.n_experts,), required=False)
    return out


def _iter_expected(hp: ModelHParams) -> Iterator[tuple[str, ExpectedTensor]]:
    yield "token_embd.weight", ExpectedTensor((hp.vocab_size, hp.hidden_size))
    yield "output_norm.weight", ExpectedTensor((hp.hidden_size,))
    yield "output.weight", ExpectedTensor((hp.vocab_size, hp.hidden_size), not hp.tie_embeddings)
    # RoPE frequency divisors, checked when present: llama-3 style (rope_freqs) and LongRoPE's
    # pair (rope_factors_long/short; a GGUF phi3 file has them exactly when it is longrope)
    pairs = (hp.rotary_dim // 2,)
    yield "rope_freqs.weight", ExpectedTensor(pairs, required=False)
    longrope = hp.rope_scaling.kind == "longrope" and not hp.rope_scaling.long_factor
    for name in ("rope_factors_long.weight", "rope_factors_short.weight"):
        yield name, ExpectedTensor(pairs, required=longrope)
    for i in range(hp.n_layers):
        yield from _layer(hp, i).items()


def expected_tensors(hp: ModelHParams) -> dict[str, ExpectedTensor]:
    """GGUF tensor name -> expected shape (the torch runner's loader stacks a safetensors
    checkpoint's experts under these names)."""
    return dict(_iter_expected(hp))


@dataclass(frozen=True)
class HFNames:
    """Where a checkpoint keeps the decoder: its tensors' prefix and the LM head's name."""

    prefix: str = "model."
    head: str = "lm_head.weight"

    @classmethod
    def of(cls, tensor_names: Iterable[str]) -> HFNames:
        """The naming of a checkpoint, told by where its embedding table is."""
        names = set(tensor_names)
        for prefix, head in _LAYOUTS:
            if f"{prefix}embed_tokens.weight" in names:
                return cls(prefix, head)
        return cls()

    def top(self) -> dict[str, str]:
        """GGUF name -> HF name of the tensors outside the layers."""
        return {
            "token_embd.weight": f"{self.prefix}embed_tokens.weight",
            "output_norm.weight": f"{self.prefix}norm.weight",
            "output.weight": self.head,
        }


# (decoder prefix, LM head): text models, then multimodal gemma3 (transformers 5.x, 4.x)
_LAYOUTS = (
    ("model.", "lm_head.weight"),
    ("model.language_model.", "lm_head.weight"),
    ("language_model.model.", "language_model.lm_head.weight"),
)
_HF_LAYER = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "ffn_gate_inp": "mlp.gate",  # the MoE router
}
# a GGUF expert stack is one tensor per expert in a Hugging Face checkpoint
_HF_EXPERTS = {
    "ffn_gate_exps": "gate_proj",
    "ffn_up_exps": "up_proj",
    "ffn_down_exps": "down_proj",
}
# gemma2/3 have four norms per layer: GGUF's ffn_norm is HF's pre_feedforward_layernorm
_HF_LAYER_GEMMA = _HF_LAYER | {
    "ffn_norm": "pre_feedforward_layernorm",
    "post_attention_norm": "post_attention_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
}
# phi3's fused projections: one qkv_proj, one gate_up_proj (GGUF's ffn_up, gate rows first)
_HF_LAYER_PHI3 = {
    k: v for k, v in _HF_LAYER.items() if k not in ("attn_q", "attn_k", "attn_v", "ffn_gate")
} | {"attn_qkv": "self_attn.qkv_proj", "ffn_up": "mlp.gate_up_proj"}


def _hf_layer_table(arch: str) -> dict[str, str]:
    if arch in SANDWICH_ARCHS:
        return _HF_LAYER_GEMMA
    return _HF_LAYER_PHI3 if arch in FUSED_ARCHS else _HF_LAYER


_BLK = re.compile(r"blk\.(\d+)\.(\w+)\.(weight|bias)")
_HF_BLK = re.compile(r"layers\.(\d+)\.(.+)\.(weight|bias)")


def hf_tensor_name(gguf_name: str, arch: str, names: HFNames = HFNames()) -> str:
    """The Hugging Face checkpoint name of a GGUF tensor name (supported archs)."""
    top = names.top()
    if gguf_name in top:
        return top[gguf_name]
    match = _BLK.fullmatch(gguf_name)
    table = _hf_layer_table(arch)
    if match is None or match.group(2) not in table:
        raise KeyError(gguf_name)
    layer, part, kind = match.groups()
    return f"{names.prefix}layers.{layer}.{table[part]}.{kind}"


def hf_expert_names(gguf_name: str, n_experts: int, names: HFNames = HFNames()) -> list[str]:
    """The per-expert Hugging Face names of a GGUF expert stack (blk.N.ffn_*_exps.weight), in
    expert order; [] for any other name."""
    match = _BLK.fullmatch(gguf_name)
    if match is None or match.group(2) not in _HF_EXPERTS or match.group(3) != "weight":
        return []
    layer, proj = match.group(1), _HF_EXPERTS[match.group(2)]
    return [f"{names.prefix}layers.{layer}.mlp.experts.{e}.{proj}.weight" for e in range(n_experts)]


def gguf_tensor_name(hf_name: str, arch: str, names: HFNames = HFNames()) -> str | None:
    """The GGUF name of a Hugging Face tensor name, None when the decoder does not read it."""
    for gguf_name, name in names.top().items():
        if name == hf_name:
            return gguf_name
    if not hf_name.startswith(names.prefix):
        return None
    match = _HF_BLK.fullmatch(hf_name[len(names.prefix) :])
    if match is None:
        return None
    layer, module, kind = match.groups()
    table = _hf_layer_table(arch)
    for part, hf_module in table.items():
        if hf_module == module:
            return f"blk.{layer}.{part}.{kind}"
    return None


def check_tensor_shapes(
    hp: ModelHParams, shapes: dict[str, tuple[int, ...]], hf_names: HFNames | None = None
) -> None:
    """Raise ModelFileError (no file prefix) for the first missing or mis-shaped tensor; names
    are GGUF's, or a Hugging Face checkpoint's when hf_names says how it spells them."""
    for gguf_name, exp in _iter_expected(hp):  # lazily: fail at the first missing layer
        if hf_names is not None and gguf_name in ROPE_FACTOR_TENSORS:
            continue  # GGUF-only: a config.json holds these numbers (rope_scaling)
        experts = hf_expert_names(gguf_name, hp.n_experts, hf_names) if hf_names else []
        if experts:
            _check_experts(experts, exp.shape[1:], shapes, hp.architecture)
            continue
        name = (
            gguf_name if hf_names is None else hf_tensor_name(gguf_name, hp.architecture, hf_names)
        )
        shape = shapes.get(name)
        if shape is None:
            if exp.required:
                raise ModelFileError(f"missing tensor {name} ({hp.architecture})")
            continue
        if tuple(shape) != exp.shape:
            raise ModelFileError(
                f"tensor {name} has shape {tuple(shape)}, expected {exp.shape} "
                f"from the {hp.architecture} hyperparameters"
            )


def _check_experts(
    names: list[str], shape: tuple[int, ...], shapes: dict[str, tuple[int, ...]], arch: str
) -> None:
    """Every expert's matrix of one HF stack present, each of shape `shape`."""
    for name in names:
        got = shapes.get(name)
        if got is None:
            raise ModelFileError(f"missing tensor {name} ({arch})")
        if tuple(got) != shape:
            raise ModelFileError(
                f"tensor {name} has shape {tuple(got)}, expected {shape} "
                f"from the {arch} hyperparameters"
            )
