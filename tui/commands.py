"""Ember's own commands in the command palette (Ctrl+P): each one names its key, where it has one.

Chat commands run the chat screen's actions (the same ones the keys run); from another screen the
palette offers the app-wide ones (models, pull, settings).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from textual.command import DiscoveryHit, Hit, Hits, Provider


@dataclass(frozen=True)
class PaletteCommand:
    """One entry: its name, what it does (with its key), and the action it runs."""

    name: str
    help: str
    action: str  # a Textual action string run on `target`
    chat_only: bool = True


COMMANDS: tuple[PaletteCommand, ...] = (
    PaletteCommand("New chat", "start a new chat (Ctrl+N)", "new_chat"),
    PaletteCommand("Switch model", "pick a local model for this chat", "switch_model"),
    PaletteCommand("Pull a model", "search the Hub and download (models screen)", "pull_model"),
    PaletteCommand("Models", "local models, Hub search, downloads (Ctrl+O)", "app.models", False),
    PaletteCommand("Settings", "defaults for new chats (Ctrl+S)", "app.settings", False),
    PaletteCommand("Chat settings", "this chat's model and sampling (Ctrl+G)", "chat_settings"),
    PaletteCommand("System prompt presets", "pick, create or edit (Ctrl+T)", "presets"),
    PaletteCommand("Thinking on/off", "this chat's reasoning switch (F5)", "toggle_thinking"),
    PaletteCommand("Attach a text file", "goes with the next message (F4, /file PATH)", "attach"),
    PaletteCommand("Remove attachments", "drop the files waiting to be sent", "detach"),
    PaletteCommand("Export chat as Markdown", "the shown branch to a .md file", "export('md')"),
    PaletteCommand("Export chat as JSON", "every branch, to import later", "export('json')"),
    PaletteCommand("Import chats", "from an Ember JSON export", "import"),
    PaletteCommand("Regenerate reply", "a new reply beside the old one (Ctrl+R)", "regenerate"),
    PaletteCommand("Edit last message", "as a new branch (Ctrl+B)", "edit_last"),
    PaletteCommand("Copy last reply", "to the clipboard (Ctrl+L)", "copy_last"),
    PaletteCommand("Rename chat", "F2", "rename"),
    PaletteCommand("Delete chat", "after a y/n confirmation (F8)", "delete_chat"),
    PaletteCommand("Search chats", "titles and message text (Ctrl+F)", "search"),
)


class EmberCommands(Provider):
    """The palette's Ember section: COMMANDS, and one entry per system prompt preset."""

    def _entries(self) -> list[tuple[str, str, Callable[[], Any]]]:
        from ember.tui.screens.chat.screen import ChatScreen

        screen = self.screen
        on_chat = isinstance(screen, ChatScreen)
        entries: list[tuple[str, str, Callable[[], Any]]] = []
        for command in COMMANDS:
            if command.chat_only and not on_chat:
                continue
            run: Callable[[], Any] = partial(self.app.run_action, command.action, screen)
            entries.append((command.name, command.help, run))
        if isinstance(screen, ChatScreen):
            for preset in screen.session.history.list_presets():
                run = partial(screen.use_preset, preset.id)
                entries.append((f"System prompt: {preset.name}", "use this preset here", run))
        return entries

    async def discover(self) -> Hits:
        for name, help_text, run in self._entries():
            yield DiscoveryHit(name, run, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_text, run in self._entries():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), run, text=name, help=help_text)
