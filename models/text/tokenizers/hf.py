"""HFTokenizer: a Hugging Face folder's tokenizer.json through the `tokenizers` library."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from ember.models.errors import ModelFileError
from ember.models.files.safetensors import optional_json
from ember.models.files.tokenizer_config import read_tokenizer_config
from ember.models.text.tokenizers.base import EOT_SPELLINGS
from ember.text import clean

_BYTE_TOKEN = re.compile(r"<0x([0-9A-Fa-f]{2})>")


@lru_cache(maxsize=1)
def _byte_level_decoder() -> dict[str, int]:
    """GPT-2's printable stand-in character for each byte, inverted (char -> byte)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    printable += list(range(ord("®"), ord("ÿ") + 1))
    table = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return {char: b for b, char in table.items()}


def _types(node: object) -> set[str]:
    """Every "type" named in a (possibly nested) tokenizer.json component."""
    found: set[str] = set()
    if isinstance(node, dict):
        if isinstance(node.get("type"), str):
            found.add(node["type"])
        for child in node.values():
            found |= _types(child)
    elif isinstance(node, list):
        for child in node:
            found |= _types(child)
    return found


class HFTokenizer:
    """Tokenizer of a Hugging Face folder (tokenizer.json + tokenizer_config.json)."""

    def __init__(self, folder: Path | str) -> None:
        from tokenizers import Tokenizer as RawTokenizer

        self.folder = Path(folder)
        path = self.folder / "tokenizer.json"
        data = optional_json(path)  # size, nesting and UTF-8 checked before the library parses it
        try:
            self._special = RawTokenizer.from_file(str(path))  # parses special-token spellings
            self._plain = RawTokenizer.from_file(str(path))  # treats them as text
        except Exception as exc:  # tokenizers raises a bare Exception on bad files
            raise ModelFileError(f"{path}: cannot load tokenizer ({exc})") from exc
        self._plain.encode_special_tokens = True
        config = read_tokenizer_config(self.folder)
        generation = optional_json(self.folder / "generation_config.json")
        self._added = {t["id"]: t["content"] for t in data.get("added_tokens", [])}
        self.special_ids = frozenset(
            t["id"] for t in data.get("added_tokens", []) if t.get("special")
        )
        self._byte_level = "ByteLevel" in _types(data.get("decoder")) | _types(
            data.get("pre_tokenizer")
        )
        self._metaspace = bool({"Metaspace", "Replace"} & _types(data.get("decoder")))
        self.vocab_size = self._special.get_vocab_size(with_added_tokens=True)
        self.bos_id = self._id_of(config.bos_token)
        self.eos_id = self._id_of(config.eos_token)
        self.add_bos = self._wants_bos(config.add_bos_token, data)
        self.eot_ids = self._end_ids(generation)
        self._bytes_cache: dict[int, bytes] = {}

    def _id_of(self, text: str | None) -> int | None:
        return None if text is None else self._special.token_to_id(text)

    def _wants_bos(self, add_bos_token: bool | None, data: dict[str, Any]) -> bool:
        if self.bos_id is None:
            return False
        if add_bos_token is not None:
            return add_bos_token
        # No explicit flag: a post-processor template that starts with the BOS token adds it.
        single = (data.get("post_processor") or {}).get("single") or []
        first = single[0] if single else {}
        return first.get("SpecialToken", {}).get("id") == self._special.id_to_token(self.bos_id)

    def _end_ids(self, generation: dict[str, Any]) -> frozenset[int]:
        ends = {self.eos_id} if self.eos_id is not None else set()
        listed = generation.get("eos_token_id")
        for value in listed if isinstance(listed, list) else [listed]:
            if isinstance(value, int) and 0 <= value < self.vocab_size:
                ends.add(value)
        ends |= {i for i, text in self._added.items() if text in EOT_SPELLINGS}
        spelled = {text: i for i, text in self._added.items()}
        if {"<|return|>", "<|call|>", "<|end|>"} <= spelled.keys():
            # harmony (gpt-oss): <|end|> closes one message of a reply (the reasoning, before
            # the answer); <|return|> and <|call|> end it. llama.cpp drops <|end|> the same way.
            ends.discard(spelled["<|end|>"])
        return frozenset(ends)

    def encode(self, text: str, *, add_bos: bool = False, parse_special: bool = False) -> list[int]:
        """Token ids of text; special-token spellings stay plain text unless parse_special."""
        raw = self._special if parse_special else self._plain
        ids: list[int] = raw.encode(clean(text), add_special_tokens=False).ids
        if add_bos and self.bos_id is not None:
            ids.insert(0, self.bos_id)
        return ids

    def decode(self, ids: list[int]) -> str:
        """Text of ids (special tokens rendered as their text)."""
        return str(self._special.decode(list(ids), skip_special_tokens=False))

    def token_bytes(self, token_id: int) -> bytes:
        """The raw bytes one token contributes (byte-fallback tokens give their single byte)."""
        cached = self._bytes_cache.get(token_id)
        if cached is None:
            cached = self._bytes_cache[token_id] = self._piece_bytes(token_id)
        return cached

    def _piece_bytes(self, token_id: int) -> bytes:
        if token_id in self._added:
            return self._added[token_id].encode("utf-8")
        piece = self._special.id_to_token(token_id)
        if piece is None:
            raise ValueError(f"token id {token_id} is outside the vocabulary ({self.vocab_size})")
        if self._byte_level:
            table = _byte_level_decoder()
            return bytes(table[char] for char in piece)
        byte = _BYTE_TOKEN.fullmatch(piece)
        if byte is not None:
            return bytes([int(byte.group(1), 16)])
        return (piece.replace("▁", " ") if self._metaspace else piece).encode("utf-8")
