"""Event loops whose clock is the virtual clock, for runs where the runtime owns the loop.

The sync API (``invoke``, ``trace``, ...) starts its own event loop. Under a
:class:`VirtualClock` that loop reads time from the virtual clock, so in node code
``anyio.current_time()``, ``fail_after``/``move_on_after`` and the loop's own timers are
virtual too.

The batch scheduler moves time when every task of a batch waits in an intercepted sleep: it
jumps to the earliest of its sleepers' wake-ups *and the loop's next deadline* (a cancel
scope's deadline), so a ``move_on_after(10)`` around ``sleep(3600)`` ends at virtual 10 s.
The loop itself moves time only when it is idle with a timer pending that the scheduler does
not know (a sleep imported before pytest-graphflow patched it, a store or an edge function
that sleeps, child tasks inside one node): it jumps to that timer — unless real work it
started is in flight (a worker thread or an executor job), in which case it waits for it in
real time, so virtual time never jumps under a running thread.

That work is counted *per loop*, by the thread the loop runs on (a thread runs at most one
loop at a time): a worker thread another loop started — say the test's own loop awaiting
``LangGraphHarness.atrace``, whose leg runs a loop of its own on that very worker thread —
never holds this loop's clock still. The batches a stalled loop fails are kept per loop too.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
import threading
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from ._clock import VirtualClock

__all__ = [
    "LOOP_OWNED",
    "backend_options",
    "busy",
    "install_thread_guards",
    "install_trio_thread_guards",
    "loop_clock",
    "loop_deadline_ns",
    "stall_handlers",
    "virtual_anyio_backend",
]

LOOP_OWNED: ContextVar[VirtualClock | None] = ContextVar("graphflow_loop_owned", default=None)
"""Set while a run executes on a loop the runtime started with the virtual clock."""

_BASE = 1_000_000.0  # loop time of virtual instant 0 (any positive base works)
_POLL = 0.002  # real seconds an idle loop waits while a worker thread runs

_GRACE = 0.2  # real seconds an owned loop waits for a stray wake-up before calling deadlock

_busy: dict[int, int] = {}
"""Worker threads in flight, by the thread of the loop that started them (one loop a thread)."""

_stall_handlers: dict[int, list[Callable[[], bool]]] = {}
"""Batches running on an owned loop, by the loop's thread; each returns whether it had tasks
to fail."""


def stall_handlers() -> list[Callable[[], bool]]:
    """The stall handlers of the loop running on this thread (append a batch's, remove it when
    the batch ends)."""
    return _stall_handlers.setdefault(threading.get_ident(), [])


def _stalled() -> bool:
    """The owned loop can never wake again: fail its waiting batches (``VirtualDeadlock``)."""
    acted = False
    for handler in list(_stall_handlers.get(threading.get_ident(), ())):
        acted = handler() or acted
    return acted


def busy() -> bool:
    """Whether real work (a worker thread) started by the loop of this thread is in flight."""
    return threading.get_ident() in _busy


def _start_work() -> int:
    me = threading.get_ident()
    _busy[me] = _busy.get(me, 0) + 1
    return me


def _end_work(me: int) -> None:
    left = _busy[me] - 1
    if left:
        _busy[me] = left
    else:
        del _busy[me]


def install_thread_guards() -> None:
    """Count worker threads started through anyio (idempotent)."""
    import anyio.to_thread

    if getattr(anyio.to_thread.run_sync, "__graphflow__", False):
        return

    original = anyio.to_thread.run_sync

    async def run_sync(func: Any, *args: Any, **kwargs: Any) -> Any:
        me = _start_work()
        try:
            return await original(func, *args, **kwargs)
        finally:
            _end_work(me)

    run_sync.__graphflow__ = True  # type: ignore[attr-defined]
    run_sync.__wrapped__ = original  # type: ignore[attr-defined]
    anyio.to_thread.run_sync = run_sync  # type: ignore[assignment]


def install_trio_thread_guards() -> None:
    """Count worker threads started through ``trio.to_thread`` (idempotent; trio must be
    imported already)."""
    import trio

    trio_original = trio.to_thread.run_sync
    if getattr(trio_original, "__graphflow__", False):
        return

    async def trio_run_sync(sync_fn: Any, *args: Any, **kwargs: Any) -> Any:
        me = _start_work()
        try:
            return await trio_original(sync_fn, *args, **kwargs)
        finally:
            _end_work(me)

    trio_run_sync.__graphflow__ = True  # type: ignore[attr-defined]
    trio_run_sync.__wrapped__ = trio_original  # type: ignore[attr-defined]
    trio.to_thread.run_sync = trio_run_sync  # type: ignore[assignment]


_PLAIN_HANDLES = set(getattr(asyncio.Handle, "__slots__", ())) == {
    "_callback", "_args", "_cancelled", "_loop", "_source_traceback", "_repr", "__weakref__",
    "_context"}
"""Whether ``asyncio.Handle`` has the fields :meth:`VirtualEventLoop.call_soon` sets (the
Pythons this package supports); otherwise the loop takes the base's way."""
_new_handle = object.__new__


