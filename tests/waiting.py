"""The one poll loop the tests share: wait for a condition, never a fixed sleep.

`wait_until(condition, what, timeout_s)` calls condition() until it returns something true and
returns that; past the timeout it fails the test naming `what`. `gone` (a callable: the process or
thread it waits on has ended) fails at once instead of waiting out the clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T],
    what: str,
    timeout_s: float = 30.0,
    *,
    interval_s: float = 0.02,
    gone: Callable[[], object] | None = None,
) -> T:
    """condition()'s first true value, polled every interval_s; AssertionError after timeout_s
    (or as soon as gone() is true) saying `what` did not happen."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if gone is not None and gone():
            raise AssertionError(f"{what}: ended before it happened")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s:g}s")
        time.sleep(interval_s)
