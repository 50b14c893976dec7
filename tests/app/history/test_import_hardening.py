"""History import refuses what it could not read back (issue 25): wrong-typed settings,
timestamps no calendar shows, nesting thousands deep, FIFOs and devices; a retired
`allowed_tools` is left out and said so. `ember history list` and the records survive rows
that were stored badly before."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ember.app.cli import main
from ember.app.errors import HistoryError
from ember.app.history.importer import import_chats, parse_export, read_export_file
from ember.app.history.store import History
from ember.paths import get_paths


def _chat(**changes: Any) -> dict[str, Any]:
    chat = {
        "title": "t",
        "created_at": 1.7e9,
        "updated_at": 1.7e9,
        "system_prompt": "",
        "settings": {"model": "gemma3-270m", "temperature": 0.5, "seed": None},
        "leaf": 2,
        "messages": [
            {"id": 1, "parent": None, "role": "user", "content": "hi"},
            {
                "id": 2,
                "parent": 1,
                "role": "assistant",
                "content": "hello",
                "stats": {"ttft_s": 0.1},
            },
        ],
    }
    chat.update(changes)
    return chat


def _file(*chats: dict[str, Any]) -> str:
    return json.dumps({"format": "ember-chats", "version": 1, "conversations": list(chats)})


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def _deep_settings(text: str) -> str:
    return text.replace('"temperature": 0.5', f'"temperature": {_nested(5000)}')


def _deep_stats(text: str) -> str:
    return text.replace('{"ttft_s": 0.1}', '{"ttft_s": ' + _nested(50) + "}")


def _deep_part(text: str) -> str:
    deep = "{" + '"a": {' * 3000 + "}" * 3000 + "}"
    return text.replace('"content": "hi"', f'"content": "hi", "parts": [{deep}]')


BAD: list[tuple[Callable[[], str], str]] = [
    (
        lambda: _file(_chat(settings={"temperature": "hot"})),
        "settings.temperature: must be a number",
    ),
    (lambda: _file(_chat(settings={"top_k": 1.5})), "settings.top_k: must be an integer"),
    (lambda: _file(_chat(settings={"top_p": 7})), "settings.top_p: must be in (0, 1]"),
    (lambda: _file(_chat(settings={"seed": -1})), "settings.seed: must be between"),
    (lambda: _file(_chat(settings={"thinking": "yes"})), "settings.thinking: must be true"),
    (lambda: _file(_chat(settings={"model": ["x"]})), "settings.model: must be a model name"),
    (lambda: _file(_chat(settings={"mystery": 1})), "settings.mystery: unknown chat setting"),
    (lambda: _file(_chat(updated_at=1e300)), "conversations[0].updated_at: 1e+300"),
    (lambda: _file(_chat(created_at=float("inf"))), "conversations[0].created_at: inf"),
    (lambda: _file(_chat(created_at=float("nan"))), "conversations[0].created_at: nan"),
    (lambda: _file(_chat(updated_at=-5)), "conversations[0].updated_at: -5"),
    (lambda: _deep_settings(_file(_chat())), "nested more than 32 deep"),
    (lambda: _deep_stats(_file(_chat())), "nested more than 32 deep"),
    (lambda: _deep_part(_file(_chat())), "nested more than 32 deep"),
    (lambda: _nested(100_000), "nested more than 32 deep"),
    (
        lambda: _file(_chat()).replace('{"ttft_s": 0.1}', '{"ttft_s": "x"}'),
        "messages[1].stats.ttft_s: must be a number",
    ),
    (
        lambda: _file(_chat()).replace('{"ttft_s": 0.1}', '{"mood": 1}'),
        "messages[1].stats.mood: unknown stat",
    ),
    (
        lambda: _file(_chat()).replace('{"ttft_s": 0.1}', '{"ttft_s": Infinity}'),
        "stats.ttft_s: inf: must be a finite number",
    ),
]


@pytest.mark.parametrize(("text", "reason"), BAD)
def test_a_file_that_could_not_be_read_back_is_refused(
    ember_home: Path, text: Callable[[], str], reason: str
) -> None:
    history = History.open(get_paths().history_db)
    with pytest.raises(HistoryError) as info:
        import_chats(history, parse_export(text()))
    assert reason in str(info.value) and "\n" not in str(info.value)
    assert history.list_conversations() == []
    history.close()


def test_a_good_file_imports_and_reads_back(ember_home: Path) -> None:
    history = History.open(get_paths().history_db)
    (chat,) = import_chats(history, parse_export(_file(_chat())))
    stored = history.conversation(chat.id)
    assert stored.damaged == "" and stored.settings["temperature"] == 0.5
    history.close()


def test_an_imported_allow_list_is_left_out_and_said_so(
    ember_home: Path, tmp_path: Path, capsys
) -> None:
    path = tmp_path / "chats.json"
    path.write_text(_file(_chat(settings={"allowed_tools": ["add"], "temperature": 0.5})))
    assert main(["history", "import", str(path)]) == 0
    out = capsys.readouterr().out
    assert "left out conversations[0].settings.allowed_tools: not imported: tool permission" in out
    history = History.open(get_paths().history_db)
    (conv,) = history.list_conversations()
    assert conv.settings == {"temperature": 0.5}
    history.close()


def _refused_quickly(path: Path, reason: str) -> None:
    """read_export_file refuses path within 10 s (a FIFO used to hang, /dev/zero to eat RAM)."""
    result: list[BaseException | None] = []

    def run() -> None:
        try:
            read_export_file(path)
            result.append(None)
        except BaseException as exc:  # noqa: BLE001 - the test looks at what it was
            result.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(10.0)
    assert result, f"import of {path} did not finish in 10 s"
    assert isinstance(result[0], HistoryError) and reason in str(result[0])
    assert str(path) in str(result[0])


def test_fifos_and_devices_are_refused_without_reading(tmp_path: Path) -> None:
    fifo = tmp_path / "chats.fifo"
    os.mkfifo(fifo)
    _refused_quickly(fifo, "a FIFO (named pipe), not a regular file")
    _refused_quickly(Path("/dev/zero"), "a character device, not a regular file")
    link = tmp_path / "innocent.json"
    link.symlink_to("/dev/urandom")
    _refused_quickly(link, "a character device, not a regular file")
    _refused_quickly(tmp_path, "a folder, not a regular file")


def test_history_list_survives_rows_stored_badly(ember_home: Path, capsys) -> None:
    path = get_paths().history_db
    history = History.open(path)
    conv = history.create_conversation("stored before the checks", "", {"temperature": 0.5})
    history.close()
    raw = sqlite3.connect(path)
    with raw:
        raw.execute(
            "UPDATE conversations SET updated_at=1e300, created_at=?, settings_json=? WHERE id=?",
            (float("inf"), '{"temperature": "hot", "allowed_tools": ["add"], "top_k": 5}', conv.id),
        )
    raw.close()
    assert main(["history", "list"]) == 0
    assert "stored before the checks" in capsys.readouterr().out
    history = History.open(path)
    stored = history.conversation(conv.id)
    assert stored.settings == {"top_k": 5} and stored.updated_at == 0.0
    assert "settings_json: temperature is not a valid value" in stored.damaged
    assert "updated_at: not a time" in stored.damaged
    history.close()
