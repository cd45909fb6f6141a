"""``Worker``: a process that takes queued runs from a shared store and runs them.

Start as many as you like, on as many machines, against one PostgreSQL database
(``graphflow worker DSN MODULE:GRAPH ...`` or ``Worker(store, graphs).serve()``). Each takes
one job at a time (see :mod:`pytest_graphflow._stores.postgres._queue`): a new run, the continuation
of a run whose worker died (after its claim expired), or a resume with a human's answer.

Shutdown is graceful: after :meth:`Worker.stop` (SIGTERM or SIGINT under :meth:`serve`) the
worker takes no new job; the run it is executing finishes its current step, its checkpoint
is saved, the stream is left (which releases the thread's claim) and the job is handed back,
so another worker continues it at once from that checkpoint.

Deadlines: before each job (and while the queue is empty) a worker fires every question
whose ``interrupt(..., deadline=)`` passed by its clock (``GraphRuntime.aexpire_due``), for
the graphs it serves and every tenant. A deadline is stored with the paused run, so a worker
started after a restart fires it. Over a store without a queue (``SQLiteCheckpointStore``,
``InMemoryCheckpointStore``) a worker only fires deadlines.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import anyio

from .._engine._runtime import GraphRuntime
from .._graph._builder import CompiledGraph
from .._graph._node import Resume
from .._records._checkpoint import Checkpoint
from .._stores._claims import store_claim_ttl
from .._stores._features import features_of
from .._time._clock import Clock, RealClock
from ..errors import InvalidArgument, ThreadBusy

__all__ = ["DEFAULT_MAX_ATTEMPTS", "Worker", "WorkerStats"]

log = logging.getLogger("pytest_graphflow.worker")

DEFAULT_MAX_ATTEMPTS = 3
"""How many times a job is taken without its run ending before it fails (``max_attempts``)."""


@dataclass
class WorkerStats:
    """What a worker did.

    Attributes:
        runs: jobs whose run reached an end (completed, interrupted, failed or cancelled).
        started: new runs started.
        continued: incomplete runs continued (a dead worker's, or a resume with answers).
        handed_back: jobs handed back at shutdown (their run stopped after a step).
        busy: jobs skipped because another runtime held the thread.
        errors: attempts that raised (a store error, input the graph refuses, answers that
            do not match, another tenant's thread), logged; the job is tried again after
            its hold, and fails once it used ``max_attempts``.
        gave_up: jobs failed after ``max_attempts`` attempts (their ``error`` says why).
        expired: runs resumed because a question's deadline passed (each took its graph's
            timeout route).
        statuses: final status per thread.
    """

    runs: int = 0
    started: int = 0
    continued: int = 0
    handed_back: int = 0
    busy: int = 0
    errors: int = 0
    gave_up: int = 0
    expired: int = 0
    statuses: dict[str, str] = field(default_factory=dict)


class Worker:
    """Takes queued runs (``store.enqueue(...)``) and runs them to their end.

    A worker takes only the jobs of the graphs it serves, so workers serving different
    graphs share one queue. A job whose attempt raises (its input is refused, its answers
    do not match, it names another tenant's thread, a store error) is tried again once its
    hold (the store's ``claim_ttl``) ends; after ``max_attempts`` attempts that did not end
    its run (including workers that died running it) it fails, with the reason in its
    ``error``, and the workers move on.

    Args:
        store: a store with a run queue (:class:`PostgresCheckpointStore`), or a store that
            lists waiting runs (``waiting()``): then the worker only fires deadlines.
        graphs: the graphs this worker serves (a job names its graph by ``graph_id``).
        name: how the worker shows up in the queue (``host:pid`` by default).
        poll_interval: seconds to wait when the queue is empty.
        clock: the clock of the worker's runtime (real time by default).
        max_attempts: how many times a job is taken without its run ending before it
            fails (:data:`DEFAULT_MAX_ATTEMPTS`); a graceful hand-back is not an attempt.
        deadline_interval: how often, in seconds on the worker's clock, it looks for due
            deadlines (at once when it starts, then at most this often).
        runtime_options: more keyword arguments for :class:`GraphRuntime` (``timeout``...).

    Raises:
        InvalidArgument: the store has neither a queue nor ``waiting()``, two graphs share
            a ``graph_id``, or
            ``max_attempts`` is not an int >= 1.
    """

    def __init__(
        self,
        store: Any,
        graphs: Iterable[CompiledGraph] | Mapping[str, CompiledGraph],
        *,
        name: str | None = None,
        poll_interval: float = 0.2,
        clock: Clock | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        deadline_interval: float = 1.0,
        **runtime_options: Any,
    ) -> None:
        features = features_of(store)
        self.queue = features.queue
        if not self.queue and not features.waiting:
            raise InvalidArgument(f"Worker(store={store!r}): the store has no run queue and "
                                  "cannot list waiting runs; use a PostgresCheckpointStore "
                                  "(or a SQLiteCheckpointStore, to fire deadlines)")
        if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) \
                or max_attempts < 1:
            raise InvalidArgument(f"Worker(max_attempts={max_attempts!r}): give an int >= 1")
        self.max_attempts = max_attempts
        if isinstance(deadline_interval, bool) or not isinstance(deadline_interval, (int, float)) \
                or not deadline_interval >= 0:
            raise InvalidArgument(f"Worker(deadline_interval={deadline_interval!r}): give the "
                                  "seconds between looks for due deadlines (a number >= 0)")
        self.deadline_interval = float(deadline_interval)
        self._next_look: datetime | None = None
        found = list(graphs.values()) if isinstance(graphs, Mapping) else list(graphs)
        self.graphs: dict[str, CompiledGraph] = {}
        for graph in found:
            if not isinstance(graph, CompiledGraph):
                raise InvalidArgument(f"Worker(graphs=...): {graph!r} is not a CompiledGraph "
                                      "(call .compile())")
            if graph.graph_id in self.graphs:
                raise InvalidArgument(f"Worker(graphs=...): two graphs have graph_id "
                                      f"{graph.graph_id!r}")
            self.graphs[graph.graph_id] = graph
        self.store = store
        self.name = name or f"{socket.gethostname()}:{os.getpid()}"
        self.poll_interval = poll_interval
        self.clock: Clock = clock if clock is not None else RealClock()
        runtime_options.setdefault("claim_ttl", store_claim_ttl(store))
        self.runtime = GraphRuntime(store, clock=self.clock, **runtime_options)
        self.stats = WorkerStats()
        self._stopping = False

    def stop(self) -> None:
        """Finish the current step, hand the job back and return from :meth:`run` (safe to
        call from a signal handler)."""
        self._stopping = True

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stopping

    async def run(
        self, *, max_jobs: int | None = None, until_idle: bool = False, until_done: bool = False
    ) -> WorkerStats:
        """Take jobs until stopped; returns the stats.

        Args:
            max_jobs: also stop once this many runs ended.
            until_idle: also stop when no job can be taken right now.
            until_done: also stop when no job of its graphs is queued (every one ended or
                waits for answers); jobs held by other workers or dead workers' claims, and
                jobs waiting to be tried again, are waited for.
        """
        hold = store_claim_ttl(self.store)
        served = sorted(self.graphs)
        while not self._stopping:
            if max_jobs is not None and self.stats.runs >= max_jobs:
                break
            await self._expire_due()
            job = await self.store.take_job(self.name, now=self.clock.now(), hold=hold,
                                            graph_ids=served) if self.queue else None
            if job is None:
                if until_idle or (until_done and not await self._queued()):
                    break
                await anyio.sleep(self.poll_interval)
                continue
            if job["attempts"] > self.max_attempts:  # its workers died or lost it each time
                await self._give_up(job, job["error"] or "each worker that took it stopped "
                                    "or died before its run ended")
                continue
            try:
                await self._work(job)
            except ThreadBusy:
                self.stats.busy += 1  # the holder is alive: its claim keeps the job away
                await self.store.finish_job(job["thread_id"], "queued")  # not an attempt
            except Exception as exc:  # a store error, a caller error: logged, tried again
                await self._failed(job, exc)
        return self.stats

    async def _expire_due(self) -> None:
        """Fire every due deadline of the graphs served (any tenant), at most every
        ``deadline_interval`` seconds; a failure to do so is logged, and tried again at the
        next look."""
        now = self.clock.now()
        if self._next_look is not None and now < self._next_look:
            return
        self._next_look = now + timedelta(seconds=self.deadline_interval)
        try:
            fired = await self.runtime.aexpire_due(graphs=self.graphs, any_tenant=True)
        except Exception as exc:
            self.stats.errors += 1
            log.warning("worker %s: firing deadlines raised %s: %s", self.name,
                        type(exc).__name__, exc)
            return
        for result in fired:
            self.stats.expired += 1
            self.stats.statuses[result.thread_id] = result.status
            if self.queue:  # its job waited for answers: it ended (or waits) now
                await self.store.finish_job(result.thread_id, result.status,
                                            run_id=result.run_id, if_status="interrupted")

    async def _queued(self) -> bool:
        """Whether a job of a graph this worker serves is queued."""
        if not self.queue:
            return False
        return any(j["graph_id"] in self.graphs for j in await self.store.jobs("queued"))

    def serve(self, **kwargs: Any) -> WorkerStats:
        """:meth:`run` on a fresh asyncio loop, with SIGTERM and SIGINT mapped to :meth:`stop`;
        opens the store's async pool on that loop when it has one."""

        async def main() -> WorkerStats:
            import asyncio

            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.stop)
            opener = getattr(self.store, "aopen", None)
            if callable(opener):
                await opener()
            try:
                return await self.run(**kwargs)
            finally:
                closer = getattr(self.store, "aclose", None)
                if callable(closer):
                    with anyio.CancelScope(shield=True):
                        await closer()

        return anyio.run(main)

    # -- one job --

    async def _latest(self, thread_id: str) -> Checkpoint | None:
        found = await self.store.list(thread_id=thread_id)
        return found[-1] if found else None

    async def _work(self, job: dict[str, Any]) -> None:
        thread = job["thread_id"]
        graph = self.graphs[job["graph_id"]]  # take_job gives only the graphs it serves
        latest = await self._latest(thread)
        options: dict[str, Any] = {}
        if job["tenant_id"] is not None:
            options["tenant_id"] = job["tenant_id"]
        if latest is None or latest.id == job["base_checkpoint"]:
            stream = self.runtime.stream(graph, job["input"], thread_id=thread, **options)
            self.stats.started += 1
        elif latest.status == "completed":
            await self._ended(thread, "completed", latest.run_id)
            return
        elif latest.status == "interrupted":
            resume = job["resume"]
            if resume is None or latest.id != job["resume_base"]:
                await self._ended(thread, "interrupted", latest.run_id)  # waits for answers
                return
            answer = (Resume(answers=resume["answers"]) if "answers" in resume
                      else Resume(resume["value"]))
            stream = self.runtime.resume_stream(latest.run_id, answer, graph=graph, **options)
            self.stats.continued += 1
        elif latest.status in ("failed", "cancelled") and not (
                job["resume"] == {"recover": True} and latest.id == job["resume_base"]):
            await self._ended(thread, latest.status, latest.run_id)  # not retried unasked
            return
        else:  # running (its worker died or stopped), or failed/cancelled with recover=True
            stream = self.runtime.resume_stream(latest.run_id, graph=graph, **options)
            self.stats.continued += 1
        status, run_id = await self._drive(stream)
        if status is None:
            self.stats.handed_back += 1
            await self.store.finish_job(thread, "queued", run_id=run_id)
        else:
            await self._ended(thread, status, run_id)

    async def _drive(self, stream: Any) -> tuple[str | None, str | None]:
        """Run the stream to its end, or to the end of a step once the worker is stopping.

        Returns the run's final status (``None`` when stopped early) and its run id.
        """
        status: str | None = None
        run_id: str | None = None
        async with stream as events:
            async for event in events:
                run_id = event.run_id
                if event.type == "run_end":
                    status = event.status
                elif self._stopping and event.type == "checkpoint_saved":
                    break  # the step is saved; leaving the stream releases the claim
        return status, run_id

    async def _ended(self, thread: str, status: str, run_id: str | None) -> None:
        await self.store.finish_job(thread, status, run_id=run_id)
        self.stats.runs += 1
        self.stats.statuses[thread] = status

    async def _failed(self, job: dict[str, Any], exc: BaseException) -> None:
        """An attempt raised: note why; fail the job if it was the last attempt."""
        self.stats.errors += 1
        reason = f"{type(exc).__name__}: {exc}"
        log.warning("worker %s: job on thread %s raised %s (attempt %d of %d)", self.name,
                    job["thread_id"], reason, job["attempts"], self.max_attempts)
        if job["attempts"] >= self.max_attempts:
            await self._give_up(job, reason)
        else:
            await self.store.note_error(job["thread_id"], reason)

    async def _give_up(self, job: dict[str, Any], reason: str) -> None:
        attempts = min(job["attempts"], self.max_attempts)
        error = f"gave up after {attempts} attempt(s): {reason}"
        log.warning("worker %s: job on thread %s failed: %s", self.name, job["thread_id"],
                    error)
        await self.store.finish_job(job["thread_id"], "failed", error=error)
        self.stats.gave_up += 1
        self.stats.statuses[job["thread_id"]] = "failed"
