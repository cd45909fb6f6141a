"""Deleting a thread from the PostgreSQL store, inside one transaction (see :mod:`.._deletion`).

The thread's claim row is locked first (made to exist, as ``claim`` does), so no claim,
renewal or fenced commit of the thread interleaves; its queue job row is locked too, so no
worker takes it meanwhile. A job a worker holds (taken, its run not yet claiming the thread)
keeps the thread busy; any other job of the thread (queued or ended) is deleted with it: a
queued job would otherwise start a run on the deleted thread.
"""

from __future__ import annotations

from datetime import datetime

from .. import _claims as rules
from .._deletion import TOKEN_FLOOR, DeletedThread, check_deletable
from ._claims import PgClaims
from ._conn import Cursor
from ._events import COUNT_DELETED

__all__ = ["delete_thread"]


async def delete_thread(cur: Cursor, thread_id: str, tenant: str | None,
                        now: datetime | None) -> DeletedThread:
    """Delete ``thread_id`` in the caller's transaction; see ``delete_thread`` of the store.

    Raises:
        TenantMismatch: the thread belongs to another tenant; nothing is deleted.
        ThreadBusy: a claim on the thread is live, or a worker holds its job.
    """
    await cur.execute("INSERT INTO claims (thread_id, token) VALUES (%s, 0) "
                      "ON CONFLICT (thread_id) DO NOTHING", (thread_id,))
    claim, last = await PgClaims._claim_row(cur, thread_id)
    await cur.execute("SELECT tenant_id FROM checkpoints WHERE thread_id = %s "
                      "ORDER BY ts_us DESC, save_order DESC LIMIT 1", (thread_id,))
    owner = await cur.fetchone()
    await cur.execute("SELECT held_until_us FROM jobs WHERE thread_id = %s AND "
                      "status = 'queued' FOR UPDATE", (thread_id,))
    job = await cur.fetchone()
    held = job is not None and job[0] is not None and (
        now is None or int(job[0]) > rules.to_micros(now))
    check_deletable(thread_id, tenant, owner, claim, now, held=held)
    await cur.execute("SELECT run_id FROM checkpoints WHERE thread_id = %s GROUP BY run_id "
                      "ORDER BY MIN(save_order)", (thread_id,))
    runs = dict.fromkeys(r for (r,) in await cur.fetchall())
    await cur.execute("SELECT run_id FROM runs WHERE thread_id = %s ORDER BY first_order",
                      (thread_id,))
    runs.update(dict.fromkeys(r for (r,) in await cur.fetchall()))
    ids = list(runs)
    counts = []
    for sql in ("DELETE FROM checkpoints WHERE thread_id = %s",
                COUNT_DELETED,
                "DELETE FROM runs WHERE run_id = ANY(%s)",
                "DELETE FROM artifacts WHERE run_id = ANY(%s)",
                "DELETE FROM jobs WHERE thread_id = %s"):
        await cur.execute(sql, (thread_id if "thread_id" in sql else ids,))
        if sql is COUNT_DELETED:  # events, not rows: a row holds the events written together
            found = await cur.fetchone()
            counts.append(0 if found is None else int(found[0]))
        else:
            counts.append(cur.rowcount)
    await cur.execute("DELETE FROM event_compactions WHERE run_id = ANY(%s)", (ids,))
    await cur.execute("DELETE FROM paths WHERE run_id = ANY(%s)", (ids,))
    await cur.execute("DELETE FROM claims WHERE thread_id = %s", (thread_id,))
    if last:
        await cur.execute(
            "INSERT INTO meta VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = "
            "GREATEST(meta.value::bigint, excluded.value::bigint)::text",
            (TOKEN_FLOOR, str(last)))
    checkpoints, events, records, artifacts, jobs = counts
    return DeletedThread(thread_id, tuple(ids), checkpoints, events, records, artifacts, jobs)
