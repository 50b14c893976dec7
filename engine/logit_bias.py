"""A request's logit bias made ready for the sampler: text entries become their token ids
(each id of a text gets the text's bias, as llama.cpp's server does), and every id is checked
against the model's vocabulary; engine/sampling.py applies the result."""

from __future__ import annotations

from dataclasses import replace

from ember.engine.errors import EngineError
from ember.engine.request import SamplingParams
from ember.models.text.tokenizers.base import Tokenizer


def resolve_logit_bias(
    sampling: SamplingParams, tokenizer: Tokenizer, vocab_size: int
) -> SamplingParams:
    """sampling with logit_bias_text folded into logit_bias (ids only); EngineError naming
    the entry when an id is past the vocabulary or a text has no tokens."""
    if not sampling.logit_bias and not sampling.logit_bias_text:
        return sampling
    bias = list(sampling.logit_bias)
    for text, value in sampling.logit_bias_text:
        ids = tokenizer.encode(text, add_bos=False)
        if not ids:
            raise EngineError(f"sampling logit_bias {text[:40]!r}: the text has no tokens")
        bias += [(token_id, value) for token_id in ids]
    for token_id, _ in bias:
        if token_id >= vocab_size:
            raise EngineError(
                f"sampling logit_bias: token id {token_id} is past the vocabulary ({vocab_size})"
            )
    return replace(sampling, logit_bias=tuple(bias), logit_bias_text=())
