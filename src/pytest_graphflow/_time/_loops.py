"""One virtual event loop per thread for the sync API, instead of a new loop per call.

``GraphRuntime.invoke`` (and the other sync methods) under a :class:`VirtualClock` on the
asyncio backend run on a :class:`VirtualEventLoop` kept for the calling thread and pointed at
the call's clock; starting a loop per call cost more than a small run. Each call runs its
coroutine as one task in a copy of the caller's context, like ``asyncio.run``; when it
returns, tasks it left behind are cancelled and awaited, and unfinished async generators are
closed, so nothing of one call runs during the next.

The loop is closed deterministically: when its thread ends (the thread's storage is
released), at interpreter exit (``weakref.finalize`` runs at exit), by :func:`close_loop`,
or at once when a call is interrupted (``KeyboardInterrupt``). Closing cancels what is left,
shuts down async generators and the default executor, then closes the selector and its
wake-up pipe: no ``ResourceWarning``.
"""

from __future__ import annotations

import asyncio
import contextvars
import sys
import threading
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ._clock import VirtualClock
from ._vloop import LOOP_OWNED, VirtualEventLoop, backend_options

__all__ = ["close_loop", "in_running_loop", "run_owned", "run_sync_owned"]

T = TypeVar("T")


class _Holder:
    """Owns a thread's loop; when the holder goes, a finalizer closes the loop."""

    def __init__(self, loop: VirtualEventLoop) -> None:
        self.loop = loop
        self.finalizer = weakref.finalize(self, _close, loop)


_local = threading.local()


def _registries() -> tuple[Any, ...] | None:
    """asyncio's own sets of every task of the process (3.11: ``_all_tasks``; 3.12 and
    3.13: ``_scheduled_tasks`` and ``_eager_tasks``), or ``None`` where they are not known."""
    names = ("_all_tasks",) if sys.version_info < (3, 12) else (
        ("_scheduled_tasks", "_eager_tasks") if sys.version_info < (3, 14) else ())
    found = tuple(getattr(asyncio.tasks, n, None) for n in names)
    return found if found and all(hasattr(r, "__len__") for r in found) else None


_REGISTRIES = _registries()
_SIZES: Any = None
"""The one set whose size is the number of the process's tasks (3.11's ``_all_tasks``, a
WeakSet's own set: never smaller than the WeakSet), or ``None`` where there is not one."""
if _REGISTRIES is not None and len(_REGISTRIES) == 1 \
        and isinstance(getattr(_REGISTRIES[0], "data", None), set):
    _SIZES = _REGISTRIES[0].data


def _cancel_leftovers(loop: asyncio.AbstractEventLoop, own: asyncio.Task[Any] | None = None
                      ) -> None:
    """Cancel and await the tasks left on ``loop``. With ``own``, the call's (done) task: when
    it is the only task the process has, there is nothing to look for (``all_tasks`` walks
    every task of every loop, a few microseconds a call)."""
    if own is not None and _REGISTRIES is not None and sum(map(len, _REGISTRIES)) <= 1:
        return
    left = [t for t in asyncio.all_tasks(loop) if not t.done()]
    if not left:
        return
    for task in left:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))


def _close(loop: VirtualEventLoop) -> None:
    if loop.is_closed() or loop.is_running():
        return
    if asyncio._get_running_loop() is not None:
        # Collected (by the garbage collector, or its thread's storage released) while this
        # thread runs another loop, which refuses run_until_complete here: shut it down on a
        # thread of its own (the loop is not running, so any thread may drive it).
        closer = threading.Thread(target=_close, args=(loop,), name="graphflow-loop-close")
        closer.start()
        closer.join()
        return
    try:
        _cancel_leftovers(loop)
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        loop.close()


def close_loop() -> None:
    """Close the calling thread's loop now, if it has one (the next call makes a new one)."""
    holder: _Holder | None = getattr(_local, "holder", None)
    if holder is not None:
        _local.holder = None
        holder.finalizer()


