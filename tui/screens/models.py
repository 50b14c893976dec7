"""The models screen: local models, Hub search, a quant picker with fit badges, downloads."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Label

from ember.app.catalog.catalog import HubRepo, LocalModel, QuantOption, fit_badge, human_size
from ember.errors import EmberError
from ember.tui.notices import notify_error
from ember.tui.screens.dialogs import ConfirmDialog
from ember.tui.widgets.download_row import DownloadRow

if TYPE_CHECKING:
    from ember.tui.app import EmberApp


OFFLINE_LABEL = (
    "Hub (offline: HF_HUB_OFFLINE=1 or --offline; search and downloads are off, "
    "the curated list below is for reference)"
)


def _count(value: int) -> str:
    return f"{value:,}" if value else "-"


def _last_used(when: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(when)) if when else "never"


class ModelsScreen(Screen[None]):
    """Tables for local models, Hub results and quants; download rows below."""

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("slash", "search", "Search Hub"),
        Binding("delete,d", "delete", "Delete model"),
        Binding("u", "use", "Use in chat"),
    ]

    def __init__(self, download: tuple[str, str] | None = None) -> None:
        super().__init__()
        self.initial_download = download  # (repo_id, file or quant label) to start on mount

    @property
    def ember(self) -> EmberApp:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        with Vertical(id="models-body"):
            yield Label("Local models", classes="section")
            yield DataTable(id="local", cursor_type="row", zebra_stripes=True)
            yield Label("Hub", classes="section", id="hub-label")
            yield Input(placeholder="Search the Hub (Enter)", id="hub-search")
            with Horizontal(id="hub-tables"):
                yield DataTable(id="hub", cursor_type="row")
                yield DataTable(id="quants", cursor_type="row")
            yield Label("Downloads", classes="section")
            yield VerticalScroll(id="downloads")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#local", DataTable).add_columns(
            "Name", "Size", "Quant", "Arch", "Fit", "Last used"
        )
        self.query_one("#hub", DataTable).add_columns("Repository", "Downloads", "Likes", "About")
        self.query_one("#quants", DataTable).add_columns("File", "Quant", "Size", "Fit")
        self.refresh_local()
        if self.ember.catalog.offline():
            self._show_offline()
        self._show_repos(self.ember.catalog.curated())
        self.query_one("#local", DataTable).focus()
        if self.initial_download is not None:
            self.run_worker(self.start_download(*self.initial_download), group="downloads")

    def refresh_local(self) -> None:
        """Re-read the registry."""
        table = self.query_one("#local", DataTable)
        table.clear()
        try:
            models = self.ember.catalog.list_local()
        except EmberError as exc:
            notify_error(self, "Model registry", exc)
            return
        for m in models:
            cells = (m.name, human_size(m.size_bytes), m.quant, m.architecture)
            badge, used = fit_badge(m.size_bytes), _last_used(m.last_used_at)
            table.add_row(*(Text(x) for x in (*cells, badge, used)), key=m.name)

    def _show_offline(self) -> None:
        """Offline: say so where the Hub would be, and keep the curated list to read."""
        self.query_one("#hub-label", Label).update(OFFLINE_LABEL)
        search = self.query_one("#hub-search", Input)
        search.placeholder = "Offline: Hub search is off"
        search.disabled = True

    def _show_repos(self, repos: list[HubRepo]) -> None:
        table = self.query_one("#hub", DataTable)
        table.clear()
        for repo in repos:
            # the curated list has no counts: a dash, not a 0 that reads as broken
            downloads = _count(repo.downloads)
            cells = (repo.repo_id, downloads, _count(repo.likes), repo.description)
            table.add_row(*(Text(x) for x in cells), key=repo.repo_id)

    def _selected_local(self) -> LocalModel | None:
        table = self.query_one("#local", DataTable)
        if table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return next((m for m in self.ember.catalog.list_local() if m.name == key), None)

    # actions

    def action_back(self) -> None:
        self.dismiss()

    def action_search(self) -> None:
        self.query_one("#hub-search", Input).focus()

    @work(group="dialog")
    async def action_delete(self) -> None:
        if not self.query_one("#local", DataTable).has_focus:
            return
        model = self._selected_local()
        if model is None:
            return
        question = f"Delete {model.name} ({human_size(model.size_bytes)})?"
        if not await self.app.push_screen_wait(ConfirmDialog(question)):
            return
        try:
            self.ember.catalog.delete(model.name)
        except EmberError as exc:
            notify_error(self, f"Delete {model.name}", exc)
            return
        self.notify(f"deleted {model.name}", markup=False)
        self.refresh_local()

    def action_use(self) -> None:
        model = self._selected_local()
        if model is None:
            return
        self.ember.session.use_model(model.name)
        self.ember.preload(model.name)
        self.notify(f"this chat now uses {model.name}", markup=False)
        self.dismiss()

    # hub

    @on(Input.Submitted, "#hub-search")
    @work(group="hub", exclusive=True, thread=True, exit_on_error=False)
    def _search(self, event: Input.Submitted) -> None:
        try:
            repos = self.ember.catalog.search(event.value)
        except EmberError as exc:
            notify_error(self, "Hub search", exc)
            return
        self.app.call_from_thread(self._show_repos, repos)

    @on(DataTable.RowSelected, "#hub")
    @work(group="hub", exclusive=True, thread=True, exit_on_error=False)
    def _pick_repo(self, event: DataTable.RowSelected) -> None:
        repo_id = str(event.row_key.value)
        try:
            quants = self.ember.catalog.quants(repo_id)
        except EmberError as exc:
            notify_error(self, repo_id, exc)
            return
        self.app.call_from_thread(self._show_quants, repo_id, quants)

    def _show_quants(self, repo_id: str, quants: list[QuantOption]) -> None:
        table = self.query_one("#quants", DataTable)
        table.clear()
        self.quant_repo = repo_id
        for q in quants:
            badge = fit_badge(q.size_bytes)
            cells = (q.filename, q.quant, human_size(q.size_bytes), badge)
            table.add_row(*(Text(x) for x in cells), key=q.filename)
        table.focus()

    @on(DataTable.RowSelected, "#quants")
    async def _pick_quant(self, event: DataTable.RowSelected) -> None:
        await self.start_download(self.quant_repo, str(event.row_key.value))

    async def start_download(self, repo_id: str, filename: str) -> None:
        """A download row for repo_id's file (or quant label), started now (the first-run
        screen's offer of the starter's sibling comes here too)."""
        row = DownloadRow(repo_id, filename)
        await self.query_one("#downloads").mount(row)
        row.focus()
        self._download(row)

    @on(DownloadRow.ResumeRequested)
    def _resume(self, event: DownloadRow.ResumeRequested) -> None:
        self._download(event.row)

    @work(group="downloads", thread=True, exit_on_error=False)
    def _download(self, row: DownloadRow) -> None:
        def progress(done: int, total: int) -> None:
            self.app.call_from_thread(row.progress, done, total)

        try:
            model = self.ember.catalog.download(
                row.repo_id, row.filename, progress, row.cancel_event
            )
        except EmberError as exc:
            state = "cancelled" if row.cancel_event.is_set() else f"failed: {exc}"
            self.app.call_from_thread(row.set_state, state)
            if not row.cancel_event.is_set():
                notify_error(self, f"Download of {row.filename}", exc)
            return
        self.app.call_from_thread(row.set_state, "done")
        self.app.call_from_thread(self.refresh_local)
        self.notify(f"downloaded {model.name}", markup=False)
