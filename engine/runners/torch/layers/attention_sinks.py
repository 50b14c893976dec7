"""Learned attention sinks (gpt-oss): one trained logit per query head joins every softmax.

For a query of head h with scores s_1..s_L over its keys and the head's sink logit z_h,

    p_j = exp(s_j) / (exp(z_h) + sum_i exp(s_i)),

i.e. a softmax over [s_1..s_L, z_h] whose last column is dropped: the sink takes a share of the
attention and reads no value, so a head can attend to (almost) nothing. The sink logit is not
scaled by 1/sqrt(d) and is not masked; llama.cpp's soft_max_ext / flash-attention sinks and
transformers' eager gpt-oss attention compute the same.

Not to be confused with StreamingLLM's attention sinks (engine/streaming.py, `--sink`): those
are the first tokens of a sequence, kept in the KV cache when the middle is evicted because
trained models park attention on them. Both ideas come from the same observation; gpt-oss
builds a sink into the softmax itself, and the engine still keeps a gpt-oss sequence's first
tokens on eviction, as for any model.
"""

from __future__ import annotations

import torch


def sink_softmax(scores: torch.Tensor, sink_logits: torch.Tensor) -> torch.Tensor:
    """softmax(scores) along the last dim with sink_logits (broadcast to scores[..., :1]) in the
    denominator; float32. Masked (-inf) scores get 0; a row may be all -inf (it then is 0)."""
    lse = torch.logaddexp(torch.logsumexp(scores, dim=-1, keepdim=True), sink_logits)
    return torch.exp(scores - lse)
