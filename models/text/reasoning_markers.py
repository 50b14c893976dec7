"""Where a reply's reasoning begins and ends, per reply format, and what closes it when cut.

`<think>` ... `</think>` for the models that think in tags (Qwen3, DeepSeek-R1, SmolLM3...);
harmony's analysis message for gpt-oss, whose answer then needs a new final-channel message:
forcing only `<|end|>` would leave the model to pick its next channel, possibly analysis again.
The engine's reasoning budget (engine/reasoning_budget.py) counts between open and close and
forces `forced_close` once the budget is spent.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReasoningMarkers:
    open: str
    close: str
    forced_close: str  # what the engine writes to end reasoning and start the answer


THINK = ReasoningMarkers("<think>", "</think>", "</think>")
HARMONY = ReasoningMarkers(
    "<|channel|>analysis<|message|>",
    "<|end|>",
    "<|end|><|start|>assistant<|channel|>final<|message|>",
)


def reasoning_markers(reply_format: str) -> ReasoningMarkers:
    """The markers of a model's reply format (its tool format's name: "harmony" or another)."""
    return HARMONY if reply_format == "harmony" else THINK
