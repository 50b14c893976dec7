"""KV snapshots of prompt prefixes on disk, keyed by model digest + runner + dtype + block hashes.

One file per snapshot, under `<dir>/<model key>/<last block hash>.kv`:

    magic b"EMBERKV\\0" | version u32 | header length u32 | header JSON | payload | sha256 (32 B)

The header names the model digest, runner, KV dtype, block size, bytes per block and the chained
hash of every block; the payload is runner.read_blocks() of those blocks; the trailing SHA-256
covers everything before it. Files are written to a temp name, fsynced and renamed into place.
Anything that does not check out (truncated, bit flips, other model or format) is ignored with a
warning, deleted and recomputed, never loaded. The folder is capped in bytes, least recently used
snapshot first out; a newer snapshot of the same conversation replaces the older one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ember.engine.block_manager import BlockManager, chain_hashes
from ember.engine.errors import EngineError

if TYPE_CHECKING:
    from ember.engine.runners.base import Runner
    from ember.engine.sequence import Sequence

log = logging.getLogger("ember.engine.prefix_store")

MAGIC = b"EMBERKV\0"
VERSION = 1
_HEAD = struct.Struct("<8sII")
_MAX_HEADER_BYTES = 16 << 20


@dataclass(frozen=True)
class Snapshot:
    """A verified snapshot: its block hashes and the KV bytes of every block."""

    hashes: list[bytes]
    block_bytes: int
    payload: bytes


class SnapshotError(Exception):
    """A snapshot file that must not be loaded (the reason names what is wrong)."""


class PrefixStore:
    """Size-capped LRU folder of prefix KV snapshots for one model/runner/dtype/block size."""

    def __init__(
        self,
        root: Path,
        *,
        model_digest: str,
        runner: str,
        dtype: str,
        block_size: int,
        max_bytes: int = 2 << 30,
    ) -> None:
        if not model_digest:  # an empty digest would let different models share snapshots
            raise EngineError("prefix store: the model has no digest")
        self.identity = {
            "model_digest": model_digest,
            "runner": runner,
            "dtype": dtype,
            "block_size": block_size,
        }
        key = hashlib.sha256(json.dumps(self.identity, sort_keys=True).encode()).hexdigest()[:24]
        self.folder = Path(root) / key
        self.block_size = block_size
        self.max_bytes = max_bytes
        self._index: dict[bytes, tuple[Path, int]] | None = None  # block hash -> (file, index)

    # ---- engine hooks ---------------------------------------------------------------------
    def restore(self, token_ids: list[int], blocks: BlockManager, runner: Runner) -> int:
        """Load the longest stored prefix beyond what RAM holds; return the tokens restored."""
        hashes = chain_hashes(token_ids[: max(0, len(token_ids) - 1)], self.block_size)
        ram_hits = blocks.match_prefix(token_ids)
        index = self._load_index()
        best = next((j for j in range(len(hashes), len(ram_hits), -1) if hashes[j - 1] in index), 0)
        if not best:
            return 0
        path, _ = index[hashes[best - 1]]
        try:
            snap = self.read(path)
        except (OSError, SnapshotError) as exc:
            log.warning("prefix snapshot %s ignored (%s); recomputing", path.name, exc)
            self._discard(path)
            return 0
        if snap.hashes[:best] != hashes[:best]:
            return 0
        count = best - len(ram_hits)
        if blocks.num_free_blocks < count + len(ram_hits):
            return 0  # no room now: the prompt is simply prefilled
        blocks.acquire(ram_hits)  # keep the RAM part of the chain from being reused meanwhile
        new_ids = blocks.allocate_blocks(count)
        start = len(ram_hits) * snap.block_bytes
        for offset, block_id in enumerate(new_ids):  # one block per call: any runner layout
            at = start + offset * snap.block_bytes
            runner.write_blocks([block_id], snap.payload[at : at + snap.block_bytes])
        for offset, block_id in enumerate(new_ids):
            blocks.register_restored(block_id, hashes[len(ram_hits) + offset])
        blocks.release_blocks(new_ids + ram_hits)  # now free, cached and findable by hash
        os.utime(path)  # most recently used
        return count * self.block_size

    def save(self, seq: Sequence, blocks: BlockManager, runner: Runner) -> Path | None:
        """Snapshot seq's hashed full blocks unless a snapshot already covers them."""
        if self.max_bytes <= 0 or not seq.block_hashes:
            return None
        hashes = list(seq.block_hashes)
        index = self._load_index()
        if hashes[-1] in index:
            os.utime(index[hashes[-1]][0])
            return None
        chunks = [runner.read_blocks([block_id]) for block_id in seq.block_table[: len(hashes)]]
        if len({len(chunk) for chunk in chunks}) != 1:
            log.warning("runner %s: blocks of unequal size; no snapshot", self.identity["runner"])
            return None
        path = self.write(hashes, len(chunks[0]), b"".join(chunks))
        # an older snapshot whose whole chain is a prefix of this one is superseded
        superseded = {index[h][0] for h in hashes if h in index and index[h][0].stem == h.hex()}
        for h_index, digest in enumerate(hashes):
            index[digest] = (path, h_index)
        for old_path in superseded - {path}:
            self._discard(old_path)
        self._enforce_cap(keep=path)
        return path

    # ---- file format ----------------------------------------------------------------------
    def write(self, hashes: list[bytes], block_bytes: int, payload: bytes) -> Path:
        """Write one snapshot atomically; return its path."""
        header = dict(self.identity, block_bytes=block_bytes, hashes=[h.hex() for h in hashes])
        head_json = json.dumps(header, sort_keys=True).encode()
        body = _HEAD.pack(MAGIC, VERSION, len(head_json)) + head_json + payload
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"{hashes[-1].hex()}.kv"
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=".tmp-", suffix=".kv")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(body)
                f.write(hashlib.sha256(body).digest())
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    def read(self, path: Path) -> Snapshot:
        """Read and verify one snapshot; SnapshotError says why it cannot be used."""
        blob = path.read_bytes()
        header = self._parse_header(blob, path)
        if hashlib.sha256(blob[:-32]).digest() != blob[-32:]:
            raise SnapshotError("checksum mismatch")
        hashes = [bytes.fromhex(h) for h in header["hashes"]]
        start = _HEAD.size + header["_len"]
        payload = blob[start:-32]
        if len(payload) != len(hashes) * header["block_bytes"]:
            raise SnapshotError("payload size does not match the header")
        return Snapshot(hashes, header["block_bytes"], payload)

    def _parse_header(self, blob: bytes, path: Path) -> dict:
        if len(blob) < _HEAD.size + 32:
            raise SnapshotError("truncated")
        magic, version, head_len = _HEAD.unpack_from(blob)
        if magic != MAGIC:
            raise SnapshotError("not an Ember KV snapshot")
        if version != VERSION:
            raise SnapshotError(f"format version {version}, expected {VERSION}")
        if head_len > min(_MAX_HEADER_BYTES, len(blob) - _HEAD.size - 32):
            raise SnapshotError("truncated header")
        try:
            header = json.loads(blob[_HEAD.size : _HEAD.size + head_len])
            mismatch = [k for k, v in self.identity.items() if header.get(k) != v]
            if mismatch:
                raise SnapshotError(f"made for another {', '.join(mismatch)}")
            if not isinstance(header["hashes"], list) or int(header["block_bytes"]) < 1:
                raise SnapshotError("bad header")
        except (ValueError, KeyError, TypeError) as exc:
            raise SnapshotError(f"bad header ({exc})") from None
        header["_len"] = head_len
        return header

    # ---- index and LRU --------------------------------------------------------------------
    def _load_index(self) -> dict[bytes, tuple[Path, int]]:
        if self._index is not None:
            return self._index
        self._index = {}
        for path in sorted(self.folder.glob("*.kv"), key=lambda p: p.stat().st_mtime):
            try:
                with path.open("rb") as f:
                    head = f.read(_HEAD.size)
                    _, _, head_len = _HEAD.unpack(head)
                    blob = head + f.read(min(head_len, _MAX_HEADER_BYTES)) + b"\0" * 32
                header = self._parse_header(blob, path)
                for i, h in enumerate(header["hashes"]):
                    self._index[bytes.fromhex(h)] = (path, i)
            except (OSError, struct.error, SnapshotError, ValueError) as exc:
                log.warning("prefix snapshot %s ignored (%s)", path.name, exc)
                self._discard(path)
        return self._index

    def _discard(self, path: Path) -> None:
        path.unlink(missing_ok=True)
        if self._index is not None:
            for digest in [d for d, (p, _) in self._index.items() if p == path]:
                del self._index[digest]

    def _enforce_cap(self, keep: Path) -> None:
        files = sorted(self.folder.glob("*.kv"), key=lambda p: p.stat().st_mtime)
        total = sum(p.stat().st_size for p in files)
        for path in files:
            if total <= self.max_bytes:
                break
            if path != keep:
                total -= path.stat().st_size
                self._discard(path)
