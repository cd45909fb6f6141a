"""A queue of runs in the PostgreSQL store, for workers on many machines.

A job is a thread with something to do: start a run of ``graph_id`` on ``input``, continue
the thread's incomplete run, or resume its interrupted run with answers. Workers take jobs
with ``SELECT ... FOR UPDATE SKIP LOCKED`` (two workers never take one job at once), skipping
jobs whose thread is held by a live claim, and hold a job for a short while (``hold``) until
their run claims the thread: from then on the thread's claim, renewed while the run is live
and expiring when its worker dies, is what keeps every other worker away.

Whether a job's run has started is read from the thread's checkpoints, never from the job
row, so a worker that dies anywhere leaves a job the next worker continues correctly:
``base_checkpoint`` is the thread's latest checkpoint when the job was queued; a later one
means the run exists.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta
from typing import Any

from ..._records._checks import check_id, check_optional_id
from ..._records._json import NotJSONError, to_json_value
from ...errors import InvalidArgument
from .. import _claims as rules
from ._conn import Cursor

__all__ = ["JOB_STATUSES", "QUEUE_SCHEMA", "PgQueue"]

JOB_STATUSES = ("queued", "completed", "interrupted", "failed", "cancelled")
"""A job is ``queued`` until its run ends; then it takes the run's final status."""

QUEUE_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS jobs (
        thread_id TEXT PRIMARY KEY,
        job_order BIGSERIAL,
        graph_id TEXT NOT NULL,
        input TEXT,
        tenant_id TEXT,
        status TEXT NOT NULL,
        base_checkpoint TEXT,
        resume TEXT,
        resume_base TEXT,
        run_id TEXT,
        error TEXT,
        held_until_us BIGINT,
        held_by TEXT,
        attempts INTEGER NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX IF NOT EXISTS jobs_queued ON jobs (job_order) WHERE status = 'queued'",
]

_LATEST_OF_THREAD = ("SELECT id FROM checkpoints WHERE thread_id = %s "
                     "ORDER BY ts_us DESC, save_order DESC LIMIT 1")


def _json_text(value: Any, where: str) -> str:
    try:
        return json.dumps(to_json_value(value))
    except NotJSONError as exc:
        raise InvalidArgument(f"{where}: not JSON: {exc}") from None


def _readable(error: object, where: str) -> str:
    """A job's error as text PostgreSQL can keep: a NUL or a lone surrogate (a file name's
    bytes in a message) is written as its escape (``\\x00``, ``\\udc80``).

    Raises:
        InvalidArgument: when ``error`` is not a str.
    """
    if not isinstance(error, str):
        raise InvalidArgument(f"{where}(error={error!r:.80}): error is a str or None")
    return error.encode("utf-8", "backslashreplace").decode().replace("\x00", "\\x00")


