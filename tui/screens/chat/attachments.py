"""Files attached to the next message (F4, or a `/file PATH` line): read and counted in a thread
worker, listed in the banner above the prompt. Functions of the ChatScreen they act on."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from textual.content import Content
from textual.widgets import Static

from ember.tui.messages import AttachFailed, FileAttached, PromptSubmitted
from ember.tui.notices import notify_error
from ember.tui.screens.dialogs import TextDialog
from ember.tui.widgets.prompt_input import PromptInput

if TYPE_CHECKING:
    from ember.tui.screens.chat.screen import ChatScreen

FILE_COMMAND = re.compile(r"^/file(?:\s+(?P<path>.+))?$")


def file_command(text: str) -> tuple[str, str] | None:
    """(path, rest) when the prompt's first line is `/file PATH` (the rest is the message to
    send with it); None when it is not such a command."""
    first, _, rest = text.partition("\n")
    match = FILE_COMMAND.match(first.strip())
    if match is None:
        return None
    return (match.group("path") or "").strip(), rest.strip()


def show_attachments(screen: ChatScreen) -> None:
    """The line above the prompt that lists the files going with the next message."""
    banner = screen.query_one("#attach-banner", Static)
    files = screen.session.attachments
    banner.display = bool(files)
    if files:
        names = ", ".join(f"{a.name} ({a.tokens:,} tokens)" for a in files)
        total = sum(a.tokens for a in files)
        banner.update(Content(f"Attached: {names}: {total:,} tokens with the next message"))


def start_attach(screen: ChatScreen, path_text: str, then_send: str | None = None) -> None:
    """Read and count a file in a thread worker; FileAttached or AttachFailed follows.
    then_send: the message typed after a `/file PATH` line (None: attached with F4)."""
    if not path_text:
        notify_error(screen, "Attach a file", "give a path: /file PATH")
        return
    path, session, post = Path(path_text), screen.session, screen.post_message

    def work_() -> None:
        try:
            post(FileAttached(session.read_attachment(path, post), then_send))
        except Exception as exc:  # noqa: BLE001 - any failure is a one-line notice
            post(AttachFailed(str(exc).splitlines()[0] if str(exc) else type(exc).__name__))

    screen.run_worker(work_, thread=True, group="attach", exit_on_error=False)


async def ask_and_attach(screen: ChatScreen) -> None:
    """Ask for a file's path and attach it to the next message."""
    path = await screen.app.push_screen_wait(TextDialog("Attach a text file (path)", ""))
    if path and path.strip():
        start_attach(screen, path.strip())


def detach(screen: ChatScreen) -> None:
    """Drop the files waiting to go with the next message."""
    if screen.session.attachments:
        screen.session.attachments = []
        show_attachments(screen)
        screen.notify("attachments removed")


def file_attached(screen: ChatScreen, event: FileAttached) -> None:
    """A file was read: list it, and send the message typed after its `/file` line."""
    screen.session.attachments.append(event.attachment)
    show_attachments(screen)
    if event.then_send is None:
        return
    prompt = screen.query_one(PromptInput)
    if file_command(prompt.text) is not None:
        prompt.clear()  # the /file line did its work
    if event.then_send:
        screen.post_message(PromptSubmitted(event.then_send))
