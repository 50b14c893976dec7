"""ThreadGovernor: keeps a runner's thread count at what the machine offers now.

With threads=0 (auto) it measures at load (cpu_offer.measure) and again at most every
RECHECK_S while the runner works (tick() is called once a forward), and hands a changed count
to the runner (llama.cpp: llama_set_n_threads; torch: torch.set_num_threads). A count the user
gave is kept as given. Its `reason` is the line `ember doctor` and the logs show.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from ember.engine.runners.cpu_offer import RECHECK_S, CpuTimes, check_threads, measure

log = logging.getLogger(__name__)


def auto_threads() -> tuple[int, str]:
    """The thread count auto picks now, and why (one line)."""
    offer, _ = measure()
    return offer.free, f"auto: {offer.free} = cores free now ({offer.describe()})"


class ThreadGovernor:
    def __init__(self, requested: int, apply: Callable[[int], None] | None = None) -> None:
        check_threads(requested)
        self.requested = requested
        self._apply = apply
        self._snapshot: CpuTimes | None = None
        if requested:
            self.threads, self.reason = requested, f"threads={requested} as set"
        else:
            offer, self._snapshot = measure()
            self.threads = offer.free
            self.reason = f"auto: {offer.free} = cores free now ({offer.describe()})"
        self._next_check = time.monotonic() + RECHECK_S
        self.changes = 0  # how often auto changed the count (tests, logs)

    def attach(self, apply: Callable[[int], None]) -> None:
        """Set where counts go (and send the current one there)."""
        self._apply = apply
        apply(self.threads)

    def tick(self) -> None:
        """Look again when due (auto only): a few file reads, no sleep."""
        if self.requested or time.monotonic() < self._next_check:
            return
        offer, self._snapshot = measure(since=self._snapshot)
        self._next_check = time.monotonic() + RECHECK_S
        if offer.free != self.threads:
            log.debug("threads %d -> %d (%s)", self.threads, offer.free, offer.describe())
            self.threads, self.changes = offer.free, self.changes + 1
            self.reason = f"auto: {offer.free} = cores free now ({offer.describe()})"
            if self._apply is not None:
                self._apply(self.threads)
