"""app/progress.py: a wait says what it does and how far once it passes 2 s, never before."""

from __future__ import annotations

import io
import threading
import time

from ember.app.progress import WaitReporter


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_nothing_before_two_seconds_then_lines_with_how_far() -> None:
    clock, out = Clock(), io.StringIO()
    waits = WaitReporter(out, clock=clock)
    waits.start()
    waits("packing weights (first run of this model)", 1, 18)
    clock.now += 1.9
    waits("packing weights (first run of this model)", 2, 18)
    assert out.getvalue() == ""  # a quick load stays silent
    clock.now += 0.2
    waits("packing weights (first run of this model)", 3, 18)
    clock.now += 0.5
    waits("packing weights (first run of this model)", 4, 18)  # within 5 s: skipped
    clock.now += 0.6
    waits("packing weights (first run of this model)", 18, 18)
    assert out.getvalue().splitlines() == [
        "ember: packing weights (first run of this model) 3/18 (16%), 2 s",
        "ember: packing weights (first run of this model) 18/18 (100%), 3 s",
    ]


def test_on_a_terminal_the_line_is_rewritten_in_place_and_ended_before_the_reply() -> None:
    clock, out = Clock(), Tty()
    waits = WaitReporter(out, clock=clock)
    waits.start()
    clock.now += 3
    waits("prefill", 512, 2048)
    clock.now += 1
    waits("prefill", 1024, 2048)
    waits.finish()
    assert out.getvalue() == (
        "\r\033[Kember: prefill 512/2048 tokens (25%), 3 s"
        "\r\033[Kember: prefill 1024/2048 tokens (50%), 4 s\n"
    )


def test_waiting_names_a_silent_wait_once_it_passes_the_delay() -> None:
    out = io.StringIO()
    waits = WaitReporter(out, delay_s=0.05)
    with waits.waiting("loading gemma3-270m"):
        deadline = time.monotonic() + 10
        while "loading gemma3-270m..." not in out.getvalue() and time.monotonic() < deadline:
            threading.Event().wait(0.01)  # the ticker thread writes; nothing else to wait on
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("ember: loading gemma3-270m..., ")
    assert lines[-1].startswith("ember: loading gemma3-270m: done in ")
    quick = io.StringIO()
    with WaitReporter(quick).waiting("loading fake"):
        pass
    assert quick.getvalue() == ""
