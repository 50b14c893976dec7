"""Export the open chat (Markdown: the shown branch; JSON: every branch) and import chats from an
Ember JSON export, through app/history. Functions of the ChatScreen they act on."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

from ember.errors import EmberError
from ember.tui.notices import notify_error
from ember.tui.screens.dialogs import TextDialog

if TYPE_CHECKING:
    from ember.tui.screens.chat.screen import ChatScreen


async def export_chat(screen: ChatScreen, fmt: str) -> None:
    """Ask where, then write this chat as Markdown ("md") or JSON ("json")."""
    conv = screen.session.conversation
    if conv is None:
        screen.notify("nothing to export yet: this chat is empty")
        return
    slug = re.sub(r"[^A-Za-z0-9]+", "-", conv.title).strip("-").lower() or "chat"
    default = str(Path.cwd() / f"{slug}.{fmt}")
    kind = "Markdown" if fmt == "md" else "JSON (every branch)"
    answer = await screen.app.push_screen_wait(TextDialog(f"Export as {kind} to", default))
    if not answer or not answer.strip():
        return
    from ember.app.history.export import export_json, export_markdown, write_export

    path = Path(answer.strip()).expanduser()
    history = screen.session.history
    try:
        conv = history.conversation(conv.id)
        text = (export_markdown if fmt == "md" else export_json)(history, [conv])
        write_export(path, text)
    except EmberError as exc:
        notify_error(screen, "Export", exc)
        return
    screen.notify(f"exported {conv.title!r} to {path}", markup=False)


async def import_chats(screen: ChatScreen) -> None:
    """Ask for a JSON export and import its chats (checked whole first; nothing half-done)."""
    answer = await screen.app.push_screen_wait(TextDialog("Import chats from (JSON file)", ""))
    if not answer or not answer.strip():
        return
    from ember.app.history.importer import import_chats as import_all
    from ember.app.history.importer import read_export_file

    try:
        chats = read_export_file(Path(answer.strip()).expanduser())
        imported = import_all(screen.session.history, chats)
    except EmberError as exc:
        notify_error(screen, "Import", exc)
        return
    await screen.refresh_list()
    notes = "".join(f"\nleft out {n}" for c in chats for n in c.notes)
    screen.notify(f"imported {len(imported)} chat{'s' if len(imported) != 1 else ''}{notes}")
