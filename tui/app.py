"""EmberApp: the Textual app, its global keys, and the shared state screens use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import App
from textual.binding import Binding
from textual.message import Message

from ember.app.catalog.catalog import ModelCatalog
from ember.app.config import Settings
from ember.app.history.store import History
from ember.errors import EmberError
from ember.paths import Paths, get_paths
from ember.tui.backend_host import BackendFactory, BackendHost
from ember.tui.chat.config import engine_options
from ember.tui.chat.session import ChatSession
from ember.tui.clipboard import copy_fallback
from ember.tui.commands import EmberCommands
from ember.tui.notices import notify_error

if TYPE_CHECKING:
    from pathlib import Path

    from ember.engine.api import EngineOptions
    from ember.tui.toolbox import Toolbox


class EmberApp(App[None]):
    """Chat, models and settings screens over one chat session (its history and backend host)
    and one catalog."""

    CSS_PATH = "app.tcss"
    COMMANDS = App.COMMANDS | {EmberCommands}
    TITLE = "Ember"
    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", priority=True),
        # Ctrl+C: copy a selection, else stop the reply as Esc does, else twice to quit
        Binding("ctrl+c", "interrupt", "Stop/quit", priority=True),
        Binding("ctrl+o", "models", "Models"),
        Binding("ctrl+s", "settings", "Settings"),
        Binding("f1", "show_keys", "Keys"),
    ]

    QUIT_AGAIN_S = 3.0  # a second Ctrl+C within this many seconds quits

    def __init__(
        self,
        settings: Settings,
        history: History,
        backend_factory: BackendFactory,
        catalog: ModelCatalog,
        paths: Paths | None = None,
        first_run_check: bool = True,
        toolbox: Toolbox | None = None,
    ) -> None:
        super().__init__()
        self.history = history
        self.host = BackendHost(backend_factory)
        self.paths = paths or get_paths()
        self.tools_notice = ""  # why the configured tools are off (a bad [mcp_servers] table)
        self.demo_notice = ""  # `ember --fake`: a fake model in a throwaway home (tui/command.py)
        if toolbox is None:
            toolbox = self._configured_toolbox(settings)
        self.session = ChatSession(history, self.host, settings, toolbox=toolbox, paths=self.paths)
        self.catalog = catalog
        self.first_run_check = first_run_check
        self.copied: list[str] = []  # what copy_text copied, newest last
        self._quit_armed_at: float | None = None  # when Ctrl+C last stopped or warned

    def _configured_toolbox(self, settings: Settings) -> Toolbox | None:
        """The settings' MCP servers as the chats' tools (connected on first use)."""
        from ember.app.errors import ConfigError
        from ember.app.mcp.config import mcp_servers

        try:
            configs = [c for c in mcp_servers(settings.extra) if c.enabled]
        except ConfigError as exc:
            self.tools_notice = f"tools are off: {exc}"
            return None
        if not configs:
            return None
        from ember.app.mcp.hub import McpHub
        from ember.tui.toolbox import McpToolbox

        return McpToolbox(McpHub(configs, self.paths.cache_dir))

    def close_tools(self) -> None:
        """Stop the MCP servers (on exit)."""
        if self.session.toolbox is not None:
            self.session.toolbox.close()

    @property
    def settings(self) -> Settings:
        """The defaults for new chats (held by the session, which uses them)."""
        return self.session.settings

    @settings.setter
    def settings(self, settings: Settings) -> None:
        self.session.settings = settings

    def on_mount(self) -> None:
        from ember.tui.screens.chat.screen import ChatScreen

        self.push_screen(ChatScreen(self.session))
        if self.demo_notice:
            self.sub_title = "demo"
            self.notify(self.demo_notice, title="Nothing here is saved", markup=False, timeout=20)
        if self.tools_notice:
            self.notify(self.tools_notice, severity="error", markup=False, timeout=15)
        if self.history.notice:
            self.notify(self.history.notice, severity="warning", markup=False, timeout=15)
        if self.first_run_check and not self._local_models_or_warn():
            from ember.tui.screens.first_run import FirstRunScreen

            self.push_screen(FirstRunScreen())

    async def action_interrupt(self) -> None:
        """Ctrl+C: copy the selected text if there is any (the terminal's habit); else stop the
        streaming reply as Esc does; a second Ctrl+C within QUIT_AGAIN_S quits."""
        import time

        from textual.widgets import Input, TextArea

        focused = self.focused
        if isinstance(focused, TextArea | Input) and focused.selected_text:
            focused.action_copy()
            return
        if self.screen.get_selected_text():
            self.screen.action_copy_text()
            return
        now = time.monotonic()
        if self.session.busy:
            from ember.tui.screens.chat.screen import ChatScreen

            chat = next((s for s in self.screen_stack if isinstance(s, ChatScreen)), None)
            if chat is not None:
                await chat.action_stop()
            self._quit_armed_at = now
            self.notify("Reply stopped. Press Ctrl+C again to quit.", timeout=3)
            return
        if self._quit_armed_at is not None and now - self._quit_armed_at <= self.QUIT_AGAIN_S:
            self.exit()
            return
        self._quit_armed_at = now
        self.notify("Press Ctrl+C again to quit.", timeout=3)

    def _local_models_or_warn(self) -> bool:
        try:
            return bool(self.catalog.list_local())
        except EmberError as exc:
            notify_error(self, "Model registry", exc)
            return True

    # shared services for the screens

    def model_names(self) -> list[str]:
        """Names of the local models (for pickers); empty if the registry is unreadable."""
        try:
            return [m.name for m in self.catalog.list_local()]
        except EmberError:
            return []

    def preload(self, model: str) -> None:
        """Load model in the background so the next reply starts at once."""
        try:
            options = engine_options(model, self.settings)
        except EmberError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return
        self.run_worker(lambda: self._load(options), thread=True, group="load", exit_on_error=False)

    def _load(self, options: EngineOptions) -> None:
        try:
            self.session.load(options, self._post_to_chat)
        except Exception as exc:  # noqa: BLE001 - shown as a one-line notification
            notify_error(self, f"Model {options.model} did not load", exc)

    def _post_to_chat(self, message: Message) -> None:
        """Post to the chat screen (thread-safe, like every post_message)."""
        from ember.tui.screens.chat.screen import ChatScreen

        for screen in self.screen_stack:
            if isinstance(screen, ChatScreen):
                screen.post_message(message)

    def copy_text(self, text: str) -> None:
        """Copy via OSC 52 and a fallback (a clipboard tool, else a file)."""
        self.copied.append(text)
        self.copy_to_clipboard(text)
        cache_dir = self.paths.cache_dir
        self.run_worker(
            lambda: self._copy_fallback(text, cache_dir),
            thread=True,
            group="copy",
            exit_on_error=False,
        )

    def _copy_fallback(self, text: str, cache_dir: Path) -> None:
        try:
            where = copy_fallback(text, cache_dir)
        except OSError as exc:
            self.notify(f"copied via the terminal (OSC 52); fallback failed: {exc}", markup=False)
            return
        self.notify(
            f"copied {len(text)} characters (terminal clipboard; also {where})", markup=False
        )

    # global actions

    def action_models(self) -> None:
        from ember.tui.screens.models import ModelsScreen

        if not isinstance(self.screen, ModelsScreen):
            self.push_screen(ModelsScreen())

    def action_settings(self) -> None:
        from ember.tui.screens.settings import SettingsScreen

        if not isinstance(self.screen, SettingsScreen):
            self.push_screen(SettingsScreen())

    def action_show_keys(self) -> None:
        if self.screen.query("HelpPanel"):
            self.action_hide_help_panel()
        else:
            self.action_show_help_panel()

    async def action_quit(self) -> None:
        """Stop a streaming reply (kept, marked stopped) and leave; the caller closes the host."""
        self.session.shutdown()
        self.exit()