def _thread_loop(clock: VirtualClock) -> VirtualEventLoop:
    holder: _Holder | None = getattr(_local, "holder", None)
    if holder is None or holder.loop._closed:  # type: ignore[attr-defined]
        holder = _local.holder = _Holder(VirtualEventLoop(clock))
    loop = holder.loop
    loop._vclock = clock
    return loop


async def _called(fn: Callable[[], Awaitable[T]]) -> T:
    return await fn()  # called inside the task, as asyncio.run calls its coroutine


def run_owned(clock: VirtualClock, fn: Callable[[], Awaitable[T]], *,
              owned: bool = False, outside: bool = False, coroutine: bool = False) -> T:
    """Run ``fn()`` to its end on the calling thread's virtual loop, reading ``clock``;
    ``owned``: the loop is the runtime's own (:data:`LOOP_OWNED` is set in the call's task);
    ``outside``: the caller made sure no loop runs on this thread; ``coroutine``: ``fn`` is
    an ``async def`` (or a partial of one): calling it runs no code.

    Raises:
        RuntimeError: when called from a running event loop (as ``asyncio.run`` does).
    """
    if not outside and asyncio._get_running_loop() is not None:
        raise RuntimeError("the sync API cannot be called from a running event loop; "
                           "await the async method (ainvoke, aresume, atrace) instead")
    try:  # (no getattr() call: the thread has its holder but the first time)
        holder: _Holder | None = _local.holder
    except AttributeError:
        holder = None
    if holder is None or holder.loop._closed:  # type: ignore[attr-defined]
        loop = _thread_loop(clock)
    else:  # _thread_loop(), inline (every call)
        loop = holder.loop
        loop._vclock = clock
    # ``coroutine``: fn() only makes the coroutine (an ``async def``'s call), so it may be
    # made here; else it is called inside the task, as asyncio.run calls its coroutine.
    coro: Any = fn() if coroutine else _called(fn)
    # The call's task runs in a copy of the caller's context, as asyncio.run's does.
    context = contextvars.copy_context()
    if owned:
        context.run(LOOP_OWNED.set, clock)
    me: Any = loop
    task = asyncio.Task(coro, loop=loop, context=context) if me._task_factory is None \
        else loop.create_task(coro, context=context)
    try:
        result: T = task.result() if _first_step(loop, task) else loop.run_task(task)
    except BaseException:
        try:
            if not task.done():  # interrupted (KeyboardInterrupt): give the loop up
                close_loop()
        except (KeyboardInterrupt, SystemExit):
            pass  # the same interruption, out of the tasks again as the loop cancels them
        finally:
            if task.done() and not task.cancelled():
                # The call's task ended with what the caller gets raised: asyncio must not
                # also report it as "never retrieved" when the task goes.
                task.exception()
        raise
    finally:
        if not me._closed:
            if _SIZES is None or len(_SIZES) > 1:  # tasks other than the call's may be left
                _cancel_leftovers(loop, task)
            if me._asyncgens.data:  # async generators, perhaps left unfinished
                _close_asyncgens(loop)
    return result


def _first_step(loop: Any, task: asyncio.Task[Any]) -> bool:
    """Take the call's first step now, as the loop's first turn would, without polling for
    I/O or turning the loop: the loop is this thread's running loop meanwhile (the task is
    current, ``asyncio.get_running_loop()``, sniffio and anyio see it, async generators are
    tracked). Returns whether the call is over with nothing left to run: a leg of sync
    nodes on the in-memory store never waits, so it needs no turn at all. Otherwise the
    loop takes over where the step stopped (:meth:`VirtualEventLoop.run_task`)."""
    ready = loop._ready
    if len(ready) != 1 or loop._debug or loop._stopping:
        return False  # only the call's own step is due: anything else, the loop's way
    hooks = sys.get_asyncgen_hooks()
    # (positional: keywords to a C function build a dict both ways)
    sys.set_asyncgen_hooks(loop._asyncgen_firstiter_hook, loop._asyncgen_finalizer_hook)
    loop._thread_id = threading.get_ident()  # is_running()
    asyncio.events._set_running_loop(loop)
    try:
        step = ready.popleft()
        # Handle._run without its frame: a task's step raises only what _run lets through
        # (SystemExit, KeyboardInterrupt), the rest ends in the task.
        step._context.run(step._callback, *step._args)
    finally:
        asyncio.events._set_running_loop(None)
        loop._thread_id = None
        sys.set_asyncgen_hooks(*hooks)
    if not task.done() or ready:
        return False
    timers = loop._scheduled
    return not (timers and timers[0]._when <= loop.time())


