"""Signatures of the thinking blocks Ember returns, and the check of those a client sends back.

Anthropic's `signature` is opaque to clients: they keep it and send each thinking block back
unchanged in later turns, and Anthropic refuses a block whose signature it did not make. Ember
does the same with a key of its own: the signature is base64 of a version byte and
HMAC-SHA256(key, the thinking text, stripped), the key 32 random bytes kept in Ember's data
folder (`thinking.key`, mode 0600, made on first use), so every server on one EMBER_HOME signs
and checks alike and a server elsewhere (or Anthropic) cannot. A thinking block whose signature
does not verify (edited, signed by another server, or unsigned) is a 400 naming its
`signature`; Ember never writes `redacted_thinking` blocks, so one of those is a 400 too.

Streamed, the signature arrives as a `signature_delta` just before the thinking block's
`content_block_stop`, as Anthropic sends it. The text is signed stripped, so the streamed block
(whose deltas may carry the reasoning's surrounding whitespace) and the whole reply's block
(stripped) carry the same signature.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import os
import secrets
import threading
from pathlib import Path

VERSION = b"\x01"
KEY_BYTES = 32
log = logging.getLogger(__name__)


def _read_or_make_key(path: Path) -> bytes:
    """The key at path, made (written whole, 0600) when there is none or it is not a key."""
    try:
        key = path.read_bytes()
        if len(key) == KEY_BYTES:
            return key
        log.warning("%s is not a %d-byte key: making a new one", path, KEY_BYTES)
        broken = True
    except FileNotFoundError:
        broken = False
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_bytes(KEY_BYTES)
    temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(key)
    try:
        if broken:
            os.replace(temp, path)
        else:
            os.link(temp, path)  # the first server on this home to make one wins
    except FileExistsError:  # another one did: its key, written whole, is the key
        return path.read_bytes()
    finally:
        temp.unlink(missing_ok=True)
    return key


class ThinkingSigner:
    """Signs and checks thinking text under this home's key (read or made on first use)."""

    def __init__(self, key_path: Path) -> None:
        self.key_path = key_path
        self._key: bytes | None = None
        self._lock = threading.Lock()

    def _mac(self, thinking: str) -> bytes:
        with self._lock:
            if self._key is None:
                self._key = _read_or_make_key(self.key_path)
            key = self._key
        data = thinking.strip().encode("utf-8", "surrogatepass")
        return hmac.new(key, data, hashlib.sha256).digest()

    def sign(self, thinking: str) -> str:
        return base64.b64encode(VERSION + self._mac(thinking)).decode("ascii")

    def verifies(self, thinking: str, signature: str) -> bool:
        """Whether signature is this home's signature of thinking (constant time)."""
        try:
            raw = base64.b64decode(signature.encode("ascii"), validate=True)
        except (binascii.Error, ValueError, UnicodeEncodeError):
            return False
        return raw[:1] == VERSION and hmac.compare_digest(raw[1:], self._mac(thinking))
