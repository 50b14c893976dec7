"""The engine's reply as an Anthropic message: content blocks (thinking, text, tool_use),
stop_reason, stop_sequence and usage; shared by the whole reply and the stream's events."""

from __future__ import annotations

import uuid
from typing import Any

from ember.app.reply_splitter import ReplySplitter
from ember.app.server.anthropic.signing import ThinkingSigner
from ember.engine.api import Finished, Stats
from ember.models.text.tool_calls import ToolCall

# stop_reason of each engine reason when the reply made no tool call: "loop" (the loop detector
# cut a reply repeating itself) is max_tokens, as on the OpenAI routes: the model did not end it
STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "loop": "max_tokens",
                "abort": "end_turn", "error": "end_turn"}  # fmt: skip


def usage(stats: Stats) -> dict[str, int]:
    """Anthropic's usage: input_tokens are the prompt tokens computed; those Ember's prefix
    cache (RAM or disk) served are cache_read_input_tokens, as Anthropic counts them apart."""
    return {
        "input_tokens": stats.prompt_tokens - stats.cached_tokens,
        "output_tokens": stats.generated_tokens,
        "cache_read_input_tokens": stats.cached_tokens,
    }


def tool_use_block(call: ToolCall) -> dict[str, Any]:
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments_dict}


class MessageReply:
    """One request's reply: its id, model, the splitter of its text, its stop reason."""

    def __init__(
        self, model: str, fmt_name: str, tools: bool, single_call: bool, signer: ThinkingSigner
    ) -> None:
        self.id = "msg_" + uuid.uuid4().hex[:24]
        self.model = model
        self.signer = signer  # signs the thinking blocks (signing.py)
        self.splitter = ReplySplitter(fmt_name, tools)
        self.single_call = single_call  # disable_parallel_tool_use: the first call only

    def envelope(self, content: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": None,
            "stop_sequence": None,
        }

    def calls(self) -> list[ToolCall]:
        return self.splitter.calls[:1] if self.single_call else list(self.splitter.calls)

    def stop(self, fin: Finished) -> tuple[str, str | None]:
        """(stop_reason, stop_sequence)."""
        if self.splitter.calls and not self.splitter.cut:
            return "tool_use", None
        if fin.reason == "stop" and fin.stop_sequence:
            return "stop_sequence", fin.stop_sequence
        return STOP_REASONS[fin.reason], None

    def whole(self, fin: Finished) -> dict[str, Any]:
        """The non-streamed message."""
        reasoning, content, _ = self.splitter.feed(fin.text, final=True)
        blocks: list[dict[str, Any]] = []
        if thinking := reasoning.strip():
            signature = self.signer.sign(thinking)
            blocks.append({"type": "thinking", "thinking": thinking, "signature": signature})
        text = content.strip() if self.splitter.calls else content
        if text:
            blocks.append({"type": "text", "text": text})
        blocks += [tool_use_block(call) for call in self.calls()]
        body = self.envelope(blocks)
        body["stop_reason"], body["stop_sequence"] = self.stop(fin)
        body["usage"] = usage(fin.stats)
        return body
