"""One content block of an Anthropic message, checked: text, image, tool_use, tool_result,
thinking and redacted_thinking. Each block's keys are checked too, so a misspelt or unserved
field is a 400 naming it, as Anthropic answers, never dropped unseen."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from ember.app.server.errors import RequestInvalid

MAX_DEPTH = 64  # nesting of a tool's input or schema (a body nested deeper is refused by name)
MAX_IMAGE_CHARS = 20 << 20
# cache_control: Ember caches every prompt prefix by itself (RAM and disk), so the marker is
# accepted and has nothing more to ask for; citations: off unless a document asks (none served)
COMMON = frozenset({"type", "cache_control", "citations"})
KEYS = {
    "text": COMMON | {"text"},
    "image": COMMON | {"source"},
    "tool_use": COMMON | {"id", "name", "input"},
    "tool_result": COMMON | {"tool_use_id", "content", "is_error"},
    "thinking": COMMON | {"thinking", "signature"},
    "redacted_thinking": COMMON | {"data"},
}
IMAGE_MAGIC = {
    "image/png": (b"\x89PNG\r\n\x1a\n",),
    "image/jpeg": (b"\xff\xd8\xff",),
    "image/gif": (b"GIF87a", b"GIF89a"),
    "image/webp": (b"RIFF",),
}


@dataclass(frozen=True)
class Block:
    """A checked block: kind, its text (text, thinking, a tool_result's text), and per kind:
    tool_use: call_id, name, input (JSON text); tool_result: call_id, is_error; thinking: the
    signature it came with (checked by the caller: signing.py)."""

    kind: str
    text: str = ""
    call_id: str = ""
    name: str = ""
    input: str = ""
    is_error: bool = False
    image_param: str = ""  # where the first image of this block is (refused by the caller)
    signature: str = ""


def depth_check(value: Any, param: str, limit: int = MAX_DEPTH) -> None:
    """Refuse a JSON value nested deeper than limit (iterative: no recursion to exhaust)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            raise RequestInvalid(param, f"is nested deeper than {limit} levels", status=400)
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        )
        stack.extend((child, depth + 1) for child in children)


def _string(block: dict[str, Any], key: str, param: str, required: bool = True) -> str:
    value = block.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise RequestInvalid(f"{param}.{key}", "must be a string", status=400)
    return value


def block_type(block: Any, param: str, allowed: tuple[str, ...]) -> str:
    """The block's type, if it is one of allowed and its keys are known."""
    if not isinstance(block, dict):
        raise RequestInvalid(param, "must be a content block object", status=400)
    kind = block.get("type")
    if kind not in allowed:
        shown = str(kind)[:40]
        raise RequestInvalid(
            f"{param}.type", f"{shown!r} is not served here; use one of {', '.join(allowed)}", 400
        )
    for key in block:
        if key not in KEYS[kind]:
            raise RequestInvalid(f"{param}.{str(key)[:40]}", "is not a field of this block", 400)
    return str(kind)


def check_image(block: dict[str, Any], param: str) -> None:
    """A well-formed image source (base64 data of the type it names, or a URL); the caller
    refuses images anyway (no served model has vision), but garbage is named as garbage."""
    source = block.get("source")
    if not isinstance(source, dict):
        raise RequestInvalid(f"{param}.source", "must be an object", status=400)
    kind = source.get("type")
    if kind == "url":
        url = _string(source, "url", f"{param}.source")
        if not url.startswith(("http://", "https://")):
            raise RequestInvalid(f"{param}.source.url", "must be an http(s) URL", status=400)
        return
    if kind != "base64":
        raise RequestInvalid(f"{param}.source.type", "must be base64 or url", status=400)
    media = _string(source, "media_type", f"{param}.source")
    if media not in IMAGE_MAGIC:
        raise RequestInvalid(
            f"{param}.source.media_type", f"must be one of {', '.join(IMAGE_MAGIC)}", status=400
        )
    data = _string(source, "data", f"{param}.source")
    if len(data) > MAX_IMAGE_CHARS:
        raise RequestInvalid(f"{param}.source.data", "is too large", status=413)
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise RequestInvalid(f"{param}.source.data", "is not valid base64", status=400) from None
    if not raw.startswith(IMAGE_MAGIC[media]):
        raise RequestInvalid(f"{param}.source.data", f"is not a {media} image", status=400)


def parse_block(block: Any, param: str, allowed: tuple[str, ...]) -> Block:
    """One block of a message's content (allowed: the types this role may send)."""
    kind = block_type(block, param, allowed)
    if kind == "text":
        return Block("text", _string(block, "text", param))
    if kind == "image":
        check_image(block, param)
        return Block("image", image_param=param)
    if kind == "thinking":
        signature = _string(block, "signature", param, required=False)
        return Block("thinking", _string(block, "thinking", param), signature=signature)
    if kind == "redacted_thinking":  # Anthropic's encrypted reasoning: only Anthropic reads it
        raise RequestInvalid(
            param, "redacted_thinking comes from Anthropic; Ember never writes one", 400
        )
    if kind == "tool_use":
        value = block.get("input")
        if not isinstance(value, dict):
            raise RequestInvalid(f"{param}.input", "must be an object", status=400)
        depth_check(value, f"{param}.input")
        call_id, name = _string(block, "id", param), _string(block, "name", param)
        if not call_id or not name:
            raise RequestInvalid(param, "a tool_use needs an id and a name", status=400)
        return Block("tool_use", call_id=call_id, name=name, input=json.dumps(value))
    return _tool_result(block, param)


def _tool_result(block: dict[str, Any], param: str) -> Block:
    is_error = block.get("is_error", False)
    if not isinstance(is_error, bool):
        raise RequestInvalid(f"{param}.is_error", "must be a boolean", status=400)
    content = block.get("content", "")
    if isinstance(content, list):
        parts = [
            parse_block(item, f"{param}.content[{i}]", ("text", "image"))
            for i, item in enumerate(content)
        ]
        images = [p.image_param for p in parts if p.image_param]
        content = "\n".join(p.text for p in parts)
    else:
        images = []
    if not isinstance(content, str):
        raise RequestInvalid(f"{param}.content", "must be a string or text blocks", status=400)
    call_id = _string(block, "tool_use_id", param)
    return Block(
        "tool_result",
        text=content,
        call_id=call_id,
        is_error=is_error,
        image_param=images[0] if images else "",
    )
