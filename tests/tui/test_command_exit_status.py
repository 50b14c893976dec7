"""`ember chat` never exits 0 after the app stopped on an error: one line, traceback in the log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.app import App

from ember.__main__ import main
from ember.app.config import get_paths
from ember.tui.app import EmberApp


def test_an_exception_inside_the_app_exits_1_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken_mount(self: EmberApp) -> None:
        raise RuntimeError("drawing the chat failed")

    def headless_run(self: EmberApp, *args: Any, **kwargs: Any) -> Any:
        return App.run(self, headless=True)  # Textual's own run, with no terminal

    monkeypatch.setattr(EmberApp, "on_mount", broken_mount)
    monkeypatch.setattr(EmberApp, "run", headless_run)
    code = main(["chat", "--fake"])
    err = capsys.readouterr().err.strip().splitlines()
    log = get_paths().cache_dir / "engine.log"
    assert code == 1
    assert err[-1] == (
        "ember: error: the chat app stopped on RuntimeError: drawing the chat failed "
        f"(details in {log})"
    )
    assert "drawing the chat failed" in Path(log).read_text()  # the traceback is kept


def test_a_clean_quit_exits_0(monkeypatch: pytest.MonkeyPatch) -> None:
    def quit_on_mount(self: EmberApp) -> None:
        self.exit()

    monkeypatch.setattr(EmberApp, "on_mount", quit_on_mount)
    monkeypatch.setattr(EmberApp, "run", lambda self, *a, **k: App.run(self, headless=True))
    assert main(["chat", "--fake"]) == 0
