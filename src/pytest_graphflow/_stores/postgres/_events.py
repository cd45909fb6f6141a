"""A run's event log in PostgreSQL (schema version 2): the events written together are one
row of ``events``.

A row holds ``seq`` and ``last_seq`` (the first and last of its seqs), ``seqs`` (all of
them, ascending, comma-separated) and ``data`` (their JSON texts in that order, one a line:
a JSON text never holds a raw newline). A run's rows never overlap, so the row holding a
seq is the one with the greatest ``seq`` not above it: one probe of the primary key. A
step's events are one row in its commit statement (:data:`INSERT`), written only when no
row of the run reaches into the step's seqs and none is below the run's compaction point
(:data:`CLEAR`); anything else (an event overwriting a recorded seq, one below the point)
is merged here, under the run's events lock, in a transaction (:func:`write_events`). An
unfenced merge marks the run's claim rows first (:data:`MARK_CLAIMS`), which a step under
way or one that could not see the merge notices: their rows cannot overlap.
"""

from __future__ import annotations

import json
from operator import itemgetter
from typing import Any

from ._conn import Cursor

__all__ = ["CLEAR", "COUNT_DELETED", "INSERT", "MARK_CLAIMS", "Batch", "batch", "compact",
           "events_lock_key", "lock_events", "read_events", "share_events_lock",
           "write_events"]

_Rows = list[tuple[str, int, Any, str]]
Batch = tuple[int, int, str, str]
"""A row's ``(seq, last_seq, seqs, data)``."""

INSERT = "INSERT INTO events (run_id, seq, last_seq, seqs, data) VALUES (%s, %s, %s, %s, %s)"

CLEAR = ("COALESCE((SELECT last_seq FROM events WHERE run_id = %s AND seq <= %s ORDER BY seq "
         "DESC LIMIT 1), %s - 1) < %s AND %s >= COALESCE((SELECT earliest_seq FROM "
         "event_compactions WHERE run_id = %s), 0)")
"""True when a row of the run's events spanning ``first..last`` may be inserted as it is: no
row of the run reaches into it, and it starts at or after the compaction point (as the
statement's snapshot sees the log: the step's statement adds that no merge committed after
it, see :data:`MARK_CLAIMS`). Parameters (:func:`clear_params`): run id, last, first, first,
first, run id."""

MARK_CLAIMS = "UPDATE claims SET token = token WHERE run_id = %s"
"""An unfenced merge (``record_events``, ``compact_events``) marks the run's claim rows (a new
row version) under the run's events lock, before it reads the log: a step of the run holds
its claim row share-locked for its statement, so the merge waits for a step under way (and
then reads its row); a step whose snapshot was taken before the merge committed locks the
marked row's new version (PostgreSQL's read-committed re-check), unlike the version its
snapshot sees, and merges in a transaction instead of inserting its row (its
``(SELECT xmin ...)`` comparison). A claim of the run takes the events lock shared first
(:meth:`..._claims.PgClaims.claim`), so a run claimed while a merge is under way is marked
by it or claimed after it."""

_COUNTED = "SELECT COALESCE(SUM(array_length(string_to_array(seqs, ','), 1)), 0) FROM d"
"""How many events (not rows) the rows deleted by a ``d AS (DELETE ... RETURNING seqs)`` held."""

COUNT_DELETED = f"WITH d AS (DELETE FROM events WHERE run_id = ANY(%s) RETURNING seqs) {_COUNTED}"
"""Delete the events of the runs, answering how many events (not rows) were deleted."""

_FROM = ("SELECT seq, last_seq, seqs, data FROM events WHERE run_id = %s AND seq >= "
         "COALESCE((SELECT seq FROM events WHERE run_id = %s AND seq <= %s ORDER BY seq DESC "
         "LIMIT 1), %s)")
"""The run's rows from the one holding seq ``lo`` (or the first after it)."""

_AROUND = f"{_FROM} AND seq <= %s ORDER BY seq"
""":data:`_FROM`, up to seq ``hi``."""

_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
_LOCK_SHARED = "SELECT pg_advisory_xact_lock_shared(hashtextextended(%s, 0))"


def clear_params(run_id: str, first: int, last: int) -> tuple[Any, ...]:
    """The parameters of :data:`CLEAR`."""
    return (run_id, last, first, first, first, run_id)


_SEQ, _TEXT = itemgetter(1), itemgetter(3)


def batch(rows: _Rows) -> Batch:
    """The row of event rows ``(run_id, seq, type, data)``: by seq, the last of a seq given
    twice kept (as writing them one by one would)."""
    seqs = list(map(_SEQ, rows))
    texts = list(map(_TEXT, rows))
    if sorted(set(seqs)) != seqs:
        return _row(dict(zip(seqs, texts, strict=True)))
    return seqs[0], seqs[-1], ",".join(map(str, seqs)), "\n".join(texts)


