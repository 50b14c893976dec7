"""Messages that widgets and workers post upward to the chat screen."""

from __future__ import annotations

from textual.message import Message

from ember.engine.api import EngineInfo, Finished


class PromptSubmitted(Message):
    """The user pressed Enter in the prompt input."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class ConversationSelected(Message):
    """A conversation was picked in the list."""

    def __init__(self, conversation_id: int) -> None:
        super().__init__()
        self.conversation_id = conversation_id


class ReplyDelta(Message):
    """New text for the reply being streamed (posted from the generation worker)."""

    def __init__(self, message_id: int, text: str, num_tokens: int = 1) -> None:
        super().__init__()
        self.message_id = message_id
        self.text = text
        self.num_tokens = num_tokens  # tokens batched into this delta (for the live tok/s)


class ReplyFinished(Message):
    """The engine finished a reply (stop, length, abort or error)."""

    def __init__(self, message_id: int, finished: Finished) -> None:
        super().__init__()
        self.message_id = message_id
        self.finished = finished


class ReplyFailed(Message):
    """The request could not run at all (the model failed to load, the engine raised)."""

    def __init__(self, message_id: int, reason: str) -> None:
        super().__init__()
        self.message_id = message_id
        self.reason = reason


class BackendLoaded(Message):
    """A model finished loading; its info feeds the status bar."""

    def __init__(self, info: EngineInfo) -> None:
        super().__init__()
        self.info = info


class MessageAction(Message):
    """A message box asks for an action on its message: edit, copy, prev/next branch."""

    def __init__(self, message_id: int, action: str) -> None:
        super().__init__()
        self.message_id = message_id
        self.action = action
