"""First run: no models yet. Offer the packaged starter model, else the curated list.

The starter is a base (pretrained) model that Ember chats with through a few-shot scaffold
(models/text/chat_format.py); the screen says so and, unless the Hub is off, offers to download
its instruction-tuned sibling of the same size from the curated catalog."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Label

from ember.app.catalog.catalog import human_size
from ember.errors import EmberError

if TYPE_CHECKING:
    from ember.tui.app import EmberApp


class FirstRunScreen(ModalScreen[None]):
    """Welcome dialog shown when the registry has no models."""

    DEFAULT_CSS = """
    FirstRunScreen .note { width: 100%; }
    """
    BINDINGS = [
        Binding("escape", "skip", "Skip"),
        Binding("s", "starter", "Starter model"),
        Binding("m", "browse", "Browse models"),
        Binding("i", "sibling", "Instruction-tuned sibling"),
    ]

    @property
    def ember(self) -> EmberApp:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        starter = self.ember.catalog.starter_available()
        with Vertical(classes="dialog wide", id="first-run"):
            yield Label("Welcome to Ember. There are no models on this machine yet.")
            if starter:
                yield Label(
                    "The starter model (Gemma 3 270M, 253 MB) is installed and works offline."
                )
                yield Label(
                    "It is a base (pretrained) model, not tuned to follow instructions: Ember "
                    "chats with it by continuing a few-shot conversation, so expect short "
                    "answers to simple questions.",
                    id="base-model-note",
                    classes="note",
                )
                yield Button("Use the starter model (s)", id="starter", variant="primary")
                sibling = self.ember.catalog.starter_sibling()
                if sibling is not None:
                    repo, quant = sibling
                    yield Label(
                        f"Its instruction-tuned sibling ({repo.repo_id} {quant.quant}, "
                        f"{human_size(quant.size_bytes)}) follows instructions better; "
                        "download it from the Hub:",
                        classes="note",
                    )
                    yield Button("Download the instruction-tuned sibling (i)", id="sibling")
            else:
                yield Label("Pick a model to download from the curated list:")
                for repo in self.ember.catalog.curated():
                    yield Label(Content(f"  • {repo.repo_id}  {repo.description}"))
            yield Button("Browse and download models (m)", id="browse")
            yield Button("Skip (esc)", id="skip")

    @work(group="first-run", exclusive=True)
    async def action_starter(self) -> None:
        if not self.ember.catalog.starter_available():
            return
        self.notify("Preparing the starter model…")
        try:
            model = await self._install()
        except EmberError as exc:
            self.notify(f"starter model: {exc}", severity="error", markup=False)
            return
        self.notify(f"Ready: {model}", markup=False)
        self.dismiss()

    async def _install(self) -> str:
        worker = self.run_worker(
            self.ember.catalog.install_starter, thread=True, exit_on_error=False
        )
        await worker.wait()
        if worker.error is not None:
            raise worker.error
        assert worker.result is not None
        return worker.result.name

    def action_sibling(self) -> None:
        """Open the models screen with the sibling's download running (progress, cancel)."""
        from ember.tui.screens.models import ModelsScreen

        sibling = self.ember.catalog.starter_sibling()
        if sibling is None:
            return
        repo, quant = sibling
        self.dismiss()
        self.app.push_screen(ModelsScreen(download=(repo.repo_id, quant.filename)))

    def action_browse(self) -> None:
        self.dismiss()
        self.ember.action_models()

    def action_skip(self) -> None:
        self.dismiss()

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "starter":
            self.action_starter()
        elif event.button.id == "sibling":
            self.action_sibling()
        elif event.button.id == "browse":
            self.action_browse()
        else:
            self.action_skip()
