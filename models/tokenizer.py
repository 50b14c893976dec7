"""One Tokenizer protocol; GGUF vocabularies through llama.cpp, tokenizer.json through `tokenizers`.

(Implementation pending in issue 2: LlamaCppTokenizer, HFTokenizer, open_tokenizer().)
"""

from __future__ import annotations

from typing import Protocol


class Tokenizer(Protocol):
    """Text <-> token ids for one model."""

    vocab_size: int
    bos_id: int | None
    eos_id: int | None
    eot_ids: frozenset[
        int
    ]  # every id that ends a turn or the text (EOS, <end_of_turn>, <|im_end|>...)
    add_bos: bool  # whether the model's metadata asks for BOS at the start of a prompt

    def encode(self, text: str, *, add_bos: bool = False, parse_special: bool = False) -> list[int]:
        """Token ids of text; special-token spellings stay plain text unless parse_special."""
        ...

    def decode(self, ids: list[int]) -> str:
        """Text of ids (special tokens rendered as their text)."""
        ...

    def token_bytes(self, token_id: int) -> bytes:
        """The raw bytes one token contributes (byte-fallback tokens give their single byte)."""
        ...