class VirtualEventLoop(asyncio.SelectorEventLoop):
    """An asyncio loop whose ``time()`` is the virtual clock (``_vclock``; the sync API
    reuses one loop per thread and points it at the clock of each call)."""

    def __init__(self, clock: VirtualClock) -> None:
        super().__init__()
        self._vclock = clock
        self._jobs = 0
        real_select = self._selector.select  # type: ignore[attr-defined]

        def select(timeout: float | None = None) -> Any:
            ready = real_select(0)
            if ready or timeout == 0:
                return ready
            if self._jobs or busy():
                wait = _POLL if timeout is None else min(timeout, _POLL)
                return real_select(wait)
            if timeout is None:
                # No timer, no thread: only real I/O could wake the loop. With none
                # registered (just the loop's own wake-up pipe), nothing ever will.
                if len(self._selector.get_map()) <= 1:  # type: ignore[attr-defined]
                    ready = real_select(_GRACE)
                    if ready or _stalled():
                        return ready
                return real_select(None)
            self._vclock.advance(timeout)  # idle with a timer pending: jump to it
            return []

        self._selector.select = select  # type: ignore[attr-defined]

    def call_soon(  # type: ignore[override]
            self, callback: Callable[..., object], *args: Any,
            context: contextvars.Context | None = None) -> asyncio.Handle:
        """``call_soon`` of an open loop out of debug mode without the base's checks and
        layers (every task step of a run comes through here): the handle ``Handle.__init__``
        makes, queued as ``_call_soon`` queues it."""
        me: Any = self
        if me._closed or me._debug or not _PLAIN_HANDLES:
            return super().call_soon(callback, *args, context=context)
        handle: Any = _new_handle(asyncio.Handle)
        handle._context = contextvars.copy_context() if context is None else context
        handle._loop = self
        handle._callback = callback
        handle._args = args
        handle._cancelled = False
        handle._repr = None
        handle._source_traceback = None
        me._ready.append(handle)
        return handle  # type: ignore[no-any-return]

    def run_task(self, task: asyncio.Future[Any]) -> Any:
        """``run_until_complete(task)`` without its last round: the loop turns until the task
        is done, instead of scheduling a stop callback and turning once more for it (the
        sync API runs a whole small run in one turn)."""
        me: Any = self
        setup = getattr(me, "_run_forever_setup", None)
        if setup is not None:  # Python 3.12+
            setup()
            try:
                while not task.done() and not me._stopping:
                    me._run_once()
                self._last_round()
            finally:
                me._run_forever_cleanup()
        else:  # Python 3.11: what run_forever does around its turns
            me._check_closed()
            me._check_running()
            me._set_coroutine_origin_tracking(me._debug)
            hooks = sys.get_asyncgen_hooks()
            try:
                me._thread_id = threading.get_ident()
                sys.set_asyncgen_hooks(me._asyncgen_firstiter_hook,
                                       me._asyncgen_finalizer_hook)
                asyncio.events._set_running_loop(self)
                while not task.done() and not me._stopping:
                    me._run_once()
                self._last_round()
            finally:
                me._stopping = False
                me._thread_id = None
                asyncio.events._set_running_loop(None)
                me._set_coroutine_origin_tracking(False)
                sys.set_asyncgen_hooks(*hooks)
        if not task.done():
            raise RuntimeError("Event loop stopped before Future completed.")
        return task.result()

    def _last_round(self) -> None:
        """The round ``run_until_complete`` turns for its stop callback runs what is ready
        then (a task the call started takes its first step before it is cancelled): turn it
        when something is ready or due, never to wait."""
        me: Any = self
        if me._ready or (me._scheduled and me._scheduled[0]._when <= self.time()):
            me._run_once()

    def time(self) -> float:
        """Virtual monotonic time."""
        return _BASE + self._vclock.elapsed_ns / 1e9

    def run_in_executor(  # type: ignore[override]
        self, executor: Any, func: Any, *args: Any
    ) -> asyncio.Future[Any]:
        """Run ``func`` in an executor; virtual time holds still until it is done."""
        future = super().run_in_executor(executor, func, *args)
        self._jobs += 1

        def done(_: Any) -> None:
            self._jobs -= 1

        future.add_done_callback(done)
        return future


