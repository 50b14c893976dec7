"""Model hyperparameters shared by GGUF files and Hugging Face safetensors folders.

Built by from_gguf.py (`from_gguf(metadata, n_tokens, tensor_shapes, source)`) and from_hf.py
(`from_hf_config(config, source)`), which import this module.

Public API:
    RopeScaling           (rope.py) kind ("none"/"linear"/"yarn"/"llama3"/"dynamic"/"longrope"),
                          factor, original_context_length, each kind's parameters
    ModelHParams          frozen dataclass, validated at construction (ModelFileError names the field)
    SUPPORTED_ARCHS       architectures the torch runner implements
    sliding_pattern(layers, declared) -> int | None   every-Nth-layer-global pattern of a layout
    MAX_DIM, MAX_LAYERS, MAX_CONTEXT   the plausibility caps every size is checked against

Conventions the runners rely on:
- head_dim is the query/key head size, head_dim_v the value head size.
- Layer i uses sliding-window attention iff `is_sliding(i)`; gemma3 makes every 6th layer global
  (i + 1 divisible by sliding_window_pattern) and rotates sliding layers with rope_local_theta.
- rope_scaling applies to global layers only when rope_local_theta is set (gemma3), else to all.
- attention scale = query_pre_attn_scalar ** -0.5 (head_dim unless the model says otherwise).
- qkv_bias: q, k and v projections have biases; attn_output_bias and mlp_bias likewise for the
  output projection and the three MLP projections (llama's attention_bias / mlp_bias).
- norm_weight_offset: RMSNorm computes x * (offset + w). HF gemma3 checkpoints store w - 1
  (offset 1.0); llama.cpp's converter already adds the 1 into GGUF weights (offset 0.0).
- GGUF llama, smollm3 and mistral3 files store Q/K rows permuted for interleaved RoPE
  (rope_interleaved=True); HF and the other GGUF architectures use the NeoX half-split layout.
- RoPE rotates the first rotary_dim dimensions of each head (rope_dim; Phi-4-mini: 96 of 128,
  transformers' partial_rotary_factor), the rest pass through. Layer i rotates at all iff
  `uses_rope(i)`: smollm3 leaves every nope_layer_interval-th layer without positions (NoPE).
- attn_temperature_scale (mistral3, transformers' llama_4_scaling_beta) multiplies each query at
  position p by 1 + scale * ln(1 + floor(p / attn_temperature_length)) after RoPE.
- phi3 keeps q|k|v in one attn_qkv tensor and gate|up in one ffn_up tensor (tensors.py).
- Mixture of experts (MOE_ARCHS): n_experts experts of width expert_ffn_size per layer, the
  router picks n_experts_used per token (softmax over all experts, then top-k); with
  norm_topk_prob the chosen weights are renormalised to sum to 1 (llama.cpp always does for
  qwen3moe). Dense architectures leave the four fields at 0 / False.
- GGUF llama-3.1-style scaling arrives as a `rope_freqs.weight` tensor (head_dim/2 frequency
  divisors) rather than metadata, so rope_scaling reads "none" there: use the tensor when present.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

from ember.models.errors import ModelFileError
from ember.models.files.hparams.rope import RopeScaling

SUPPORTED_ARCHS: tuple[str, ...] = ("llama", "qwen2", "qwen3", "gemma3", "qwen3moe")
SUPPORTED_ARCHS += ("phi3", "gemma2", "smollm3", "mistral3")  # dense families of issue 24
MOE_ARCHS: tuple[str, ...] = ("qwen3moe",)  # every layer's FFN is a routed mixture of experts
ACTIVATIONS: tuple[str, ...] = ("silu", "gelu_tanh")


_POSITIVE_INTS = (
    "n_layers",
    "hidden_size",
    "ffn_size",
    "n_heads",
    "n_kv_heads",
    "head_dim",
    "head_dim_v",
    "vocab_size",
    "context_length",
)
MAX_DIM = 1 << 24  # sanity cap for any single size (16 M): catches garbage metadata
MAX_LAYERS = 4096  # the largest released models have ~130 layers
MAX_CONTEXT = 1 << 31  # tokens; released models reach 10 M
MAX_ROPE_THETA = 1e15


@dataclass(frozen=True)
class ModelHParams:
    """Architecture and sizes of a decoder-only transformer, validated at construction."""

    architecture: str
    n_layers: int
    hidden_size: int
    ffn_size: int
    n_heads: int
    n_kv_heads: int
    head_dim: int  # query/key head size (GGUF attention.key_length)
    head_dim_v: int  # value head size (GGUF attention.value_length)
    vocab_size: int
    context_length: int
    rope_theta: float
    norm_eps: float
    rope_scaling: RopeScaling = field(default_factory=RopeScaling)
    rope_local_theta: float | None = None  # sliding layers' RoPE base (gemma3: 10000)
    sliding_window: int | None = None  # tokens a sliding layer attends to
    sliding_window_pattern: int | None = None  # every Nth layer is global (gemma3: 6)
    attn_logit_softcap: float | None = None
    final_logit_softcap: float | None = None
    tie_embeddings: bool = False
    qkv_bias: bool = False
    attn_output_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False
    query_pre_attn_scalar: float | None = None  # None: head_dim
    hidden_act: str = "silu"
    norm_weight_offset: float = 0.0
    rope_interleaved: bool = False
    n_experts: int = 0  # experts per MoE layer (GGUF expert_count, HF num_experts)
    n_experts_used: int = 0  # experts chosen per token (expert_used_count, num_experts_per_tok)
    expert_ffn_size: int = 0  # one expert's hidden width (moe_intermediate_size)
    norm_topk_prob: bool = False  # renormalise the chosen experts' weights to sum to 1
    rope_dim: int | None = None  # dimensions RoPE rotates per head (None: all of head_dim)
    nope_layer_interval: int | None = None  # every Nth layer has no RoPE (smollm3: 4)
    attn_temperature_scale: float | None = None  # mistral3: query temperature by position
    attn_temperature_length: int | None = None  # its floor divisor (the original context)

    def __post_init__(self) -> None:
        if not self.architecture:
            raise ModelFileError("architecture: empty")
        for name in _POSITIVE_INTS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ModelFileError(f"{name}: must be a positive integer, got {value!r}")
            if value > (MAX_CONTEXT if name == "context_length" else MAX_DIM):
                raise ModelFileError(f"{name}: {value} is implausibly large")
        if self.n_layers > MAX_LAYERS:
            raise ModelFileError(f"n_layers: {self.n_layers} is implausibly large")
        if self.head_dim % 2:
            raise ModelFileError(f"head_dim: {self.head_dim} is odd (RoPE rotates pairs)")
        if self.rope_scaling.kind == "dynamic" and self.head_dim <= 2:
            raise ModelFileError("head_dim: dynamic RoPE scaling needs head_dim > 2")
        if self.n_heads % self.n_kv_heads:
            raise ModelFileError(
                f"n_kv_heads: {self.n_kv_heads} does not divide n_heads {self.n_heads}"
            )
        for name in ("rope_theta", "rope_local_theta"):
            value = getattr(self, name)
            if value is not None:  # RoPE bases: log(theta) divides (yarn), theta ** x must grow
                _check_positive_float(name, value)
                if not 1.0 < value <= MAX_ROPE_THETA:
                    raise ModelFileError(
                        f"{name}: must be in (1, {MAX_ROPE_THETA:g}], got {value!r}"
                    )
        _check_positive_float("norm_eps", self.norm_eps)
        for name in ("attn_logit_softcap", "final_logit_softcap"):
            value = getattr(self, name)
            if value is not None:
                _check_positive_float(name, value)
        if self.query_pre_attn_scalar is not None:
            _check_positive_float("query_pre_attn_scalar", self.query_pre_attn_scalar)
        for name in ("sliding_window", "sliding_window_pattern"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool)
                or not isinstance(value, int)
                or not 0 < value <= MAX_CONTEXT
            ):
                raise ModelFileError(f"{name}: must be a positive integer, got {value!r}")
        if self.sliding_window_pattern is not None and self.sliding_window is None:
            raise ModelFileError("sliding_window_pattern: set without sliding_window")
        if self.hidden_act not in ACTIVATIONS:
            raise ModelFileError(f"hidden_act: unsupported activation {self.hidden_act!r}")
        if self.norm_weight_offset not in (0.0, 1.0):
            raise ModelFileError("norm_weight_offset: must be 0.0 or 1.0")
        self._check_rope()
        self._check_experts()

    def _check_rope(self) -> None:
        """Partial rotary dims, NoPE layers and the query temperature, each within range."""
        dim = self.rope_dim
        if dim is not None and (
            isinstance(dim, bool) or not isinstance(dim, int) or not 2 <= dim <= self.head_dim
        ):
            raise ModelFileError(f"rope_dim: must be in 2..head_dim {self.head_dim}, got {dim!r}")
        if self.rotary_dim % 2:
            raise ModelFileError(f"rope_dim: {self.rotary_dim} is odd (RoPE rotates pairs)")
        if self.rope_interleaved and self.rotary_dim != self.head_dim:
            raise ModelFileError(
                f"rope_dim: partial rotary ({self.rotary_dim} of {self.head_dim}) with "
                "interleaved RoPE rows is not supported"
            )
        self.rope_scaling.check_rotary_dim(self.rotary_dim)
        step = self.nope_layer_interval
        if step is not None and (
            isinstance(step, bool) or not isinstance(step, int) or not 1 <= step <= MAX_LAYERS
        ):
            raise ModelFileError(f"nope_layer_interval: must be a positive integer, got {step!r}")
        if self.attn_temperature_scale is not None:
            _check_positive_float("attn_temperature_scale", self.attn_temperature_scale)
            length = self.attn_temperature_length
            if isinstance(length, bool) or not isinstance(length, int) or length <= 0:
                raise ModelFileError(
                    f"attn_temperature_length: must be a positive integer, got {length!r}"
                )

    def _check_experts(self) -> None:
        """A MoE architecture needs experts, no more used than exist; a dense one has none."""
        counts = ("n_experts", "n_experts_used", "expert_ffn_size")
        for name in counts:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ModelFileError(f"{name}: must be a non-negative integer, got {value!r}")
            if value > MAX_DIM:
                raise ModelFileError(f"{name}: {value} is implausibly large")
        if not self.is_moe:
            if any(getattr(self, name) for name in counts):
                raise ModelFileError(f"n_experts: {self.architecture} is not a mixture of experts")
            return
        for name in counts:
            if getattr(self, name) == 0:
                raise ModelFileError(f"{name}: must be > 0 for {self.architecture} (got 0)")
        if self.n_experts_used > self.n_experts:
            raise ModelFileError(
                f"n_experts_used: {self.n_experts_used} experts per token but only "
                f"{self.n_experts} exist"
            )

    @property
    def is_moe(self) -> bool:
        """Whether every layer's FFN is a routed mixture of experts."""
        return self.architecture in MOE_ARCHS

    @property
    def supported(self) -> bool:
        """Whether the torch runner implements this architecture."""
        return self.architecture in SUPPORTED_ARCHS

    @property
    def rotary_dim(self) -> int:
        """Dimensions of each q/k head that RoPE rotates (the first ones)."""
        return self.head_dim if self.rope_dim is None else self.rope_dim

    def uses_rope(self, layer: int) -> bool:
        """Whether layer `layer` (0-based) rotates q and k at all (smollm3's NoPE layers do not)."""
        step = self.nope_layer_interval
        return step is None or (layer + 1) % step != 0

    @property
    def attn_scale(self) -> float:
        """Multiplier of q·k before softmax."""
        return (self.query_pre_attn_scalar or float(self.head_dim)) ** -0.5

    def is_sliding(self, layer: int) -> bool:
        """Whether layer `layer` (0-based) uses sliding-window attention."""
        if self.sliding_window is None:
            return False
        if self.sliding_window_pattern is None:
            return True
        return (layer + 1) % self.sliding_window_pattern != 0

    def layer_rope_theta(self, layer: int) -> float:
        """RoPE base of layer `layer`: the local base on sliding layers when the model has one."""
        if self.rope_local_theta is not None and self.is_sliding(layer):
            return self.rope_local_theta
        return self.rope_theta

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-ready dict (rope_scaling nested)."""
        out: dict[str, object] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = (
                {g.name: getattr(value, g.name) for g in fields(value)}
                if isinstance(value, RopeScaling)
                else value
            )
        return out


def _check_positive_float(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ModelFileError(f"{name}: must be a number, got {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise ModelFileError(f"{name}: must be a finite number > 0, got {value!r}")


def sliding_pattern(layers: list[bool], declared: int | None = None) -> int | None:
    """The N of "every Nth layer global" that reproduces layers (True = sliding), declared
    first; None when every layer slides or no N fits."""
    if all(layers):
        fits_declared = declared is not None and declared > len(layers)
        return declared if fits_declared else None
    candidates = ([declared] if declared else []) + list(range(2, len(layers) + 1))
    for pattern in candidates:
        if all(s == ((i + 1) % pattern != 0) for i, s in enumerate(layers)):
            return pattern
    return None
