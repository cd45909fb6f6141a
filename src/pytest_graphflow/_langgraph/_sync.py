"""Sync node functions under the harness: concurrent in virtual time, one thread at a time.

LangGraph's async runner hands a sync node function to ``loop.run_in_executor``, a thread
pool: two sync nodes of one step that each block for 3 s take 3 s together. Under the
harness each such call runs on a worker thread of the leg's loop, but **only one thread runs
Python at any moment**: the loop hands the baton to the worker and waits until the worker
gives it back, either finished or parked in ``time.sleep(d)``. A parked worker is a virtual
timer of the loop: once virtual time reaches its wake-up, it waits at the seeded gate like
an async node after ``asyncio.sleep`` and then gets the baton again. So blocking sleeps of
parallel sync nodes overlap in virtual time (two 3 s branches take 3 virtual seconds), their
order is still the seed's, and a node that never sleeps runs to its end inside the
``run_in_executor`` call, as before (the same order, the same bytes).

A worker whose caller was cancelled while it sleeps (a sibling failed, a timeout, the leg
ended) is stopped at its sleep: ``time.sleep`` raises :class:`asyncio.CancelledError` in the
node, whose result nobody reads. (A pool thread in production would run on.)
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["SyncWorkers", "park"]

_LOCAL = threading.local()
"""``job``: the :class:`_Job` the current worker thread runs (absent on other threads)."""


class _Job:
    """One ``run_in_executor`` call and the baton between the loop and its worker."""

    __slots__ = ("abandon", "args", "back", "func", "go", "outcome", "sleep")

    def __init__(self, func: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.func = func
        self.args = args
        # Two locks used as binary semaphores (cheaper than events): each hand-over is one
        # release by the side that stops and one acquire by the side that goes on.
        self.go = threading.Lock()
        """Released by the loop: the worker may go on after a sleep."""
        self.back = threading.Lock()
        """Released by the worker: it finished or parked; the loop runs again."""
        self.go.acquire()
        self.back.acquire()
        self.sleep: float | None = None
        self.outcome: tuple[bool, Any] | None = None
        self.abandon = False


def park(seconds: float) -> bool:
    """``time.sleep(seconds)`` on a harness worker thread: give the baton back to the loop
    until virtual time reaches the wake-up (and the seed picks this task).

    Returns:
        ``False`` on any other thread (the caller sleeps another way).

    Raises:
        asyncio.CancelledError: the node's caller was cancelled while it slept.
    """
    job: _Job | None = getattr(_LOCAL, "job", None)
    if job is None:
        return False
    if job.abandon:
        raise asyncio.CancelledError
    job.sleep = seconds
    job.back.release()
    job.go.acquire()
    job.sleep = None
    if job.abandon:
        raise asyncio.CancelledError
    return True


class SyncWorkers:
    """The sync function calls of one leg's loop, on worker threads of a process-wide pool.

    Args:
        loop: the leg's loop.
        gate: the loop's seeded gate (``gate(key)``), waited at after every sleep.
        sleep: the loop's (virtual, unpatched) ``asyncio.sleep``.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop,
                 gate: Callable[[str], Awaitable[bool]],
                 sleep: Callable[[float], Awaitable[None]]) -> None:
        self._loop = loop
        self._gate = gate
        self._sleep = sleep
        self._parked: dict[_Job, queue.SimpleQueue[_Job | None]] = {}

    def submit(self, key: str, func: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """Run ``func(*args)`` on a worker until it finishes or first sleeps; a sleeping
        one goes on in a task of the loop. ``key`` orders it at the seeded gate."""
        future: asyncio.Future[Any] = self._loop.create_future()
        job = _Job(func, args)
        inbox = _take()
        inbox.put(job)
        job.back.acquire()
        if job.outcome is not None:
            _give_back(inbox)
            _settle(future, job.outcome)
            return future
        self._parked[job] = inbox
        driver = self._loop.create_task(self._drive(key, job, inbox, future))
        future.add_done_callback(lambda f: driver.cancel() if f.cancelled() else None)
        return future

    def close(self) -> None:
        """Stop the workers still parked at their sleep (their threads go back to the
        pool)."""
        for job in list(self._parked):
            self._abandon(job)

    async def _drive(self, key: str, job: _Job, inbox: queue.SimpleQueue[_Job | None],
                     future: asyncio.Future[Any]) -> None:
        try:
            while job.outcome is None:
                await self._sleep(job.sleep or 0.0)
                await self._gate(key)
                self._hand(job)
        except asyncio.CancelledError:
            self._abandon(job)
            raise
        del self._parked[job]
        _give_back(inbox)
        if not future.done():
            _settle(future, job.outcome)

    def _hand(self, job: _Job) -> None:
        job.go.release()
        job.back.acquire()

    def _abandon(self, job: _Job) -> None:
        inbox = self._parked.pop(job, None)
        if inbox is None or job.outcome is not None:
            return
        job.abandon = True
        while job.outcome is None:  # it may catch the cancel and sleep again
            self._hand(job)
        _give_back(inbox)

_POOL: list[queue.SimpleQueue[_Job | None]] = []
"""Idle worker threads (their inboxes), shared by every leg of the process: a leg starts no
thread once the pool has enough, and a finished job's thread waits here for the next."""
_POOL_LOCK = threading.Lock()
_POOL_MAX = 16  # idle threads kept; more are ended


def _forget_pool() -> None:
    """In a forked child the pool's threads do not exist: start afresh."""
    _POOL.clear()


os.register_at_fork(after_in_child=_forget_pool)


def _take() -> queue.SimpleQueue[_Job | None]:
    with _POOL_LOCK:
        if _POOL:
            return _POOL.pop()
    inbox: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
    threading.Thread(target=_serve, args=(inbox,), daemon=True,
                     name="graphflow-langgraph-sync").start()
    return inbox


def _give_back(inbox: queue.SimpleQueue[_Job | None]) -> None:
    with _POOL_LOCK:
        if len(_POOL) < _POOL_MAX:
            _POOL.append(inbox)
            return
    inbox.put(None)


def _serve(inbox: queue.SimpleQueue[_Job | None]) -> None:
    """A worker thread: run each job it is handed, one at a time, until told to stop."""
    while True:
        job = inbox.get()
        if job is None:
            return
        _LOCAL.job = job
        try:
            job.outcome = (True, job.func(*job.args))
        except BaseException as exc:  # handed to the loop, which raises it in the caller
            job.outcome = (False, exc)
        finally:
            _LOCAL.job = None
        job.back.release()


def _settle(future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    ok, value = outcome
    if ok:
        future.set_result(value)
    elif isinstance(value, (KeyboardInterrupt, SystemExit)):
        raise value
    else:
        future.set_exception(value)
