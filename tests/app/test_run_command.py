from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from ember.app.cli import main
from ember.app.commands.run import JSON_FIELDS

FIELDS = {"text", "finish_reason", "token_ids", "runner", "device", *JSON_FIELDS}
FIELDS |= {"kv_cache", "kv_element", "kv_cache_bytes"}  # the KV cache (--kv-cache) and its bytes
FIELDS |= {"content", "reasoning"}  # the reply split: its answer and its reasoning apart


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


GREEDY_JSON = ("run", "fake", "hello", "--runner", "fake", "--temperature", "0")


def test_run_streams_and_ends_with_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, *GREEDY_JSON, "--max-tokens", "6", "--json")
    assert code == 0
    record = json.loads(out.strip().splitlines()[-1])
    assert set(record) == FIELDS
    assert record["runner"] == "fake" and record["generated_tokens"] == len(record["token_ids"])
    assert record["prompt_tokens"] > 0 and record["evicted_tokens"] == 0
    assert record["kv_cache_bytes"] > 0 and record["context_limit"] > 0
    assert out.startswith(record["text"])  # the text was streamed before the JSON line
    _, again, _ = _run(capsys, *GREEDY_JSON, "--max-tokens", "6", "--json")
    assert json.loads(again.strip().splitlines()[-1])["token_ids"] == record["token_ids"]


def test_prompt_from_stdin_and_raw(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("piped prompt"))
    code, out, _ = _run(
        capsys,
        "run",
        "fake",
        "--raw",
        "--runner",
        "fake",
        "--max-tokens",
        "3",
        "--temperature",
        "0",
        "--json",
    )
    record = json.loads(out.strip().splitlines()[-1])
    assert code == 0 and record["prompt_tokens"] == len("piped prompt") + 1  # + BOS


def test_second_run_hits_the_disk_prefix_cache(capsys: pytest.CaptureFixture[str]) -> None:
    long_prompt = "a long shared system prompt " * 8
    argv = [
        "run",
        "fake",
        "q",
        "--system",
        long_prompt,
        "--runner",
        "fake",
        "--max-tokens",
        "4",
        "--temperature",
        "0",
        "--json",
    ]
    _, first, _ = _run(capsys, *argv)
    _, second, _ = _run(capsys, *argv)
    one, two = (json.loads(x.strip().splitlines()[-1]) for x in (first, second))
    assert one["cached_tokens"] == 0 and two["cached_tokens"] > 200
    assert one["token_ids"] == two["token_ids"]
    _, third, _ = _run(capsys, *argv, "--no-prefix-cache")
    assert json.loads(third.strip().splitlines()[-1])["cached_tokens"] == 0


def test_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "run", "fake", "x", "--runner", "vllm")
    assert code == 1 and "choose torch, llama.cpp, remote or auto" in err
    code, _, err = _run(
        capsys, "run", "fake", "x" * 100, "--runner", "fake", "--ctx", "32", "--window", "0"
    )
    assert code == 1 and "does not fit" in err and len(err.strip().splitlines()) == 1


def test_eval_ppl_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    text = tmp_path / "t.txt"
    text.write_text("the quick brown fox jumps over the lazy dog " * 10, encoding="utf-8")
    code, out, _ = _run(
        capsys, "eval", "ppl", "fake", str(text), "--runner", "fake", "--ctx", "64", "--json"
    )
    record = json.loads(out)
    assert code == 0 and record["tokens"] == 441 - 1 and record["ppl"] > 1
    code, out, _ = _run(
        capsys, "eval", "ppl", "fake", str(text), "--runner", "fake", "--window", "32", "--json"
    )
    streamed = json.loads(out)
    assert streamed["mode"] == "streaming" and streamed["evicted_tokens"] > 0


def test_an_empty_reply_is_named_on_stderr(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A reply with no visible text is not passed off as an answer: stderr says so."""
    grammar = tmp_path / "space.regex"
    grammar.write_text("[ ]")  # the only reply the constraint allows: one blank
    code, out, err = _run(capsys, *GREEDY_JSON, "--grammar", str(grammar), "--max-tokens", "4")
    assert code == 0 and not out.strip()
    assert "ember: empty reply: the model wrote no text (1 tokens, finish: stop)" in err
    _, _, err = _run(capsys, *GREEDY_JSON, "--max-tokens", "4")
    assert "empty reply" not in err