def _trio_clock(clock: VirtualClock) -> Any:
    import trio

    class TrioVirtualClock(trio.abc.Clock):
        """A trio clock reading the virtual clock; idle waits jump to the deadline."""

        graphflow_clock = clock
        _idle = 0
        steps = 0  # task steps so far (counted by the instrument below)
        _steps_at_idle = -1

        def start_clock(self) -> None:
            """Nothing to start: virtual time is kept by the VirtualClock."""

        def current_time(self) -> float:
            """Virtual monotonic time."""
            return _BASE + clock.elapsed_ns / 1e9

        def deadline_to_sleep_time(self, deadline: float) -> float:
            """Idle until ``deadline``: jump to it, unless a worker thread runs."""
            wait = deadline - self.current_time()
            if wait <= 0:
                return 0.0
            if busy():
                return min(wait, _POLL)
            if wait != float("inf"):
                clock.advance(wait)
                return 0.0
            io = trio.lowlevel.current_statistics().io_statistics
            waiting = getattr(io, "tasks_waiting_read", 0) + getattr(io, "tasks_waiting_write", 0)
            # trio's own wake-up task always waits on its socket: one reader is no one.
            if waiting <= 1 and _stall_handlers.get(threading.get_ident()):
                # No timer, no thread, no task waiting on I/O: after a short grace for a
                # stray wake-up, fail the waiting batches instead of hanging.
                # Count consecutive idle waits with no task step in between.
                self._idle = self._idle + 1 if self.steps == self._steps_at_idle else 1
                self._steps_at_idle = self.steps
                if self._idle > 1 and _stalled():
                    self._idle = 0
                    return 0.0
                return _GRACE
            return wait

    return TrioVirtualClock()


def _trio_instrument(trio_clock: Any) -> Any:
    import trio

    class StepCounter(trio.abc.Instrument):
        """Counts task steps, so an idle owned loop knows whether anything ran."""

        def before_task_step(self, task: Any) -> None:
            trio_clock.steps += 1

    return StepCounter()


def backend_options(backend: str, clock: VirtualClock) -> dict[str, Any]:
    """anyio ``backend_options`` giving a loop on the virtual clock."""
    if backend == "asyncio":
        def factory() -> asyncio.AbstractEventLoop:
            return VirtualEventLoop(clock)

        return {"loop_factory": factory}
    if backend == "trio":
        trio_clock = _trio_clock(clock)
        return {"clock": trio_clock, "instruments": [_trio_instrument(trio_clock)]}
    return {}


def virtual_anyio_backend(backend: str, clock: VirtualClock) -> tuple[str, dict[str, Any]]:
    """An ``anyio_backend`` value whose loop runs on ``clock`` (for the anyio pytest plugin).

    In a ``conftest.py``::

        @pytest.fixture(params=["asyncio", "trio"])
        def anyio_backend(request, virtual_clock):
            return virtual_anyio_backend(request.param, virtual_clock)

    Runs of a :class:`GraphRuntime` on the same clock then treat the loop as their own:
    ``fail_after``/``move_on_after`` and ``anyio.current_time()`` in node code are virtual.
    """
    if backend not in ("asyncio", "trio"):
        raise ValueError(f"backend={backend!r}: use 'asyncio' or 'trio'")
    return backend, backend_options(backend, clock)


def loop_clock() -> VirtualClock | None:
    """The virtual clock the running loop reads, when the loop is one of ours."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    if loop is not None:
        return loop._vclock if isinstance(loop, VirtualEventLoop) else None
    trio: Any = sys.modules.get("trio")  # not imported: not running on trio
    if trio is None:
        return None
    try:
        current = trio.lowlevel.current_clock()
    except RuntimeError:
        return None
    found = getattr(current, "graphflow_clock", None)
    return found if isinstance(found, VirtualClock) else None


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
    trio: Any = sys.modules.get("trio")
    if trio is None:  # pragma: no cover - an owned loop is asyncio or trio
        return None
    stats = trio.lowlevel.current_statistics()
    wait: float = stats.seconds_to_next_deadline
    if wait == float("inf"):
        return None
    return clock.elapsed_ns + max(0, round(wait * 1e9))
