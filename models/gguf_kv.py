"""A small, bounded reader of a GGUF file's key/value metadata (no tensors), for templates.

It reads only what the chat-template and tokenizer code need (strings, numbers, and chosen
entries of the token list) in one pass over the header, without building Python objects for
the whole vocabulary, so it costs milliseconds where a full reader costs seconds.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO

from ember.models.errors import ModelFileError

_MAGIC = b"GGUF"
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}  # fmt: skip
_STRING, _ARRAY = 8, 9
_MAX_STRING = 64 << 20  # no single metadata string in a sane file is this long


class _Reader:
    def __init__(self, f: BinaryIO, path: Path, size: int) -> None:
        self.f, self.path, self.size = f, path, size

    def fail(self, reason: str) -> ModelFileError:
        return ModelFileError(f"{self.path}: {reason}")

    def take(self, count: int) -> bytes:
        data = self.f.read(count)
        if len(data) != count:
            raise self.fail(f"truncated metadata at byte {self.f.tell()}")
        return data

    def scalar(self, kind: int) -> int | float | bool:
        fmt = _SCALARS[kind]
        value: int | float | bool = struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]
        return value

    def string_length(self) -> int:
        length = int(self.scalar(10))
        if length > min(_MAX_STRING, self.size - self.f.tell()):
            raise self.fail(f"string of {length} bytes at byte {self.f.tell()} overruns the file")
        return length

    def string(self) -> str:
        return self.take(self.string_length()).decode("utf-8", errors="replace")

    def skip(self, kind: int) -> None:
        if kind in _SCALARS:
            self.f.seek(struct.calcsize(_SCALARS[kind]), 1)
        elif kind == _STRING:
            self.f.seek(self.string_length(), 1)
        elif kind == _ARRAY:
            item_kind, count = int(self.scalar(4)), int(self.scalar(10))
            if count > self.size:
                raise self.fail(f"array of {count} items overruns the file")
            if item_kind in _SCALARS:
                self.f.seek(count * struct.calcsize(_SCALARS[item_kind]), 1)
            else:
                for _ in range(count):
                    self.skip(item_kind)
        else:
            raise self.fail(f"unknown metadata value type {kind}")


def read_gguf_metadata(
    path: Path | str,
    keys: set[str],
    token_keys: set[str] = frozenset(),  # type: ignore[assignment]
) -> tuple[dict[str, object], dict[str, str]]:
    """Scalar/string values of the wanted keys, and the token text of id-valued token_keys."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            reader = _Reader(f, path, size)
            if reader.take(4) != _MAGIC:
                raise reader.fail("not a GGUF file (bad magic)")
            version = int(reader.scalar(4))
            if version not in (2, 3):
                raise reader.fail(f"unsupported GGUF version {version}")
            reader.scalar(10)  # tensor count
            kv_count = int(reader.scalar(10))
            if kv_count > size // 8:
                raise reader.fail(f"{kv_count} metadata entries cannot fit in {size} bytes")
            values, tokens_at = _scan(reader, kv_count, keys | set(token_keys))
            ids = {k: v for k, v in values.items() if k in token_keys and isinstance(v, int)}
            texts = _token_texts(reader, tokens_at, set(ids.values())) if ids else {}
            return values, {k: texts[i] for k, i in ids.items() if i in texts}
    except OSError as exc:
        raise ModelFileError(f"{path}: cannot read ({exc})") from exc


def _scan(reader: _Reader, kv_count: int, keys: set[str]) -> tuple[dict[str, object], int]:
    """One pass over the metadata: wanted values, and where the token list starts (or -1)."""
    values: dict[str, object] = {}
    tokens_at = -1
    for _ in range(kv_count):
        key = reader.string()
        kind = int(reader.scalar(4))
        if key == "tokenizer.ggml.tokens" and kind == _ARRAY:
            tokens_at = reader.f.tell()
        if key in keys and (kind in _SCALARS or kind == _STRING):
            values[key] = reader.string() if kind == _STRING else reader.scalar(kind)
        else:
            reader.skip(kind)
    return values, tokens_at


def _token_texts(reader: _Reader, tokens_at: int, wanted: set[int]) -> dict[int, str]:
    if tokens_at < 0:
        return {}
    reader.f.seek(tokens_at)
    item_kind, count = int(reader.scalar(4)), int(reader.scalar(10))
    if item_kind != _STRING:
        raise reader.fail("tokenizer.ggml.tokens is not a string array")
    texts: dict[int, str] = {}
    for index in range(min(count, max(wanted) + 1)):
        if index in wanted:
            texts[index] = reader.string()
        else:
            reader.skip(_STRING)
    return texts