class PgQueue:
    """The queue operations of :class:`PostgresCheckpointStore` (a mixin)."""

    def _tx(self, *, pipeline: bool = False) -> AbstractAsyncContextManager[Cursor]:
        raise NotImplementedError  # pragma: no cover - the store's

    async def enqueue(
        self,
        graph_id: str,
        input: Mapping[str, Any] | None = None,
        *,
        thread_id: str | None = None,
        tenant_id: str | None = None,
    ) -> str:
        """Queue a new run of ``graph_id`` on ``input``; a worker serving that graph takes it.

        Args:
            graph_id: the ``graph_id`` of a graph the workers serve.
            input: the run's input (JSON).
            thread_id: the thread to run on (a new one by default). A thread whose earlier
                job ended may be given again: the new run starts from its last state.
            tenant_id: the tenant the run belongs to.

        Returns:
            The job's thread id.

        Raises:
            InvalidArgument: a bad argument, or the thread already has a queued job.
        """
        check_id(graph_id, "graph_id", "enqueue")
        if input is not None and not isinstance(input, Mapping):
            raise InvalidArgument(f"enqueue({graph_id!r}, input={input!r:.80}): the input is a "
                                  "dict of state keys to values, or None")
        check_optional_id(thread_id, "thread_id", "enqueue")
        check_optional_id(tenant_id, "tenant_id", "enqueue")
        thread = thread_id if thread_id is not None else f"thread-{uuid.uuid4().hex}"
        data = _json_text(dict(input or {}), f"enqueue({graph_id!r}, input=...)")
        async with self._tx() as cur:
            await cur.execute(_LATEST_OF_THREAD, (thread,))
            row = await cur.fetchone()
            base = None if row is None else row[0]
            await cur.execute(
                "INSERT INTO jobs (thread_id, graph_id, input, tenant_id, status, "
                "base_checkpoint) VALUES (%s, %s, %s, %s, 'queued', %s) "
                "ON CONFLICT (thread_id) DO UPDATE SET graph_id = excluded.graph_id, "
                "input = excluded.input, tenant_id = excluded.tenant_id, status = 'queued', "
                "base_checkpoint = excluded.base_checkpoint, resume = NULL, resume_base = NULL, "
                "run_id = NULL, error = NULL, held_until_us = NULL, held_by = NULL, "
                "attempts = 0 WHERE jobs.status <> 'queued'",
                (thread, graph_id, data, tenant_id, base))
            if cur.rowcount == 0:
                raise InvalidArgument(f"enqueue(thread_id={thread!r}): the thread already has a "
                                      "queued job; wait for it to end")
        return thread

    async def enqueue_resume(
        self, thread_id: str, answer: Any = None, *, answers: Mapping[str, Any] | None = None,
        recover: bool = False,
    ) -> None:
        """Queue the thread's interrupted run for a worker to resume with an answer.

        ``answer`` answers the only pending interrupt (``Resume(answer)``), ``answers`` each
        by key (``Resume(answers=...)``). With ``recover=True`` and no answer, the thread's
        failed or cancelled run is continued instead.

        Raises:
            InvalidArgument: the thread has no job, or its job is still queued.
        """
        check_id(thread_id, "thread_id", "enqueue_resume")
        if answers is not None and not isinstance(answers, Mapping):
            raise InvalidArgument(f"enqueue_resume({thread_id!r}, answers={answers!r:.80}): "
                                  "answers is a dict of interrupt keys to answers, or None")
        if not isinstance(recover, bool):
            raise InvalidArgument(f"enqueue_resume({thread_id!r}, recover={recover!r}): recover "
                                  "is True or False")
        payload: dict[str, Any]
        if recover:
            payload = {"recover": True}
        elif answers is not None:
            payload = {"answers": dict(answers)}
        else:
            payload = {"value": answer}
        text = _json_text(payload, f"enqueue_resume({thread_id!r})")
        async with self._tx() as cur:
            await cur.execute(_LATEST_OF_THREAD, (thread_id,))
            row = await cur.fetchone()
            await cur.execute(
                "UPDATE jobs SET status = 'queued', resume = %s, resume_base = %s, "
                "error = NULL, held_until_us = NULL, held_by = NULL, attempts = 0 "
                "WHERE thread_id = %s AND status <> 'queued'",
                (text, None if row is None else row[0], thread_id))
            if cur.rowcount == 0:
                raise InvalidArgument(f"enqueue_resume({thread_id!r}): the thread has no ended "
                                      "job to resume (never queued, or still queued)")

    async def take_job(
        self, worker: str, *, now: datetime, hold: float, graph_ids: list[str] | None = None
    ) -> dict[str, Any] | None:
        """Take the oldest queued job no other worker holds and no live claim blocks, of one
        of ``graph_ids`` (any graph when ``None``); hold it for ``hold`` seconds (from
        ``now``, the worker's clock) so that it can claim the thread, and count the attempt.
        ``None`` when there is none. The job's ``attempts`` counts this one; its ``error``
        is why the last attempt failed, if it did."""
        check_id(worker, "worker", "take_job")
        moment = rules.to_micros(rules.utc_now(now, "take_job"))
        if isinstance(hold, bool) or not isinstance(hold, (int, float)) \
                or not 0 < hold < float("inf"):
            raise InvalidArgument(f"take_job(hold={hold!r}): hold must be a positive number of "
                                  "seconds")
        if graph_ids is not None:
            if not isinstance(graph_ids, (list, tuple)):
                raise InvalidArgument(f"take_job(graph_ids={graph_ids!r:.80}): pass a list of "
                                      "graph ids, or None for any graph")
            for graph_id in graph_ids:
                check_id(graph_id, "graph_ids[...]", "take_job")
        served = "" if graph_ids is None else "AND j.graph_id = ANY(%s) "
        params: tuple[Any, ...] = (moment, moment) + (() if graph_ids is None
                                                      else (list(graph_ids),))
        async with self._tx() as cur:
            await cur.execute(
                "SELECT j.thread_id, j.graph_id, j.input, j.tenant_id, j.base_checkpoint, "
                "j.resume, j.resume_base, j.attempts, j.error FROM jobs j LEFT JOIN claims c "
                "ON c.thread_id = j.thread_id WHERE j.status = 'queued' AND "
                "(j.held_until_us IS NULL OR j.held_until_us <= %s) AND (c.run_id IS NULL OR "
                f"c.expires_us <= %s) {served}"
                "ORDER BY j.job_order LIMIT 1 FOR UPDATE OF j SKIP LOCKED", params)
            row = await cur.fetchone()
            if row is None:
                return None
            thread, graph_id, data, tenant, base, resume, resume_base, attempts, error = row
            until = rules.to_micros(rules.from_micros(moment) + timedelta(seconds=hold))
            await cur.execute("UPDATE jobs SET held_until_us = %s, held_by = %s, "
                              "attempts = attempts + 1 WHERE thread_id = %s",
                              (until, worker, thread))
        return {"thread_id": thread, "graph_id": graph_id,
                "input": None if data is None else json.loads(data), "tenant_id": tenant,
                "base_checkpoint": base, "resume": None if resume is None else json.loads(resume),
                "resume_base": resume_base, "attempts": attempts + 1, "error": error}

    async def finish_job(
        self, thread_id: str, status: str, *, run_id: str | None = None, error: str | None = None,
        if_status: str | None = None,
    ) -> None:
        """Record how the thread's job ended (``status`` one of :data:`JOB_STATUSES`), or
        hand it back with ``"queued"`` for any worker to take at once (a hand-back does not
        count as an attempt). ``error`` is kept as readable text (see :func:`_readable`).
        ``if_status``: change the job only if its status is that one (a fired deadline
        updates a job that waits for answers, never one queued meanwhile)."""
        check_id(thread_id, "thread_id", "finish_job")
        check_optional_id(run_id, "run_id", "finish_job")
        error = None if error is None else _readable(error, "finish_job")
        if not isinstance(status, str) or status not in JOB_STATUSES:
            raise InvalidArgument(f"finish_job(status={status!r}): use one of {JOB_STATUSES}")
        guard = "" if if_status is None else " AND status = %s"
        params: tuple[Any, ...] = (status, run_id, error, 1 if status == "queued" else 0,
                                   thread_id)
        async with self._tx() as cur:
            await cur.execute(
                "UPDATE jobs SET status = %s, run_id = COALESCE(%s, run_id), error = %s, "
                "held_until_us = NULL, held_by = NULL, attempts = GREATEST(attempts - %s, 0) "
                "WHERE thread_id = %s" + guard,
                params if if_status is None else (*params, if_status))

    async def note_error(self, thread_id: str, error: str) -> None:
        """Record why the attempt at the thread's job failed; the job stays queued, held
        until its hold ends, then any worker may try again. ``error`` is kept as readable
        text (see :func:`_readable`)."""
        check_id(thread_id, "thread_id", "note_error")
        error = _readable(error, "note_error")
        async with self._tx() as cur:
            await cur.execute("UPDATE jobs SET error = %s WHERE thread_id = %s AND "
                              "status = 'queued'", (error, thread_id))

    async def jobs(self, status: str | None = None) -> list[dict[str, Any]]:
        """Every job (or those with ``status``), oldest first: ``thread_id``, ``graph_id``,
        ``status``, ``run_id``, ``error``, ``attempts``."""
        if status is not None and (not isinstance(status, str) or status not in JOB_STATUSES):
            raise InvalidArgument(f"jobs(status={status!r}): use None or one of {JOB_STATUSES}")
        where = "" if status is None else "WHERE status = %s "
        async with self._tx() as cur:
            await cur.execute("SELECT thread_id, graph_id, status, run_id, error, attempts "
                              f"FROM jobs {where}ORDER BY job_order",
                              () if status is None else (status,))
            rows = await cur.fetchall()
        keys = ("thread_id", "graph_id", "status", "run_id", "error", "attempts")
        return [dict(zip(keys, row, strict=True)) for row in rows]
