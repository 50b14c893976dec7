"""One download on the models screen: file name, progress bar, state; x cancels, r resumes."""

from __future__ import annotations

import threading

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.content import Content
from textual.message import Message
from textual.widgets import Label, ProgressBar


class DownloadRow(Horizontal, can_focus=True):
    """Progress of one file; the models screen runs the transfer and calls the update methods."""

    BINDINGS = [
        Binding("x", "cancel", "Cancel download"),
        Binding("r", "resume", "Resume download"),
    ]

    class ResumeRequested(Message):
        """The user asked to resume this download."""

        def __init__(self, row: DownloadRow) -> None:
            super().__init__()
            self.row = row

    def __init__(self, repo_id: str, filename: str) -> None:
        super().__init__(classes="download-row")
        self.repo_id = repo_id
        self.filename = filename
        self.cancel_event = threading.Event()
        self.state = "starting"

    def compose(self) -> ComposeResult:
        yield Label(Content(f"{self.repo_id}/{self.filename}"), classes="download-name")
        yield ProgressBar(total=None, show_eta=False, classes="download-bar")
        yield Label(self.state, classes="download-state")

    def progress(self, done_bytes: int, total_bytes: int) -> None:
        """Show bytes done of total."""
        bar = self.query_one(ProgressBar)
        bar.update(total=total_bytes or None, progress=done_bytes)
        self.set_state("downloading")

    def set_state(self, state: str) -> None:
        """downloading | done | cancelled | failed: reason."""
        self.state = state
        self.query_one(".download-state", Label).update(Content(state))

    def action_cancel(self) -> None:
        if self.state in ("starting", "downloading"):
            self.cancel_event.set()

    def action_resume(self) -> None:
        if self.state == "cancelled" or self.state.startswith("failed"):
            self.cancel_event = threading.Event()
            self.set_state("starting")
            self.post_message(self.ResumeRequested(self))
