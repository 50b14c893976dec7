"""The status bar: model, runner/device, context fill and eviction, TTFT, tok/s, cache, drafts."""

from __future__ import annotations

from dataclasses import dataclass

from textual.content import Content
from textual.widgets import Static

from ember.engine.api import EngineInfo, Stats


@dataclass
class StatusInfo:
    """What the bar shows; None fields show as a dash."""

    model: str = ""
    runner: str = ""
    device: str = ""
    state: str = "idle"  # idle | loading | generating | error
    context_tokens: int = 0
    context_limit: int = 0
    evicted_tokens: int = 0
    ttft_s: float | None = None
    tok_s: float | None = None
    cached_tokens: int | None = None
    acceptance: float | None = None  # None: no drafting
    reply_tokens: int | None = None  # tokens of the reply streaming now (None: none streams)
    prompt_tokens: int = 0  # that reply's prompt (for the live context fill)

    def apply_info(self, info: EngineInfo) -> None:
        """Take model, runner, device and context limit from a loaded backend."""
        self.model, self.runner, self.device = info.model, info.runner, info.device
        self.context_limit = info.context_limit

    def clear_reply(self) -> None:
        """Forget the last reply's numbers (a new chat, or a chat with no reply yet)."""
        self.context_tokens = self.evicted_tokens = self.prompt_tokens = 0
        self.ttft_s = self.tok_s = self.cached_tokens = self.acceptance = None
        self.reply_tokens = None

    def start_reply(self, prompt_tokens: int | None) -> None:
        """A reply began: the context holds its prompt; its own numbers are not known yet."""
        self.clear_reply()
        self.prompt_tokens = prompt_tokens or 0
        self.context_tokens = self.prompt_tokens
        self.reply_tokens = 0

    def add_reply_tokens(self, reply_tokens: int, tok_s: float) -> None:
        """Live numbers while a reply streams: context fill = prompt + reply so far."""
        self.reply_tokens = reply_tokens
        self.tok_s = tok_s
        total = self.prompt_tokens + reply_tokens
        self.context_tokens = min(total, self.context_limit) if self.context_limit else total

    def apply_stats(self, stats: Stats) -> None:
        """Take the last reply's numbers."""
        self.reply_tokens = None
        self.context_tokens = stats.context_tokens
        self.context_limit = stats.context_limit or self.context_limit
        self.evicted_tokens = stats.evicted_tokens
        self.ttft_s = stats.ttft_s
        self.tok_s = stats.decode_tok_s
        self.cached_tokens = stats.cached_tokens
        self.acceptance = stats.acceptance_rate if stats.drafted_tokens else None

    def render_line(self) -> str:
        """One line of plain text."""
        where = "/".join(x for x in (self.runner, self.device) if x) or "-"
        model = self.model.rstrip("/").rsplit("/", 1)[-1] if "/" in self.model else self.model
        parts = [
            model or "no model",
            where,
            f"ctx {self.context_tokens}/{self.context_limit or '-'}",
        ]
        if self.evicted_tokens:
            parts[-1] += f" (evicted {self.evicted_tokens})"
        parts.append(f"TTFT {self.ttft_s * 1000:.0f} ms" if self.ttft_s is not None else "TTFT -")
        parts.append(f"{self.tok_s:.1f} tok/s" if self.tok_s is not None else "- tok/s")
        parts.append(
            f"cached {self.cached_tokens}" if self.cached_tokens is not None else "cached -"
        )
        if self.acceptance is not None:
            parts.append(f"draft {self.acceptance:.0%}")
        if self.reply_tokens is not None:
            parts.append(f"{self.reply_tokens} tokens so far")
        if self.state != "idle":
            parts.insert(0, self.state)
        return " │ ".join(parts)


class StatusBar(Static):
    """Shows a StatusInfo; call `show(info)` after changing it."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.info = StatusInfo()

    def show(self, info: StatusInfo | None = None) -> None:
        """Re-render (plain text: a model name with brackets stays literal)."""
        if info is not None:
            self.info = info
        self.update(Content(self.info.render_line()))
