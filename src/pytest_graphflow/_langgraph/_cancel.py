"""``cancel_at=`` in a harness leg: cancel the leg right after the event that matches.

The harness logs LangGraph's events as they happen (a step's tasks start, each reports its
result when it finishes, a checkpoint is logged when the saver's ``put`` returned), so the
cancel lands inside the step: it cuts the leg's ``asyncio.timeout`` at the current virtual
instant, as ``cancel_after=`` does at its instant. No virtual time passes and no waiting task
starts or wakes first (the loop opens a gate or moves the clock only when nothing is ready);
the tasks still running get the ``CancelledError`` event ``cancel_after`` gives them, the
finished ones keep their saved writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["CancelAt"]


class CancelAt:
    """Watches a leg's events (the recorder calls it with each) and cuts ``cut`` at the
    first one ``test`` matches.

    Args:
        test: the matcher's test (``check_cancel_at``).
        loop: the leg's loop (the cut is rescheduled on its thread).
        cut: the leg's ``asyncio.timeout``; :meth:`arm` once it is entered.
    """

    def __init__(self, test: Callable[[Any], bool], loop: asyncio.AbstractEventLoop,
                 cut: asyncio.Timeout) -> None:
        self.test = test
        self.loop = loop
        self.cut = cut
        self.hit = False
        """Whether an event matched (the leg is, or will be, cancelled)."""
        self._armed = False
        self._thread = threading.get_ident()

    def __call__(self, event: Any) -> None:
        if self.hit or not self.test(event):
            return
        self.hit = True
        if self._armed:
            if threading.get_ident() == self._thread:
                self._cut_now()
            else:  # a sync node's worker thread, a saver's
                self.loop.call_soon_threadsafe(self._cut_now)

    def arm(self) -> None:
        """The cut is entered: cancel from now on (at once if an event matched before, such
        as ``run_start``)."""
        self._armed = True
        if self.hit:
            self._cut_now()

    def _cut_now(self) -> None:
        if self.cut.expired():
            return
        # RuntimeError: the leg's stream already ended, nothing is left to cancel
        with contextlib.suppress(RuntimeError):
            self.cut.reschedule(self.loop.time())
