"""What a mixture-of-experts model needs: total and active parameters, and the memory with its
experts left in the mmap'd file versus all resident.

A MoE layer holds E experts of three (hidden x width) matrices each, and a token runs only k of
them. The engines keep experts mmap'd: a page of an expert no token chose is never read, so the
working set of one token is the weights minus the unchosen experts' share. Over a long chat more
experts get paged in (the OS can drop them again under pressure); "resident" is the bound when
every expert has been used.

Parameter counts come from the hyperparameters: attention, router and experts per layer, plus
the embedding and output tables when the vocabulary size is known (a GGUF header peek often ends
before the token list: the counts then leave the tables out, and say so).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Experts:
    """The sizes that split a MoE model's parameters into always-used and routed ones."""

    layers: int
    hidden: int
    count: int  # experts per layer
    used: int  # experts per token
    width: int  # one expert's FFN width
    attention_params: int  # per layer: q, k, v and output projections
    vocab: int = 0  # 0 = unknown: the token tables are left out of the counts

    @property
    def expert_params(self) -> int:
        """Every expert's weights over all layers."""
        return 3 * self.hidden * self.width * self.count * self.layers

    @property
    def total_params(self) -> int:
        """All weights (without the token tables when the vocabulary is unknown)."""
        router = self.count * self.hidden * self.layers
        tables = 2 * self.vocab * self.hidden
        return self.attention_params * self.layers + router + self.expert_params + tables

    @property
    def active_params(self) -> int:
        """The weights one token runs through: all but the unchosen experts."""
        return self.total_params - self.expert_params * (self.count - self.used) // self.count

    def working_set_bytes(self, weights_bytes: int) -> int:
        """File bytes one token reads: the weights less the unchosen experts' share of them."""
        return weights_bytes * self.active_params // max(1, self.total_params)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready."""
        return {
            "experts": self.count,
            "experts_used": self.used,
            "total_params": self.total_params,
            "active_params": self.active_params,
            "counts_embeddings": self.vocab > 0,
        }


def experts_of(
    num: Callable[[str], int | None],
    keys: tuple[str, str, str, str, str, str, str, str],
) -> Experts | None:
    """Experts from a lookup of (layers, hidden, heads, kv heads, head dim, expert count,
    experts used, expert width, [vocab]) keys; None for a dense model or missing sizes."""
    layers, hidden, heads, kv_heads, head_dim, count, used, width = (num(k) for k in keys)
    if not (count and used and width and layers and hidden and heads):
        return None
    kv_heads = kv_heads or heads
    head_dim = head_dim or hidden // heads
    attention = hidden * head_dim * (2 * heads + 2 * kv_heads)
    return Experts(layers, hidden, count, min(used, count), width, attention)


GGUF_KEYS = (
    "block_count",
    "embedding_length",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.key_length",
    "expert_count",
    "expert_used_count",
    "expert_feed_forward_length",
)
CONFIG_KEYS = (
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "num_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
)
