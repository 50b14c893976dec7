"""Text at Ember's boundaries: one decoding policy in, one escaping policy out.

In: text a person or a client hands Ember (prompt arguments, stdin, request bodies, chat history
rows) is decoded as UTF-8; a byte-order mark selects UTF-8, UTF-16 or UTF-32; bytes that are not
valid in that encoding become U+FFFD and the caller is told how many (`decode`). A `str` that
already holds lone surrogates (a JSON "\\udce9" escape, a command-line argument decoded with
surrogateescape) gets U+FFFD for each of them (`clean`). Nothing downstream sees a surrogate.
Files that are parsed (config.json, tokenizer files, chat templates, Hub answers) are refused
instead when they are not valid UTF-8, in one line naming the file and the first bad byte
(`utf8_problem`): replacing bytes there could change what the file means.

Out: anything from outside that is printed to a terminal (model names, file names, metadata,
error messages) goes through `escape` (one line: every control character, newline and tab
included, becomes a backslash escape) or, for multi-line model output in the TUI, `visible`
(control pictures; newline and tab kept). Both treat the same characters as dangerous: C0 and C1
controls, DEL, and the bidirectional overrides that reorder what a reader sees.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

REPLACEMENT = "\ufffd"

_SURROGATE = re.compile("[\ud800-\udfff]")
# Bidi embeddings/overrides/isolates and marks: they make a line read differently than it is.
_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
# What a terminal acts on or a reader is misled by; tab and newline are kept by `visible`.
_CONTROL_MULTILINE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_BIDI}\u2028\u2029]")
_CONTROL_ONE_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}\u2028\u2029]")
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),  # before UTF-16 LE: it starts with the same two bytes
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


@dataclass(frozen=True)
class Decoded:
    """Text decoded from bytes, the encoding used, and how many characters became U+FFFD."""

    text: str
    encoding: str
    num_replaced: int

    def warning(self, source: str) -> str:
        """One line for the user when bytes were replaced ("" when none were)."""
        if not self.num_replaced:
            return ""
        return (
            f"{source}: {self.num_replaced} invalid {self.encoding.upper()} sequence(s) replaced "
            f"with U+FFFD"
        )


def decode(data: bytes) -> Decoded:
    """Bytes from outside as text: BOM-selected encoding (else UTF-8), invalid bytes -> U+FFFD."""
    encoding, start = "utf-8", 0
    for bom, name in _BOMS:
        if data.startswith(bom):
            encoding, start = name, len(bom)
            break
    body = data[start:]
    try:
        return Decoded(body.decode(encoding), encoding, 0)
    except UnicodeDecodeError:
        text = body.decode(encoding, errors="replace")
        # U+FFFD that was already in the input is not a replacement
        genuine = body.decode(encoding, errors="ignore").count(REPLACEMENT)
        return Decoded(text, encoding, text.count(REPLACEMENT) - genuine)


def clean(text: str) -> str:
    """text with every lone surrogate replaced by U+FFFD (a valid pair becomes its character)."""
    if text.isascii() or not _SURROGATE.search(text):
        return text
    # UTF-16 round trip: surrogatepass writes pairs and lone halves alike; decoding joins the
    # pairs and turns each lone half into U+FFFD.
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def escape(text: str) -> str:
    """One printable line: control characters as \\n, \\t, \\xNN, \\uNNNN; surrogates U+FFFD."""
    return _CONTROL_ONE_LINE.sub(_backslash, clean(text))


def visible(text: str) -> str:
    """Multi-line model text made inert: control pictures for controls (ESC -> U+241B), \\r\\n
    kept as \\n, tab and newline kept."""
    return _CONTROL_MULTILINE.sub(_picture, clean(text).replace("\r\n", "\n"))


def utf8_problem(exc: UnicodeDecodeError) -> str:
    """Why bytes are not UTF-8, for a one-line error: the first bad byte and its offset."""
    bad = exc.object[exc.start : exc.start + 1]
    return f"not valid UTF-8 (byte 0x{bad.hex() or '??'} at offset {exc.start})"


def has_controls(text: str) -> bool:
    """Whether text holds anything `escape` would change (a name must not)."""
    return bool(_CONTROL_ONE_LINE.search(text) or _SURROGATE.search(text))


def describe(exc: BaseException) -> str:
    """An unexpected exception as one line: its type and message, whitespace collapsed."""
    message = " ".join(str(exc).split())
    name = type(exc).__name__
    return escape(f"{name}: {message}" if message else name)


def _backslash(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def _picture(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)  # Unicode control pictures: ESC -> U+241B
    if code == 0x7F:
        return "\u2421"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"
