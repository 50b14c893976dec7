"""GGUF model files: bounded header validation first, then metadata and zero-copy tensor views.

Public API:
    open_gguf(path) -> GGUFModel            validates everything below; ModelFileError otherwise.
                                            A gguf-split model opens from its first shard
                                            (<stem>-00001-of-0000N.gguf); tensors span all shards
    GGUFModel                               path, shards, architecture, hparams (ModelHParams | None for
                                            architectures we cannot describe), metadata (scalars
                                            and small arrays), metadata_array(key) for large ones
                                            (tokenizer vocab), tokenizer (TokenizerMeta),
                                            chat_template, quant_summary, file_size, tensors,
                                            n_params, supported / check_supported()
    GGUFTensor                              name, qtype (gguf.GGMLQuantizationType), shape in
                                            numpy/torch order (= ggml ne reversed), nbytes,
                                            n_elements, raw (uint8 numpy view of the mmap),
                                            data (the same bytes as a typed / per-row view)
    TokenizerMeta, QuantStat

Checks at open: the header (models/files/gguf_header.py), the hyperparameters (models/files/hparams/hparams.py) and,
for supported architectures (llama, qwen2, qwen3, gemma3), every tensor's presence and shape
(models/files/hparams/tensors.py). Every failure is one ModelFileError line "<file>: <reason>".
The mmap stays open as long as the model or any tensor view is alive.
"""

from __future__ import annotations

import mmap
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ember.models.errors import ModelFileError
from ember.models.files.fields import Fields
from ember.models.files.gguf_header import GGUFHeader, parse_gguf_header, read_array
from ember.models.files.hparams.hparams import SUPPORTED_ARCHS, ModelHParams

if TYPE_CHECKING:
    import numpy as np
    from gguf import GGMLQuantizationType

