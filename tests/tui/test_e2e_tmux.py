"""End to end: the real `ember` in a real terminal (tmux): chat, stop with Esc or Ctrl+C, quit,
reopen.

The fake-model run checks the terminal path (keys, screens, a demo that keeps nothing) on every
CI run; the starter-model run (marked `model`) does the same with the real engine, and finds its
history on restart.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.requires_tool("tmux", "apt-get install tmux")


class Tmux:
    """One detached tmux session running a command."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.name = f"ember-test-{uuid.uuid4().hex[:8]}"
        exports = " ".join(f"{k}={_quote(v)}" for k, v in env.items())
        line = f"cd {_quote(str(REPO))} && env {exports} {' '.join(map(_quote, command))}"
        subprocess.run(
            ["tmux", "new-session", "-d", "-s", self.name, "-x", "120", "-y", "36", line],
            check=True,
        )

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys], check=True)

    def type(self, text: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, "-l", text], check=True)

    def screen(self) -> str:
        out = subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", self.name], capture_output=True, text=True
        )
        return out.stdout

    def alive(self) -> bool:
        return (
            subprocess.run(["tmux", "has-session", "-t", self.name], capture_output=True).returncode
            == 0
        )

    def wait(
        self, condition: Callable[[str], bool], what: str, timeout_s: float, poll_s: float = 0.2
    ) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            text = self.screen()
            if condition(text):
                return text
            time.sleep(poll_s)  # polling a real terminal: there is no event to wait on
        raise AssertionError(f"timed out waiting for {what}; screen:\n{self.screen()}")

    def kill(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


@pytest.fixture
def run_ember(ember_home: Path) -> Iterator[Callable[..., Tmux]]:
    sessions: list[Tmux] = []
    env = {
        "EMBER_HOME": str(ember_home),
        "HF_HUB_OFFLINE": "1",
        "TERM": "xterm-256color",
        "PYTHONPATH": str(REPO),
        "HOME": os.environ.get("HOME", "/tmp"),
    }

    def start(*args: str, **extra_env: str) -> Tmux:
        session = Tmux([sys.executable, "-m", "ember", *args], env | extra_env)
        sessions.append(session)
        return session

    yield start
    for session in sessions:
        session.kill()


def _chat_session(
    run_ember: Callable[..., Tmux], args: tuple[str, ...], answer_timeout_s: float, **env: str
) -> Tmux:
    """Chat, stop the second reply with Esc, quit with Ctrl+Q; the app after the reply stopped."""
    app = run_ember(*args, **env)
    app.wait(lambda s: "Stop" in s and "New chat" in s, "the chat screen", 60)
    app.type("Say hello")
    app.keys("Enter")
    first = app.wait(
        lambda s: "TTFT -" not in s and "TTFT" in s and "generating" not in s,
        "the streamed answer",
        answer_timeout_s,
    )
    assert "Say hello" in first and "Ember" in first  # the chat title in the list, the reply header

    # a second prompt, stopped with Esc while it streams
    app.type("Write a very long story about a dragon")
    app.keys("Enter")
    app.wait(lambda s: "generating" in s, "the second reply to start", answer_timeout_s, 0.05)
    app.keys("Escape")
    app.wait(lambda s: "stopped" in s and "generating" not in s, "the reply to stop", 30)
    _quit(app)
    return app


def test_fake_model_in_a_real_terminal(run_ember, ember_home: Path) -> None:
    """The demo works in a real terminal and keeps nothing: it says it runs in a throwaway
    home, and a second run starts empty while the real home never gets a history."""
    app = run_ember("--fake")
    shown = ("Nothing here is saved", "New chat")  # the toast's title on the chat screen
    app.wait(lambda s: all(text in s for text in shown), "the demo notice", 60)
    _quit(app)
    _chat_session(run_ember, ("--fake",), 30)
    again = run_ember("--fake")
    screen = again.wait(lambda s: "Stop" in s and "New chat" in s, "the chat screen", 60)
    assert "Say hello" not in screen and "dragon" not in screen
    _quit(again)
    assert not (ember_home / "data" / "history.sqlite3").exists()


def test_ctrl_c_stops_a_reply_and_a_second_ctrl_c_quits(run_ember) -> None:
    """In a real terminal Ctrl+C reaches the app as a key (not SIGINT): the first stops the
    streaming reply as Esc does, the second quits; the footer names the key."""
    app = run_ember("--fake")
    screen = app.wait(lambda s: "Stop" in s and "New chat" in s, "the chat screen", 60)
    assert "^c" in screen
    app.type("Write a very long story about a dragon")
    app.keys("Enter")
    app.wait(lambda s: "generating" in s, "the reply to start", 30, 0.05)
    app.keys("C-c")
    app.wait(lambda s: "stopped" in s and "generating" not in s, "the reply to stop", 30)
    assert app.alive()
    app.keys("C-c")
    wait_until(lambda: not app.alive(), "ember quits on the second Ctrl+C", 30, interval_s=0.2)


@pytest.mark.model
def test_starter_model_in_a_real_terminal(run_ember, starter_gguf) -> None:
    # greedy and short replies keep the run deterministic and quick; 32 tokens still leave time
    # to press Esc while the second reply streams
    limits = {"EMBER_TEMPERATURE": "0", "EMBER_MAX_TOKENS": "32"}
    args = ("--model", str(starter_gguf))
    _chat_session(run_ember, args, 300, **limits)
    again = run_ember(*args, **limits)
    screen = again.wait(lambda s: "Say hello" in s, "the history after restart", 60)
    assert "dragon" in screen and "stopped" in screen
    _quit(again)


def _quit(app: Tmux) -> None:
    app.keys("C-q")
    wait_until(lambda: not app.alive(), "ember quits on Ctrl+Q", 30, interval_s=0.2)


@pytest.mark.model
def test_starter_answers_the_capital_of_france(run_ember, starter_gguf) -> None:
    """The first question a new user asks gets a short answer that names Paris and ends on its
    own (needs the base-model chat scaffold: models/text/base_chat)."""
    pytest.importorskip("ember.models.text.base_chat", reason="needs the base-model scaffold")
    max_tokens = 128
    app = run_ember(
        "--model", str(starter_gguf), EMBER_TEMPERATURE="0", EMBER_MAX_TOKENS=str(max_tokens)
    )
    app.wait(lambda s: "Stop" in s and "New chat" in s, "the chat screen", 60)
    app.type("What is the capital of France?")
    app.keys("Enter")
    screen = app.wait(
        lambda s: "TTFT -" not in s and "TTFT" in s and "generating" not in s,
        "the answer",
        300,
    )
    _quit(app)
    from ember.app.history.store import History
    from ember.paths import get_paths

    history = History.open(get_paths().history_db)
    try:
        (chat,) = history.list_conversations()
        reply = history.path(chat.id)[-1]
    finally:
        history.close()
    assert "Paris" in reply.content, screen
    assert reply.status == "complete"
    assert reply.stats["generated_tokens"] < max_tokens  # it ended on its own
