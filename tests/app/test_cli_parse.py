"""Options anywhere around positionals, at every sub-command level (argparse's intermixed parse)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ember.app.cli import build_parser
from ember.app.cli_parse import parse_anywhere


def test_flags_between_model_and_prompt() -> None:
    args = parse_anywhere(build_parser(), ["run", "gemma3-270m", "--temperature", "0", "Hello"])
    assert (args.command, args.model, args.prompt, args.temperature) == (
        "run",
        "gemma3-270m",
        "Hello",
        0.0,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--max-tokens", "5", "M", "--json", "P"],
        ["run", "M", "P", "--max-tokens", "5", "--json"],
        ["run", "--json", "--max-tokens", "5", "M", "P"],
    ],
)
def test_flags_before_between_and_after(argv: list[str]) -> None:
    args = parse_anywhere(build_parser(), argv)
    assert (args.model, args.prompt, args.max_tokens, args.json) == ("M", "P", 5, True)


def test_nested_sub_command_parses_intermixed() -> None:
    args = parse_anywhere(build_parser(), ["eval", "ppl", "--ctx", "64", "M", "--json", "F.txt"])
    assert (args.eval_command, args.model, str(args.file), args.ctx, args.json) == (
        "ppl",
        "M",
        "F.txt",
        64,
        True,
    )


def test_search_text_after_a_flag() -> None:
    args = parse_anywhere(build_parser(), ["search", "--json", "gemma"])
    assert args.text == "gemma" and args.json


def test_errors_still_name_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_anywhere(build_parser(), ["run", "--temperature", "0"])
    assert exc.value.code == 2
    assert (
        "ember run: error: the following arguments are required: model" in capsys.readouterr().err
    )
    with pytest.raises(SystemExit):
        parse_anywhere(build_parser(), ["run", "M", "P", "extra"])
    assert "unrecognized arguments: extra" in capsys.readouterr().err


def test_ember_run_with_flag_between_model_and_prompt_in_a_subprocess() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "ember",
            "run",
            "fake",
            "--runner",
            "fake",
            "--temperature",
            "0",
            "Hello",
            "--max-tokens",
            "3",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout.strip().splitlines()[-1])
    assert record["generated_tokens"] == 3