def _row(by_seq: dict[int, str]) -> Batch:
    """The row of the events ``by_seq`` (seq -> JSON text; not empty), in seq order."""
    order = sorted(by_seq)
    return (order[0], order[-1], ",".join([str(s) for s in order]),
            "\n".join([by_seq[s] for s in order]))


def _split(seqs: str, data: str) -> zip[tuple[int, str]]:
    return zip(map(int, seqs.split(",")), data.split("\n"), strict=True)


async def lock_events(cur: Cursor, run_id: str, *, mark: bool) -> None:
    """Take the run's events lock (exclusive, until the caller's transaction ends); with
    ``mark``, an unfenced writer's, also mark the run's claim rows (:data:`MARK_CLAIMS`)."""
    await cur.execute(_LOCK, (events_lock_key(run_id),))
    if mark:
        await cur.execute(MARK_CLAIMS, (run_id,))


async def share_events_lock(cur: Cursor, run_id: str) -> None:
    """Take the run's events lock shared (until the caller's transaction ends): a claim of
    the run waits for a merge of its events under way (see :data:`MARK_CLAIMS`)."""
    await cur.execute(_LOCK_SHARED, (events_lock_key(run_id),))


def events_lock_key(run_id: str) -> str:
    """The key of the run's events lock (a transaction-scoped advisory lock)."""
    return f"graphflow-events:{run_id}"


async def write_events(cur: Cursor, run_id: str, rows: _Rows, *, fenced: bool = False) -> None:
    """Write event rows of ``run_id`` (an event with a recorded seq overwrites it; those
    below the compaction point are dropped), merging the rows they reach into one, in the
    caller's transaction, under the run's events lock (which compaction takes too); an
    unfenced writer (not ``fenced``: not under the run's claim) marks the run's claims."""
    if not rows:
        return
    await lock_events(cur, run_id, mark=not fenced)
    await cur.execute("SELECT earliest_seq FROM event_compactions WHERE run_id = %s", (run_id,))
    found = await cur.fetchone()
    if found is not None:
        rows = [r for r in rows if r[1] >= found[0]]
        if not rows:
            return
    lo, hi, seqs, data = batch(rows)
    await cur.execute(_AROUND, (run_id, run_id, lo, lo, hi))
    reached = [r for r in await cur.fetchall() if r[1] >= lo]
    if reached:
        merged: dict[int, str] = {}
        for r in reached:
            merged.update(_split(r[2], r[3]))
        merged.update(_split(seqs, data))
        lo, hi, seqs, data = _row(merged)
        await cur.execute("DELETE FROM events WHERE run_id = %s AND seq = ANY(%s)",
                          (run_id, [r[0] for r in reached]))
    await cur.execute(INSERT, (run_id, lo, hi, seqs, data))


async def read_events(cur: Cursor, run_id: str, first: int) -> list[dict[str, Any]]:
    """The run's events with seq ``>= first``, by seq."""
    await cur.execute(f"{_FROM} ORDER BY seq", (run_id, run_id, first, first))
    texts: list[str] = []
    top = first - 1  # the last seq taken: a seq is taken once, from the first row holding it
    for seq, last, seqs, data in await cur.fetchall():
        if seq > top:
            texts.append(data.replace("\n", ","))
            top = last
            continue
        for s, text in _split(seqs, data):
            if s > top:
                texts.append(text)
                top = s
    return list(json.loads(f"[{','.join(texts)}]"))


async def compact(cur: Cursor, run_id: str, before: int) -> int:
    """Remove the run's events with seq ``< before`` (in the caller's transaction, under the
    run's events lock); return how many were removed. A row holding seqs on both sides of
    ``before`` keeps the later ones."""
    await cur.execute(
        "WITH d AS (DELETE FROM events WHERE run_id = %s AND seq < %s AND last_seq < %s "
        f"RETURNING seqs) {_COUNTED}", (run_id, before, before))
    found = await cur.fetchone()
    removed = 0 if found is None else int(found[0])
    await cur.execute("SELECT seq, seqs, data FROM events WHERE run_id = %s AND seq < %s "
                      "AND last_seq >= %s", (run_id, before, before))
    for seq, seqs, data in await cur.fetchall():
        pairs = list(_split(seqs, data))
        kept = {s: t for s, t in pairs if s >= before}
        removed += len(pairs) - len(kept)
        await cur.execute("DELETE FROM events WHERE run_id = %s AND seq = %s", (run_id, seq))
        await cur.execute(INSERT, (run_id, *_row(kept)))
    return removed
