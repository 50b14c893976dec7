"""`ember run` always exits: invalid UTF-8, UTF-16 and lone surrogates in its input included."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FAKE = ["--runner", "fake", "--raw", "--max-tokens", "3", "--temperature", "0", "--json"]


def _ember(
    *argv: str | bytes, stdin: bytes = b"", home: Path
) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "EMBER_HOME": str(home), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "ember", *argv],
        input=stdin,
        capture_output=True,
        cwd=REPO,
        env=env,
        timeout=120,  # "always exits": a hang fails here instead of blocking the run
    )


def _prompt_tokens(proc: subprocess.CompletedProcess[bytes]) -> int:
    record = json.loads(proc.stdout.decode().strip().splitlines()[-1])
    return int(record["prompt_tokens"])


@pytest.mark.parametrize("where", ["argument", "stdin"])
def test_invalid_utf8_prompt_is_replaced_with_one_warning(where: str, ember_home: Path) -> None:
    data = b"caf\xe9!"
    if where == "argument":
        proc = _ember("run", "fake", data, *FAKE, home=ember_home)
    else:
        proc = _ember("run", "fake", *FAKE, stdin=data, home=ember_home)
    assert proc.returncode == 0, proc.stderr
    name = "prompt" if where == "argument" else "stdin"
    assert proc.stderr.decode().splitlines() == [
        f"ember: warning: {name}: 1 invalid UTF-8 sequence(s) replaced with U+FFFD"
    ]
    assert _prompt_tokens(proc) == 1 + len("caf\ufffd!".encode())  # BOS + bytes


@pytest.mark.parametrize("codec", ["utf-16", "utf-32", "utf-8-sig"])
def test_stdin_with_a_byte_order_mark_is_decoded(codec: str, ember_home: Path) -> None:
    proc = _ember("run", "fake", *FAKE, stdin="héllo".encode(codec), home=ember_home)
    assert proc.returncode == 0 and proc.stderr == b""
    assert _prompt_tokens(proc) == 1 + len("héllo".encode())


def test_a_refused_request_exits_non_zero_with_one_line(ember_home: Path) -> None:
    proc = _ember("run", "fake", "hi", *FAKE, "--seed", "-1", home=ember_home)
    assert proc.returncode == 1
    assert proc.stderr.decode().splitlines() == [
        "ember: error: --seed -1: must be between 0 and 18446744073709551615"
    ]


def test_a_reply_on_a_terminal_shows_control_characters_inert(ember_home: Path) -> None:
    import pty

    argv = [sys.executable, "-m", "ember", "run", "fake", "hello", "--runner", "fake", "--raw"]
    argv += ["--temperature", "0.9", "--seed", "3", "--max-tokens", "300"]
    env = {**os.environ, "EMBER_HOME": str(ember_home)}
    piped = subprocess.run(argv, capture_output=True, env=env, cwd=REPO, timeout=120).stdout
    controls = {b for b in piped if b < 32 and b not in (9, 10, 13)}
    assert controls  # this seed makes the fake model emit control bytes

    leader, follower = pty.openpty()
    proc = subprocess.Popen(argv, stdout=follower, stderr=subprocess.DEVNULL, env=env, cwd=REPO)
    os.close(follower)
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    assert proc.wait(timeout=120) == 0
    assert not {b for b in shown if b < 32 and b not in (9, 10, 13)}  # pictures instead
    assert "\u2403".encode() in shown or "\u2406".encode() in shown  # e.g. ␃ or ␆
