"""Event loops whose clock is the virtual clock, for runs where the runtime owns the loop.

The sync API (``invoke``, ``trace``, ...) starts its own event loop. Under a
:class:`VirtualClock` that loop reads time from the virtual clock, so in node code
``anyio.current_time()``, ``fail_after``/``move_on_after`` and the loop's own timers are
virtual too. The batch scheduler stays the only thing that moves time: when every task of a
batch waits, it jumps to the earliest of its sleepers' wake-ups *and the loop's next
deadline* (a cancel scope's deadline), so a ``move_on_after(10)`` around ``sleep(3600)`` ends
at virtual 10 s.

When a node waits on real work (a thread, real I/O) the loop waits in real time for it: the
waiting task holds the scheduler's baton, so virtual time cannot move meanwhile.
"""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from typing import Any

from ._clock import VirtualClock

__all__ = ["LOOP_OWNED", "backend_options", "loop_deadline_ns"]

LOOP_OWNED: ContextVar[VirtualClock | None] = ContextVar("graphflow_loop_owned", default=None)
"""Set while a run executes on a loop the runtime started with the virtual clock."""

_BASE = 1_000_000.0  # loop time of virtual instant 0 (any positive base works)


class VirtualEventLoop(asyncio.SelectorEventLoop):
    """An asyncio loop whose ``time()`` is the virtual clock."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__()
        self._vclock = clock

    def time(self) -> float:
        """Virtual monotonic time."""
        return _BASE + self._vclock.elapsed_ns / 1e9


def _trio_clock(clock: VirtualClock) -> Any:
    import trio

    class TrioVirtualClock(trio.abc.Clock):
        """A trio clock reading the virtual clock; idle waits take real time."""

        def start_clock(self) -> None:
            """Nothing to start: virtual time is kept by the VirtualClock."""

        def current_time(self) -> float:
            """Virtual monotonic time."""
            return _BASE + clock.elapsed_ns / 1e9

        def deadline_to_sleep_time(self, deadline: float) -> float:
            """Real seconds to wait for ``deadline`` while idle."""
            return max(0.0, deadline - self.current_time())

    return TrioVirtualClock()


def backend_options(backend: str, clock: VirtualClock) -> dict[str, Any]:
    """anyio ``backend_options`` giving a loop on the virtual clock."""
    if backend == "asyncio":
        def factory() -> asyncio.AbstractEventLoop:
            return VirtualEventLoop(clock)

        return {"loop_factory": factory}
    if backend == "trio":
        return {"clock": _trio_clock(clock)}
    return {}


def loop_deadline_ns(clock: VirtualClock) -> int | None:
    """The virtual instant (ns) of the owned loop's next deadline, or ``None``.

    Only meaningful in a task running on a loop from :func:`backend_options`.
    """
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is not None:
        if not isinstance(loop, VirtualEventLoop):
            return None
        scheduled: list[asyncio.TimerHandle] = loop._scheduled  # type: ignore[attr-defined]
        pending = [h.when() for h in scheduled if not h.cancelled()]
        if not pending:
            return None
        return round((min(pending) - _BASE) * 1e9)
    try:
        import trio
    except ImportError:  # pragma: no cover
        return None
    stats = trio.lowlevel.current_statistics()
    wait: float = stats.seconds_to_next_deadline
    if wait == float("inf"):
        return None
    return clock.elapsed_ns + max(0, round(wait * 1e9))
