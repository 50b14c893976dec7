"""`ember run --json-schema FILE` and `--grammar FILE`: the reply matches, bad files are one line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ember.app.cli import main

pytest.importorskip("llguidance", reason="constrained decoding needs llguidance")

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"enum": ["Paris", "Rome"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 30},
    },
    "required": ["city", "days"],
    "additionalProperties": False,
}
FAKE = ("run", "fake", "plan a trip", "--runner", "fake", "--seed", "3", "--json")


def _last_json(out: str) -> dict[str, object]:
    return json.loads(out.strip().splitlines()[-1])


def test_json_schema_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "trip.json"
    path.write_text(json.dumps(SCHEMA))
    assert main([*FAKE, "--temperature", "1", "--json-schema", str(path)]) == 0
    reply = json.loads(str(_last_json(capsys.readouterr().out)["text"]))
    assert reply["city"] in ("Paris", "Rome") and isinstance(reply["days"], int)


@pytest.mark.parametrize(
    ("name", "text", "pattern"),
    [
        ("answer.gbnf", 'root ::= "yes" | "no"', "yes|no"),
        ("answer.lark", 'start: "n=" /[0-9]{2}/', "n=[0-9]{2}"),
        ("answer.regex", "[A-Z]{3}", "[A-Z]{3}"),
    ],
)
def test_grammar_flag_by_suffix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, pattern: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    assert main([*FAKE, "--temperature", "1", "--grammar", str(path)]) == 0
    assert re.fullmatch(pattern, str(_last_json(capsys.readouterr().out)["text"]))


def test_bad_files_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    assert main([*FAKE, "--json-schema", str(bad)]) != 0
    err = capsys.readouterr().err
    assert "--json-schema" in err and "not valid JSON" in err and err.count("\n") == 1
    assert main([*FAKE, "--grammar", str(tmp_path / "missing.gbnf")]) != 0
    assert "cannot read" in capsys.readouterr().err
    broken = tmp_path / "broken.lark"
    broken.write_text("start: (((")
    assert main([*FAKE, "--grammar", str(broken)]) != 0
    assert "constraint lark" in capsys.readouterr().err


@pytest.mark.model
def test_starter_model_json_schema_reply(
    starter_gguf: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import jsonschema

    path = tmp_path / "trip.json"
    path.write_text(json.dumps(SCHEMA))
    argv = ["run", str(starter_gguf), "Plan a trip as JSON.", "--temperature", "0"]
    assert main([*argv, "--max-tokens", "60", "--json-schema", str(path), "--json"]) == 0
    record = _last_json(capsys.readouterr().out)
    jsonschema.validate(json.loads(str(record["text"])), SCHEMA)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("huge.regex", "a{1000000}"),
        (
            "recursive.json",
            json.dumps({"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]}),
        ),
    ],
)
def test_a_constraint_too_complex_is_one_line(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], name: str, text: str
) -> None:
    """Issue 25: the engine's traceback reached the terminal before the error line."""
    path = tmp_path / name
    path.write_text(text)
    flag = "--json-schema" if name.endswith(".json") else "--grammar"
    assert main([*FAKE, flag, str(path)]) != 0
    err = capfd.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith("ember: error: ") and "constraint" in err


@pytest.mark.parametrize("flag", ["--json-schema", "--grammar"])
def test_spec_files_that_are_not_regular_files_are_refused_unread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    import os

    fifo = tmp_path / "spec.fifo"
    os.mkfifo(fifo)
    link = tmp_path / "spec.gbnf"
    link.symlink_to("/dev/zero")
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (1024 * 1024 + 1))
    for path, reason in [
        (fifo, "a FIFO (named pipe), not a regular file"),
        (Path("/dev/urandom"), "a character device, not a regular file"),
        (link, "a character device, not a regular file"),
        (big, "1,048,577 bytes is more than the 1.0 MiB limit"),
    ]:
        assert main([*FAKE, flag, str(path)]) != 0
        err = capsys.readouterr().err
        assert f"{path} ({flag}): {reason}" in err and err.count("\n") == 1, err
