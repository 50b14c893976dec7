"""Ember's commands in the palette (new chat, switch model, presets, export, import) and text
files attached to a message (`/file PATH`, F4), with their token count and one-line refusals."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from textual.command import CommandList, CommandPalette
from textual.pilot import Pilot
from textual.widgets import Input

from ember.app.config import Settings
from ember.engine.api import GenerationRequest
from ember.tui.app import EmberApp
from ember.tui.screens.chat.screen import ChatScreen
from ember.tui.screens.dialogs import PickDialog, TextDialog
from ember.tui.widgets.prompt_input import PromptInput
from ember.tui.widgets.status_bar import StatusBar

from .conftest import SIZE, screen_text, send, wait_for, wait_idle

pytestmark = pytest.mark.anyio


def _chat(app: EmberApp) -> ChatScreen:
    for screen in app.screen_stack:
        if isinstance(screen, ChatScreen):
            return screen
    raise AssertionError("no chat screen")


def _notes(app: EmberApp) -> list[tuple[str, str]]:
    return [(str(n.title), str(n.message)) for n in app._notifications]


async def palette(pilot: Pilot[None], query: str) -> None:
    """Open the palette, type query, wait for the Ember command named so, run it."""
    app = pilot.app
    await pilot.press("ctrl+p")
    await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette))
    await pilot.press(*query)
    results = app.screen.query_one(CommandList)

    def first_is_it() -> bool:
        if not results.option_count:
            return False
        first = str(results.get_option_at_index(0).prompt).lower()
        return first.startswith(query.lower())

    await wait_for(pilot, first_is_it)
    await pilot.press("enter")
    await wait_for(pilot, lambda: not isinstance(app.screen, CommandPalette))


async def answer(pilot: Pilot[None], text: str) -> None:
    """Replace a TextDialog's value and accept it."""
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, TextDialog))
    field = pilot.app.screen.query_one(Input)
    field.value = text
    await pilot.press("enter")


async def test_palette_lists_embers_commands(make_app) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette))
        results = app.screen.query_one(CommandList)
        await wait_for(pilot, lambda: results.option_count >= 15)
        names = [str(results.get_option_at_index(i).prompt) for i in range(results.option_count)]
        for name in ("New chat", "Switch model", "Pull a model", "Export chat as Markdown",
                     "Import chats", "Settings", "System prompt presets", "Attach a text file"):  # fmt: skip
            assert any(n.startswith(name) for n in names), name


async def test_palette_new_chat_switch_model_and_preset(make_app, history, backends) -> None:
    preset = history.save_preset("Pirate", "Talk like a pirate.")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "hi")
        await wait_idle(pilot)
        chat = _chat(app)
        await palette(pilot, "switch model")
        await wait_for(pilot, lambda: isinstance(app.screen, PickDialog))
        await pilot.press("down", "enter")  # gemma3-270m is current; the next one
        await wait_for(pilot, lambda: chat.query_one(StatusBar).info.model == "qwen3-0.6b")
        await palette(pilot, f"system prompt: {preset.name}")
        await wait_for(
            pilot,
            lambda: (
                chat.session.conversation is not None
                and chat.session.conversation.system_prompt != ""
            ),
        )
        await send(pilot, "ahoy")
        await wait_idle(pilot)
        request = backends.last.requests[-1]
        assert backends.last.options.model == "qwen3-0.6b"
        assert request.messages[0].content == "Talk like a pirate."
        await palette(pilot, "new chat")
        await wait_for(pilot, lambda: chat.session.conversation is None)


