"""`ember` (the chat command) refuses to start while another instance holds the history."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ember.__main__ import build_parser
from ember.app.history.store import History
from ember.paths import get_paths

REPO = Path(__file__).resolve().parents[2]


def test_second_instance_is_told_history_in_use() -> None:
    held = History.open(get_paths().history_db)
    try:
        # not --fake: the demo runs in a throwaway home of its own, so it never meets this lock;
        # the history is opened before any model loads, so this ends at once
        proc = subprocess.run(
            [sys.executable, "-m", "ember"],
            cwd=REPO,
            env=os.environ | {"PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        held.close()
    assert proc.returncode == 1
    assert "in use by another Ember" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1  # one line, no traceback


def test_chat_flags_parse() -> None:
    args = build_parser().parse_args(
        ["chat", "--model", "m", "--runner", "torch", "--device", "cpu", "--ctx", "2048", "--fake"]
    )
    assert (args.model, args.runner, args.device, args.ctx, args.fake) == (
        "m",
        "torch",
        "cpu",
        2048,
        True,
    )
