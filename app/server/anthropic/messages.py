"""Anthropic's `system` and `messages` -> the engine's ChatMessages.

A user turn's tool_result blocks become `tool` messages (in order, before the turn's text), each
naming the tool_use it answers, which must be an earlier assistant turn's; an error result is
shown to the model as such. An assistant turn's tool_use blocks become its tool calls. Its
thinking blocks must carry the signature this server gave them (signing.py: a 400 naming the
block's `signature` otherwise, as Anthropic refuses a block it did not sign), and go along as the
turn's reasoning, which only a harmony (gpt-oss) template reads (for a turn that made tool calls:
models/text/tool_calls/render.py); other templates never see past reasoning. Consecutive turns
of one role are joined, as Anthropic does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ember.app.server.anthropic.blocks import Block, parse_block
from ember.app.server.anthropic.signing import ThinkingSigner
from ember.app.server.errors import RequestInvalid
from ember.engine.api import ChatMessage
from ember.models.text.tool_calls import ToolCall

MAX_MESSAGES = 1024
MAX_BLOCKS = 1024  # blocks of one message
MAX_PROMPT_CHARS = 1 << 20
USER_BLOCKS = ("text", "image", "tool_result")
ASSISTANT_BLOCKS = ("text", "tool_use", "thinking", "redacted_thinking")


@dataclass
class Conversation:
    """The messages so far, the tool_use ids (-> names) seen, the first image's field."""

    messages: list[ChatMessage] = field(default_factory=list)
    calls: dict[str, str] = field(default_factory=dict)
    image_param: str = ""
    chars: int = 0

    def add(self, message: ChatMessage) -> None:
        self.chars += len(message.content) + len(message.reasoning)
        self.chars += sum(len(c.arguments) for c in message.tool_calls)
        if self.chars > MAX_PROMPT_CHARS:
            raise RequestInvalid("messages", f"exceed {MAX_PROMPT_CHARS} characters", status=400)
        last = self.messages[-1] if self.messages else None
        if (
            last is not None
            and last.role == message.role
            and message.role in ("user", "system")
            and not last.tool_calls
        ):
            self.messages[-1] = ChatMessage(last.role, f"{last.content}\n\n{message.content}")
            return
        self.messages.append(message)


def _blocks(content: Any, param: str, allowed: tuple[str, ...]) -> list[Block]:
    if isinstance(content, str):
        return [Block("text", content)]
    if not isinstance(content, list) or len(content) > MAX_BLOCKS:
        raise RequestInvalid(param, f"must be a string or a list of <= {MAX_BLOCKS} blocks", 400)
    return [parse_block(b, f"{param}[{j}]", allowed) for j, b in enumerate(content)]


def system_text(value: Any) -> str:
    """`system`: a string or a list of text blocks."""
    if value is None:
        return ""
    return "\n\n".join(b.text for b in _blocks(value, "system", ("text",)))


def _user_turn(blocks: list[Block], param: str, convo: Conversation) -> None:
    texts = []
    for j, block in enumerate(blocks):
        convo.image_param = convo.image_param or block.image_param
        if block.kind == "tool_result":
            name = convo.calls.get(block.call_id)
            if name is None:
                raise RequestInvalid(
                    f"{param}[{j}].tool_use_id",
                    f"{block.call_id[:80]!r} answers no tool_use of an earlier assistant turn",
                    status=400,
                )
            text = f"Error: {block.text}" if block.is_error else block.text
            convo.add(ChatMessage("tool", text, tool_call_id=block.call_id, name=name))
        elif block.kind == "text":
            texts.append(block.text)
    if texts or not any(b.kind == "tool_result" for b in blocks):
        convo.add(ChatMessage("user", "\n\n".join(texts)))


def _assistant_turn(
    blocks: list[Block], param: str, convo: Conversation, signer: ThinkingSigner
) -> None:
    calls = []
    for j, block in enumerate(blocks):
        if block.kind == "thinking" and not signer.verifies(block.text, block.signature):
            raise RequestInvalid(
                f"{param}[{j}].signature",
                "does not verify: this thinking block was not written by this Ember server "
                "(send it back unchanged, or leave it out)",
                400,
            )
        if block.kind == "tool_use":
            convo.calls[block.call_id] = block.name
            calls.append(ToolCall(block.name, block.input, block.call_id))
    text = "".join(b.text for b in blocks if b.kind == "text")
    reasoning = "".join(b.text for b in blocks if b.kind == "thinking")
    convo.add(ChatMessage("assistant", text, tool_calls=tuple(calls), reasoning=reasoning))


def conversation(system: Any, raw: Any, signer: ThinkingSigner) -> Conversation:
    """The request's turns as the engine takes them."""
    if not isinstance(raw, list) or not raw:
        raise RequestInvalid("messages", "must be a non-empty list", status=400)
    if len(raw) > MAX_MESSAGES:
        raise RequestInvalid("messages", f"at most {MAX_MESSAGES} messages", status=400)
    convo = Conversation()
    text = system_text(system)
    if text:
        convo.add(ChatMessage("system", text))
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise RequestInvalid(f"messages[{i}]", "must be an object", status=400)
        for key in item:
            if key not in ("role", "content"):
                raise RequestInvalid(f"messages[{i}].{str(key)[:40]}", "is not a field", 400)
        role, param = item.get("role"), f"messages[{i}].content"
        if role == "user":
            _user_turn(_blocks(item.get("content"), param, USER_BLOCKS), param, convo)
        elif role == "assistant":
            blocks = _blocks(item.get("content"), param, ASSISTANT_BLOCKS)
            _assistant_turn(blocks, param, convo, signer)
        else:
            raise RequestInvalid(f"messages[{i}].role", "must be user or assistant", status=400)
    return convo
