"""`ember pull` as an iterator of events, for the TUI's downloads view.

The pull runs on a worker thread; the caller iterates DownloadProgress events and notes (str)
as they happen, then gets the PullResult as the last item. A failure is raised from the iterator
(DownloadError, DownloadCancelled after `cancel.set()`), with the .part kept for a resume.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any, TypeAlias

from ember.models.hub.download import DownloadProgress
from ember.models.hub.pull import Puller, PullResult
from ember.models.registry.registry import Registry

PullEvent: TypeAlias = DownloadProgress | str | PullResult


def pull_events(
    ref: str, registry: Registry, cancel: threading.Event | None = None, **puller_options: Any
) -> Iterator[PullEvent]:
    """Pull ref on a thread; yield progress and notes, then the result (errors are raised)."""
    events: queue.Queue[PullEvent | BaseException | None] = queue.Queue()
    puller = Puller(
        registry, on_progress=events.put, on_note=events.put, cancel=cancel, **puller_options
    )
    puller.downloader.on_wait = lambda f: events.put(
        f"{f.name}: another pull is downloading it; waiting"
    )

    def work() -> None:
        try:
            events.put(puller.pull(ref))
        except BaseException as exc:  # handed to the iterating thread
            events.put(exc)
        finally:
            events.put(None)

    thread = threading.Thread(target=work, name=f"pull {ref}", daemon=True)
    thread.start()
    try:
        while (item := events.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        if thread.is_alive() and cancel is not None:
            cancel.set()  # the consumer stopped early: stop the transfer too
        thread.join()
