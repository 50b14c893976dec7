"""Fill-in-the-middle: a code model's prefix / suffix / middle tokens and the prompt they make.

Code models trained for FIM mark the code before the cursor, the code after it and the place to
write; the vocabularies spell these markers differently, so they are found by spelling: each
spelling must encode to one special token. The prompt is prefix-suffix-middle (PSM), the order
llama.cpp's /infill uses: [BOS] PRE prefix SUF suffix MID; the user's text is encoded with
special spellings kept as plain text.
"""

from __future__ import annotations

from dataclasses import dataclass

from ember.models.text.tokenizers.base import Tokenizer

# (prefix, suffix, middle) spellings, most common first
SPELLINGS = (
    ("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"),  # Qwen2.5-Coder, CodeGemma
    ("<fim_prefix>", "<fim_suffix>", "<fim_middle>"),  # StarCoder, SantaCoder
    ("<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"),  # DeepSeek-Coder
    ("<PRE>", "<SUF>", "<MID>"),  # CodeLlama
    ("[PREFIX]", "[SUFFIX]", "[MIDDLE]"),  # Codestral
)


@dataclass(frozen=True)
class FimTokens:
    """The three marker ids of a FIM-trained vocabulary."""

    prefix: int
    suffix: int
    middle: int


def _special(tokenizer: Tokenizer, spelling: str) -> int | None:
    ids = tokenizer.encode(spelling, parse_special=True)
    return ids[0] if len(ids) == 1 and ids[0] in tokenizer.special_ids else None


def fim_tokens(tokenizer: Tokenizer) -> FimTokens | None:
    """The model's FIM markers, or None when its vocabulary has none."""
    for spellings in SPELLINGS:
        ids = [_special(tokenizer, s) for s in spellings]
        if all(i is not None for i in ids):
            prefix, suffix, middle = ids
            assert prefix is not None and suffix is not None and middle is not None
            return FimTokens(prefix, suffix, middle)
    return None


def fim_prompt(tokenizer: Tokenizer, tokens: FimTokens, prefix: str, suffix: str) -> list[int]:
    """The PSM prompt ids: the model writes what goes between prefix and suffix."""
    ids = [tokenizer.bos_id] if tokenizer.add_bos and tokenizer.bos_id is not None else []
    ids += [tokens.prefix, *tokenizer.encode(prefix), tokens.suffix, *tokenizer.encode(suffix)]
    return ids + [tokens.middle]
