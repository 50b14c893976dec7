"""Reasoning apart from the answer: an incremental <think>...</think> splitter.

`ThinkSplitter().feed(delta)` returns (reasoning, content) for the text that is certain so far;
a tail that could be the start of a marker waits for the next delta. `starts_inside=True` is
for templates that open the think block in the prompt itself (the reply then begins with the
reasoning and only the closing marker appears). finish() releases what is held.
"""

from __future__ import annotations

from dataclasses import dataclass


def _held(text: str, marker: str) -> int:
    for length in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:length]):
            return length
    return 0


@dataclass
class ThinkSplitter:
    """Splits a streamed reply into reasoning (inside the markers) and content (outside)."""

    open: str = "<think>"
    close: str = "</think>"
    starts_inside: bool = False
    buffer: str = ""
    inside: bool = False
    after_marker: bool = False  # newlines right after a marker are dropped, across deltas

    def __post_init__(self) -> None:
        self.inside = self.starts_inside

    def feed(self, text: str) -> tuple[str, str]:
        """(reasoning, content) released by this delta."""
        self.buffer += text
        reasoning: list[str] = []
        content: list[str] = []
        while True:
            marker = self.close if self.inside else self.open
            at = self.buffer.find(marker)
            if at < 0:
                break
            (reasoning if self.inside else content).append(self.buffer[:at])
            self.buffer = self.buffer[at + len(marker) :]
            self.inside = not self.inside
            self.after_marker = True
        if self.after_marker:
            self.buffer = self.buffer.lstrip("\n")  # the text starts after the marker's line
            self.after_marker = not self.buffer
        keep = _held(self.buffer, self.close if self.inside else self.open)
        (reasoning if self.inside else content).append(self.buffer[: len(self.buffer) - keep])
        self.buffer = self.buffer[len(self.buffer) - keep :]
        return "".join(reasoning), "".join(content)

    def finish(self) -> tuple[str, str]:
        """Release the held tail."""
        tail, self.buffer = self.buffer, ""
        return (tail, "") if self.inside else ("", tail)


def split_thinking(text: str, starts_inside: bool = False) -> tuple[str, str]:
    """A whole reply as (reasoning, content)."""
    splitter = ThinkSplitter(starts_inside=starts_inside)
    r1, c1 = splitter.feed(text)
    r2, c2 = splitter.finish()
    return (r1 + r2).strip(), c1 + c2