async def test_palette_export_and_import(make_app, history, tmp_path: Path) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "What is 2+2?")
        await wait_idle(pilot)
        markdown, exported = tmp_path / "chat.md", tmp_path / "chat.json"
        await palette(pilot, "export chat as markdown")
        await answer(pilot, str(markdown))
        await wait_for(pilot, markdown.exists)
        text = markdown.read_text()
        assert text.startswith("# What is 2+2?") and "Hello **there**, friend." in text
        await palette(pilot, "export chat as json")
        await answer(pilot, str(exported))
        await wait_for(pilot, exported.exists)
        assert json.loads(exported.read_text())["conversations"][0]["title"] == "What is 2+2?"
        bad = tmp_path / "bad.json"
        bad.write_text('{"format": "ember-chats", "version": 7, "conversations": []}')
        await palette(pilot, "import chats")
        await answer(pilot, str(bad))
        await wait_for(pilot, lambda: any(t == "Import" for t, _ in _notes(app)))
        assert any("version: 7 is not 1" in m for _, m in _notes(app))
        await palette(pilot, "import chats")
        await answer(pilot, str(exported))
        await wait_for(pilot, lambda: len(history.list_conversations()) == 2)
        assert screen_text(app).count("What is 2+2?") >= 2  # the list shows both


async def test_file_command_attaches_counts_and_sends(make_app, backends, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("alpha beta gamma delta\n")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, f"/file {notes}\nSummarize the file.")
        await wait_idle(pilot)
        await wait_for(pilot, lambda: bool(backends.built) and bool(backends.last.requests))
        await wait_idle(pilot)
        chat = _chat(app)
        user = chat.session.path()[0]
        assert user.content == "Summarize the file."
        assert [(p.kind, p.name, p.text) for p in user.parts] == [
            ("file", "notes.txt", "alpha beta gamma delta\n")
        ]
        sent = backends.last.requests[-1].messages[-1].content
        assert sent == (
            "[file notes.txt]\nalpha beta gamma delta\n[end of file notes.txt]\n\n"
            "Summarize the file."
        )
        assert "attached: notes.txt" in screen_text(app)
        assert chat.session.attachments == [] and chat.query_one(PromptInput).text == ""


async def test_f4_attaches_and_the_banner_counts_tokens(make_app, backends, tmp_path) -> None:
    notes = tmp_path / "a.md"
    notes.write_text("one two three")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        chat = _chat(app)
        await pilot.press("f4")
        await answer(pilot, str(notes))
        await wait_for(pilot, lambda: len(chat.session.attachments) == 1)
        tokens = chat.session.attachments[0].tokens
        block = "[file a.md]\none two three\n[end of file a.md]\n\n"
        assert tokens == backends.last.count_tokens(GenerationRequest(prompt=block, add_bos=False))
        assert f"Attached: a.md ({tokens} tokens)" in screen_text(app)
        await send(pilot, "and?")
        await wait_idle(pilot)
        assert [p.name for p in chat.session.path()[0].parts] == ["a.md"]
        assert "Attached:" not in screen_text(app)


def _fifo(folder: Path) -> Path:
    os.mkfifo(folder / "pipe.txt")
    return folder / "pipe.txt"


def _link(path: Path, target: str) -> Path:
    path.symlink_to(target)
    return path


@pytest.mark.parametrize(
    ("make_file", "reason"),
    [
        (lambda d: d / "missing.txt", "no such file"),
        (lambda d: d, "a folder, not a regular file"),
        (_fifo, "a FIFO (named pipe), not a regular file"),  # it hung the open
        (lambda d: _link(d / "zero.txt", "/dev/zero"), "a character device, not a regular file"),
        (lambda d: _write(d / "b.bin", b"\x00\x01\x02binary"), "a binary file, not text"),
        (lambda d: _write(d / "l1.txt", "caf\xe9".encode("latin-1")), "not UTF-8 text"),
        (lambda d: _write(d / "big.txt", b"word " * 3000), "more than the model's whole context"),
    ],
)
async def test_a_file_that_cannot_go_is_one_line_and_the_message_stays(
    make_app, tmp_path: Path, make_file, reason
) -> None:
    path = make_file(tmp_path)
    app = make_app(Settings(ctx=512))
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, f"/file {path}\nmy question")
        await wait_for(pilot, lambda: any(t == "Not attached" for t, _ in _notes(app)))
        ((_, message),) = [n for n in _notes(app) if n[0] == "Not attached"]
        assert reason in message and str(path) in message and "\n" not in message
        chat = _chat(app)
        assert chat.query_one(PromptInput).text == f"/file {path}\nmy question"
        assert chat.session.attachments == [] and chat.session.conversation is None


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path
