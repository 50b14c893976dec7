"""One Tokenizer protocol; GGUF vocabularies through llama.cpp, tokenizer.json through `tokenizers`.

`open_tokenizer(path)` (open.py) picks the implementation: a .gguf file gets `LlamaCppTokenizer` (llama.cpp's
own vocabulary code, so ids equal llama.cpp's), a Hugging Face folder gets `HFTokenizer`.
`IncrementalDecoder` turns a stream of ids into text without ever emitting half a character.
"""

from __future__ import annotations

import codecs
from typing import Protocol

# Spellings that end a turn in common chat formats (llama.cpp treats these as end-of-generation).
EOT_SPELLINGS = frozenset(
    {
        "<|im_end|>",
        "<end_of_turn>",
        "<|eot_id|>",
        "<|end|>",
        "<|endoftext|>",
        "<|end_of_text|>",
        "<|eom_id|>",
        "<EOT>",
        "</s>",
        "<eos>",
    }
)


class Tokenizer(Protocol):
    """Text <-> token ids for one model."""

    vocab_size: int
    bos_id: int | None
    eos_id: int | None
    # every id that ends a turn or the text (EOS, <end_of_turn>, <|im_end|>...)
    eot_ids: frozenset[int]
    add_bos: bool  # whether the model's metadata asks for BOS at the start of a prompt

    def encode(self, text: str, *, add_bos: bool = False, parse_special: bool = False) -> list[int]:
        """Token ids of text; special-token spellings stay plain text unless parse_special.

        Lone surrogates are encoded as U+FFFD (ember.text.clean), never an exception."""
        ...

    def decode(self, ids: list[int]) -> str:
        """Text of ids (special tokens rendered as their text)."""
        ...

    def token_bytes(self, token_id: int) -> bytes:
        """The raw bytes one token contributes (byte-fallback tokens give their single byte)."""
        ...

    @property
    def special_ids(self) -> frozenset[int]:
        """Control tokens (turn markers, BOS, EOS...): plain text never encodes to them."""
        ...


class IncrementalDecoder:
    """Ids in, text out, one token at a time; a character split over tokens waits for its last byte.

    Bytes that can never form valid UTF-8 come out as U+FFFD as soon as that is certain.
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def push(self, token_id: int) -> str:
        """The new complete text after token_id (may be empty while a character is incomplete)."""
        return str(self._utf8.decode(self._tokenizer.token_bytes(token_id)))

    def flush(self) -> str:
        """End of stream: an unfinished character becomes U+FFFD."""
        return str(self._utf8.decode(b"", final=True))

    @property
    def pending_bytes(self) -> int:
        """How many bytes of an unfinished character are held back."""
        buffered, _ = self._utf8.getstate()
        return len(buffered)