_SPLIT_NAME = re.compile(r"(?P<stem>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf")


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor: its type, torch-order shape and its bytes as a read-only view of the mmap."""

    name: str
    qtype: GGMLQuantizationType
    shape: tuple[int, ...]  # (out_features, in_features) for matrices: ggml ne reversed
    nbytes: int
    n_elements: int
    offset: int  # absolute byte offset in the file
    raw: np.ndarray  # uint8, length nbytes, zero-copy

    @property
    def data(self) -> np.ndarray:
        """Zero-copy typed view: float/int types as `shape` (BF16 as uint16), quantized types as
        uint8 blocks of shape (*shape[:-1], bytes per row), like gguf.GGUFReader's tensor.data."""
        from gguf.constants import GGML_QUANT_SIZES

        dtype = _PLAIN_DTYPES.get(self.qtype.name)
        if dtype is not None:
            return self.raw.view(dtype).reshape(self.shape)
        block, type_size = GGML_QUANT_SIZES[self.qtype]
        return self.raw.reshape(*self.shape[:-1], self.shape[-1] // block * type_size)


# unquantized ggml types -> numpy dtype (little-endian); numpy has no bfloat16
_PLAIN_DTYPES = {
    "F32": "<f4",
    "F16": "<f2",
    "BF16": "<u2",
    "F64": "<f8",
    "I8": "<i1",
    "I16": "<i2",
    "I32": "<i4",
    "I64": "<i8",
}


@dataclass(frozen=True)
class TokenizerMeta:
    """The tokenizer.ggml.* scalars (the vocabulary itself stays lazy)."""

    model: str | None
    pre: str | None
    n_tokens: int
    bos_id: int | None
    eos_id: int | None
    add_bos: bool | None
    add_eos: bool | None


@dataclass(frozen=True)
class QuantStat:
    """How many tensors of one type, and their bytes."""

    n_tensors: int
    nbytes: int


class GGUFModel:
    """A validated GGUF file: metadata, hyperparameters and tensor views."""

    def __init__(self, path: Path, parts: list[tuple[Path, mmap.mmap, GGUFHeader]]) -> None:
        self.path = path  # the (first) file
        self.shards: list[Path] = [p for p, _, _ in parts]
        _, self._buf, header = parts[0]
        self._header = header
        self.version = header.version
        self.file_size = sum(h.file_size for _, _, h in parts)  # all shards together
        self.alignment = header.alignment
        self.metadata: dict[str, Any] = header.metadata
        self.architecture: str = Fields(self.metadata, path.name).string("general.architecture")
        if not self.architecture:
            raise ModelFileError(f"{path.name}: general.architecture: empty")
        self.tensors: dict[str, GGUFTensor] = {}
        for shard, buf, shard_header in parts:
            for name, tensor in _tensor_views(buf, shard_header).items():
                if name in self.tensors:
                    raise ModelFileError(f"{shard.name}: tensor {name} is also in an earlier shard")
                self.tensors[name] = tensor
        self.tokenizer = _tokenizer_meta(
            self.metadata, self.array_count("tokenizer.ggml.tokens"), path.name
        )
        fields = Fields(self.metadata, path.name)
        self.chat_template: str | None = fields.opt_string("tokenizer.chat_template")
        self.hparams: ModelHParams | None = _hparams(self)

    @property
    def name(self) -> str:
        """The model's display name: general.name, else the file name."""
        value = Fields(self.metadata, self.path.name).opt_string("general.name")
        return value or self.path.stem

    @property
    def supported(self) -> bool:
        """Whether the torch runner implements this architecture (the file fully checked)."""
        return self.hparams is not None and self.architecture in SUPPORTED_ARCHS

    def check_supported(self) -> ModelHParams:
        """The hyperparameters, or ModelFileError when the torch runner cannot run this file."""
        if not self.supported or self.hparams is None:
            names = ", ".join(SUPPORTED_ARCHS)
            raise ModelFileError(
                f"{self.path.name}: architecture {self.architecture!r} is not supported by the "
                f"torch runner (supported: {names}); the llama.cpp runner may still run it"
            )
        return self.hparams

    @property
    def n_params(self) -> int:
        """Total number of weights over all tensors."""
        return sum(t.n_elements for t in self.tensors.values())

    @property
    def quant_summary(self) -> dict[str, QuantStat]:
        """Tensor type name -> (tensor count, bytes), largest first."""
        stats: dict[str, list[int]] = {}
        for t in self.tensors.values():
            entry = stats.setdefault(t.qtype.name, [0, 0])
            entry[0] += 1
            entry[1] += t.nbytes
        ordered = sorted(stats.items(), key=lambda kv: -kv[1][1])
        return {name: QuantStat(count, nbytes) for name, (count, nbytes) in ordered}

    @property
    def array_keys(self) -> list[str]:
        """Keys of the large metadata arrays kept in the file (read with metadata_array)."""
        return list(self._header.arrays)

    def array_count(self, key: str) -> int | None:
        """Number of items of a metadata array (small or large), None when absent."""
        if key in self._header.arrays:
            return self._header.arrays[key].count
        value = self.metadata.get(key)
        return len(value) if isinstance(value, list) else None

    def metadata_array(self, key: str) -> list[Any] | np.ndarray:
        """A metadata array by key: list[str] for strings, else numpy (large) or list (small)."""
        if key in self._header.arrays:
            return read_array(self._buf, self._header.arrays[key], self.path.name)
        value = self.metadata.get(key)
        if not isinstance(value, list):
            raise KeyError(key)
        return value


def _tensor_views(buf: mmap.mmap, header: GGUFHeader) -> dict[str, GGUFTensor]:
    import numpy as np
    from gguf import GGMLQuantizationType

    data = np.frombuffer(buf, dtype=np.uint8)  # whole file, zero-copy, read-only
    return {
        t.name: GGUFTensor(
            name=t.name,
            qtype=GGMLQuantizationType(t.qtype),
            shape=tuple(reversed(t.ne)),
            nbytes=t.nbytes,
            n_elements=t.n_elements,
            offset=t.offset,
            raw=data[t.offset : t.offset + t.nbytes],
        )
        for t in header.tensors
    }


def _token_id(f: Fields, key: str, n_tokens: int | None) -> int | None:
    """A special token id; one outside the vocabulary counts as absent (llama.cpp warns, ignores)."""
    value = f.opt_integer(key, lo=-(1 << 31), hi=(1 << 32) - 1)  # -1: llama.cpp's "none"
    if value is None or value < 0 or (n_tokens is not None and value >= n_tokens):
        return None
    return value


def _tokenizer_meta(md: dict[str, Any], n_tokens: int | None, source: str) -> TokenizerMeta:
    f = Fields(md, source)
    return TokenizerMeta(
        model=f.opt_string("tokenizer.ggml.model"),
        pre=f.opt_string("tokenizer.ggml.pre"),
        n_tokens=n_tokens or 0,
        bos_id=_token_id(f, "tokenizer.ggml.bos_token_id", n_tokens),
        eos_id=_token_id(f, "tokenizer.ggml.eos_token_id", n_tokens),
        add_bos=f.opt_boolean("tokenizer.ggml.add_bos_token"),
        add_eos=f.opt_boolean("tokenizer.ggml.add_eos_token"),
    )


def _hparams(model: GGUFModel) -> ModelHParams | None:
    """Hyperparameters, checked against the tensors for supported architectures."""
    from ember.models.files.hparams.from_gguf import from_gguf
    from ember.models.files.hparams.tensors import check_tensor_shapes

    shapes = {name: t.shape for name, t in model.tensors.items()}
    n_tokens = model.array_count("tokenizer.ggml.tokens")
    supported = model.architecture in SUPPORTED_ARCHS
    try:
        hp = from_gguf(model.metadata, n_tokens, shapes, model.path.name)
    except ModelFileError:
        if not supported:
            return None  # metadata-only: the llama.cpp runner may still know this architecture
        raise
    if supported:
        try:
            check_tensor_shapes(hp, shapes)
        except ModelFileError as exc:
            raise ModelFileError(f"{model.path.name}: {exc}") from None
    return hp


def _map(path: Path) -> mmap.mmap:
    """Read-only mmap of a whole file; ModelFileError when it cannot be read."""
    try:
        size = path.stat().st_size
        if size == 0:
            raise ModelFileError(f"{path.name}: empty file")
        with path.open("rb") as f:
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except FileNotFoundError:
        raise ModelFileError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ModelFileError(f"{path}: is a folder, not a GGUF file") from None
    except (OSError, ValueError) as exc:
        raise ModelFileError(f"{path.name}: cannot read: {exc}") from None


def _split_parts(
    path: Path, header: GGUFHeader, buf: mmap.mmap
) -> list[tuple[Path, mmap.mmap, GGUFHeader]]:
    """All shards of a gguf-split model (split.count > 1), each validated; [first] otherwise."""
    fields = Fields(header.metadata, path.name)
    count = fields.integer("split.count", 1, hi=99999)  # gguf-split names shards with 5 digits
    if count <= 1:
        return [(path, buf, header)]
    if fields.integer("split.no", 0, hi=99999) != 0:
        raise ModelFileError(f"{path.name}: a later shard of a split model; open the first shard")
    match = _SPLIT_NAME.fullmatch(path.name)
    if match is None or int(match["count"]) != count:
        raise ModelFileError(
            f"{path.name}: split.count is {count} but the name is not <stem>-00001-of-{count:05d}.gguf"
        )
    parts = [(path, buf, header)]
    for index in range(2, count + 1):
        shard = path.with_name(f"{match['stem']}-{index:05d}-of-{count:05d}.gguf")
        if not shard.is_file():
            raise ModelFileError(f"{path.name}: missing shard {shard.name} of {count}")
        shard_buf = _map(shard)
        shard_header = parse_gguf_header(shard_buf, shard.name)
        if Fields(shard_header.metadata, shard.name).integer("split.no", hi=99999) != index - 1:
            raise ModelFileError(f"{shard.name}: split.no is not {index - 1}")
        parts.append((shard, shard_buf, shard_header))
    declared = fields.opt_integer("split.tensors.count")
    found = sum(len(h.tensors) for _, _, h in parts)
    if declared is not None and declared != found:
        raise ModelFileError(f"{path.name}: split.tensors.count is {declared}, shards hold {found}")
    return parts


def open_gguf(path: str | Path) -> GGUFModel:
    """Validate a GGUF file (every shard of a split one) and its tensors; return the model."""
    path = Path(path)
    buf = _map(path)
    header = parse_gguf_header(buf, path.name)
    return GGUFModel(path, _split_parts(path, header, buf))