def _close_asyncgens(loop: asyncio.AbstractEventLoop) -> None:
    """Close the async generators a call left unfinished (what ``shutdown_asyncgens`` does,
    without marking the loop as shut down: later calls may start new ones)."""
    gens: Any = getattr(loop, "_asyncgens", None)
    if not gens:
        return
    left = list(gens)
    gens.clear()

    async def close_all() -> None:
        # gather() inside the loop: outside it, gather would look for (or make) another
        # loop to bind its futures to.
        await asyncio.gather(*[g.aclose() for g in left], return_exceptions=True)

    loop.run_until_complete(close_all())


def in_running_loop() -> bool:
    """Whether this thread runs an event loop already (an async test, say)."""
    if asyncio._get_running_loop() is not None:
        return True
    if "trio" not in sys.modules and "curio" not in sys.modules:
        return False  # nothing else could be running here
    import sniffio

    if sniffio.thread_local.name is not None \
            or sniffio.current_async_library_cvar.get() is not None:
        return True  # (what sniffio reads first: trio sets the thread's)
    if "curio" not in sys.modules:
        return False  # (sniffio's last look: asyncio's running loop is none, checked above)
    try:
        sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return False
    return True


def run_sync_owned(fn: Callable[[], Awaitable[T]], clock: Any, backend: str = "asyncio",
                   *, what: str = "this synchronous call",
                   instead: str = "its async twin", coroutine: bool = False) -> T:
    """Run ``fn()`` to its end on a loop owned by ``clock``, as the sync API does.

    Under a :class:`VirtualClock` the loop reads the virtual clock (timers, cancel scopes and
    ``anyio.current_time()`` are virtual) and is marked as the runtime's own, so a batch that
    can never wake fails with ``VirtualDeadlock`` instead of hanging; on asyncio it is the
    thread's virtual loop (:func:`run_owned`). Under any other clock it is a plain
    ``anyio.run``. ``GraphRuntime``'s sync API and every whole-run testing tool
    (``explore``, the checkers, ``record_run_sync``) run through this one function.
    ``coroutine``: ``fn`` is an ``async def`` (or a partial of one), see :func:`run_owned`.

    Raises:
        SyncCallInEventLoop: when called inside a running event loop; ``what`` and
            ``instead`` name the call and the one to await.
    """
    if asyncio._get_running_loop() is not None or (
            ("trio" in sys.modules or "curio" in sys.modules) and in_running_loop()):
        from ..errors import SyncCallInEventLoop

        raise SyncCallInEventLoop(
            f"{what} starts an event loop of its own, but it was called inside a running "
            f"event loop (an async test?): use {instead}")
    if type(clock) is not VirtualClock and not isinstance(clock, VirtualClock):
        import anyio

        return anyio.run(fn, backend=backend)
    vclock = clock
    if backend == "asyncio":  # the thread's virtual loop, reused
        return run_owned(vclock, fn, owned=True, outside=True, coroutine=coroutine)

    async def owned() -> T:
        token = LOOP_OWNED.set(vclock)
        try:
            return await fn()
        finally:
            LOOP_OWNED.reset(token)

    import anyio

    return anyio.run(owned, backend=backend, backend_options=backend_options(backend, vclock))
