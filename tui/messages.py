"""Messages that widgets and workers post upward to the chat screen: typed dataclasses, one class
per intent (Textual runs a dataclass message's `__post_init__`; ours call it first)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

from ember.engine.api import EngineInfo, Finished, ToolCall

if TYPE_CHECKING:
    from ember.tui.attachments import Attachment


@dataclass
class PromptSubmitted(Message):
    """The user pressed Enter in the prompt input."""

    text: str


@dataclass
class ConversationSelected(Message):
    """A conversation was picked in the list."""

    conversation_id: int


@dataclass
class ReplyDelta(Message):
    """New text for the reply being streamed (posted from the generation worker)."""

    message_id: int
    text: str
    num_tokens: int = 1  # tokens batched into this delta (for the live tok/s)
    reasoning: str = ""  # thinking (a <think> block), shown apart from the text

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.num_tokens < 0:
            raise ValueError(f"ReplyDelta num_tokens={self.num_tokens}: must be >= 0")


@dataclass
class ReplyStarted(Message):
    """The reply's request was submitted; its prompt is prompt_tokens long (None: unknown)."""

    message_id: int
    prompt_tokens: int | None


@dataclass
class ReplyFinished(Message):
    """The engine finished a reply (stop, length, abort or error), with the tool calls it made."""

    message_id: int
    finished: Finished
    calls: tuple[ToolCall, ...] = ()


@dataclass
class ReplyFailed(Message):
    """The request could not run at all (the model failed to load, the engine raised)."""

    message_id: int
    reason: str  # one line


@dataclass
class WaitProgress(Message):
    """What a long wait is doing and how far (EngineOptions.progress): packing or loading
    weights layer by layer, a long prompt's prefill chunk by chunk."""

    stage: str
    done: int
    total: int

    def label(self) -> str:
        """`packing weights (first run of this model) 7/18`, `prefill 1024/4096 tokens`."""
        unit = " tokens" if self.stage == "prefill" else ""
        return f"{self.stage} {self.done}/{self.total}{unit}"


@dataclass
class BackendLoaded(Message):
    """A model finished loading; its info feeds the status bar."""

    info: EngineInfo


@dataclass
class EditRequested(Message):
    """A message box asks to edit its (user) message as a new branch."""

    message_id: int


@dataclass
class CopyRequested(Message):
    """A message box asks to copy its message's text."""

    message_id: int


@dataclass
class BranchStepped(Message):
    """A message box asks to show the previous (-1) or next (+1) alternative of its message."""

    message_id: int
    step: int

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.step not in (-1, 1):
            raise ValueError(f"BranchStepped step={self.step}: must be -1 or 1")


@dataclass
class FileAttached(Message):
    """A worker read and counted a file to attach. then_send: the message typed after a `/file`
    line, sent with it ("" for none; None: attached from the F4 dialog)."""

    attachment: Attachment
    then_send: str | None = None


@dataclass
class AttachFailed(Message):
    """A file could not be attached (one line); the prompt keeps what the user wrote."""

    reason: str


@dataclass
class ToolRan(Message):
    """A confirmed tool call came back (posted from its worker): what goes to the model."""

    message_id: int
    call_id: str
    text: str
    status: str  # ok | error


@dataclass
class ToolDecided(Message):
    """The user answered a tool call in its consent dialog: run, always (run, and allow this
    tool on this machine: the settings file) or deny."""

    message_id: int
    call_id: str
    decision: str

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.decision not in ("run", "always", "deny"):
            raise ValueError(f"ToolDecided decision={self.decision!r}: run, always or deny")
