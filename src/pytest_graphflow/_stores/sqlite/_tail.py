"""The SQLite store's log of recent pieces (schema versions 4 and 5, issue 29).

A step used to write its checkpoint into a table with three indexes (id, run, thread) and
each of its events into a table with one more: six b-trees, about 9 WAL pages of 4 KiB a
commit. Now a piece (a step's checkpoint with the events that report it, or events alone) is
one row of ``log``, a table of :data:`FOLD_AT` slots and no index, rewritten in place: a
commit writes one page of it, plus the run record when that changes. When a piece would
overwrite a slot that holds a piece not folded yet, the commit first folds the log: it moves
the pieces into the indexed tables in bulk, where a few pages per index take many rows at
once (the checkpoints into ``checkpoints``; since schema version 6 each piece's events whole,
as one row of ``event_pieces``), and marks them folded (``meta.log_folded``, the last folded
seq). A plain chain then writes 2.7-2.8 pages a step. Slots are reused, never deleted, so the
log's pages are not freed and allocated again (which writes the free list and the file's
header at each turn).

The log never holds more than :data:`FOLD_AT` live pieces, so reading it whole costs a
bounded amount: every read looks at the indexed tables (as before) and at the log's live
rows, which are the newer ones. A run's events are read from ``events`` (one row an event:
those folded before schema version 6, and those of a run compacted since), then from
``event_pieces``, then from the log, each newer than the one before. A checkpoint id is in
one place only (saving it again removes the older row wherever it is). Operations that
change many rows (delete, prune, fork, thread deletion, compaction, vacuum) fold the log
first, in their own transaction, and then work on the indexed tables alone. A reader that
cannot write (``readonly=True``, the ``graphflow``
command) reads the log as it is.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any, NamedTuple

from ._schema import LAST_OF_KEYS

__all__ = ["FOLDED", "FOLD_AT", "LIVE", "LOG_COLUMNS", "PLACE", "PUT_NEW", "Piece", "fold",
           "folded_events", "put_piece", "tail_events", "unpack_events"]

FOLD_AT = 64
"""Slots of the log: pieces it holds before a commit folds them into the indexed tables
(16 in schema version 4; 64 folds a quarter as often, into fuller index pages: 2.0 WAL
pages a step of a plain chain, was 2.8)."""

FOLDED = "(SELECT COALESCE(MAX(CAST(value AS INTEGER)), 0) FROM meta WHERE key = 'log_folded')"
"""The seq of the last piece folded (0 before the first fold), as an SQL expression."""

LIVE = f"seq > {FOLDED}"
"""The log's rows not folded yet (a condition on ``log``)."""

LOG_COLUMNS = ("id, thread_id, ts_us, node_id, status, tenant_id, graph_id, step, timestamp, "
               "format_version, path_id, path_len, data")
"""A checkpoint's columns in ``log`` (those of ``checkpoints`` but ``seq`` and ``run_id``)."""

_PUT = ("INSERT OR REPLACE INTO log (slot, seq, run_id, "
        f"{LOG_COLUMNS}, ev_keys, events, last, slots) "
        f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, {FOLD_AT})")

PUT_NEW = ("INSERT OR REPLACE INTO log (slot, seq, run_id, "
            f"{LOG_COLUMNS}, ev_keys, events, last, slots) "
            f"SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, {FOLD_AT} "
            "WHERE NOT EXISTS (SELECT 1 FROM checkpoints WHERE id = ?4)")
""":data:`_PUT` unless the checkpoint's id is in the indexed table (one statement where a
check and a write were two). Its values: the slot, the seq, the run id, the
:data:`LOG_COLUMNS`, then the events' :class:`Piece` (keys, text, highest seq)."""

_NO_CHECKPOINT = (None,) * 13
_NO_EVENTS = (None, None, None)

_EventRow = tuple[str, int, Any, str]


class Piece(NamedTuple):
    """A piece's events as the log keeps them, made by the caller: ``keys`` (the JSON list
    of ``[seq, type]``), ``text`` (the events' JSON, one a line) and ``last`` (the highest
    seq among them, which a fold copies into ``event_pieces``; schema version 7)."""

    keys: str
    text: str
    last: int


PLACE = (f"MAX(COALESCE((SELECT MAX(seq) FROM checkpoints), 0), COALESCE((SELECT MAX(seq) "
         f"FROM log), 0), {FOLDED}), {FOLDED}")
"""Two columns: the last seq used (the folded ones included, whose rows may be gone) and
the last one folded; what :func:`put_piece` needs to place a piece."""


def put_piece(db: sqlite3.Connection, run_id: str, checkpoint: Sequence[Any] | None,
              events: Sequence[_EventRow] | Piece, place: tuple[int, int] | None = None, *,
              new: bool = False) -> tuple[int, int] | None:
    """Write one piece of ``run_id`` to the log: a checkpoint (its :data:`LOG_COLUMNS`
    values) and/or event rows ``(run_id, seq, type, data)`` (or their :class:`Piece`); the
    log is folded first when
    the piece's slot holds a live piece. ``place``: :data:`PLACE`, when the caller read it
    in this transaction and wrote no piece since. ``new``: write it only if the
    checkpoint's id is not in the indexed table (the caller knows it is not among the log's
    live rows). In the caller's transaction.

    Returns:
        :data:`PLACE` after it: the piece's seq and the last seq folded; ``None`` when
        ``new`` and the id is stored (nothing was written but a fold, already in ``PLACE``
        when read again).
    """
    top, done = place or db.execute(f"SELECT {PLACE}").fetchone()
    seq = top + 1
    if seq - FOLD_AT > done:  # the slot holds piece seq - FOLD_AT, not folded yet
        done = fold(db, done) or done
    piece: Sequence[Any] = _NO_EVENTS
    if isinstance(events, Piece):
        piece = events
    elif events:
        # A serialised event never holds a raw newline (JSON escapes it in strings).
        piece = (json.dumps([[e[1], e[2]] for e in events]), "\n".join(e[3] for e in events),
                 max(e[1] for e in events))
    values = (seq % FOLD_AT, seq, run_id, *(checkpoint or _NO_CHECKPOINT), *piece)
    if new and checkpoint is not None:
        if not db.execute(PUT_NEW, values).rowcount:
            return None
    else:
        db.execute(_PUT, values)
    return seq, done


def _events_of(pieces: list[tuple[str, str, str]]) -> list[_EventRow]:
    """The event rows of the log's pieces ``(run_id, ev_keys, events)``, in order; the
    pieces' keys parsed as one JSON text (one parse, not one a piece)."""
    if not pieces:
        return []
    listed = json.loads(f"[{','.join([keys for _, keys, _ in pieces])}]")
    return [(run_id, seq, kind, data)
            for (run_id, _, text), pairs in zip(pieces, listed, strict=True)
            for (seq, kind), data in zip(pairs, text.split("\n"), strict=True)]


def fold(db: sqlite3.Connection, done: int | None = None, *, erase: bool = False
         ) -> int | None:
    """Move the log's live pieces into the indexed tables, oldest first, and mark them
    folded: their checkpoints into ``checkpoints``, their events whole into
    ``event_pieces`` (one row a piece, as the log keeps them; a later piece's event of the
    same seq replaces an earlier one when read, as in the log); ``erase``: then delete the
    log's rows (the folded pieces stay in the slots until overwritten, so an operation that
    deletes data erases them). ``done``: the last seq folded, when the caller read it in
    this transaction. In the caller's transaction. Two statements copy the rows: nothing
    is read into Python.

    Returns:
        The last seq folded after it (``None`` when nothing was live and ``done`` was not
        given).
    """
    if done is None:
        done = db.execute(f"SELECT {FOLDED}").fetchone()[0]
        given = False
    else:
        given = True
    (last,) = db.execute("SELECT MAX(seq) FROM log WHERE seq > ?", (done,)).fetchone()
    if last is None:
        if erase:
            db.execute("DELETE FROM log")
        return done if given else None
    oldest = (done + 1, (done + 1) % FOLD_AT)  # the first live seq and its slot
    db.execute(_FOLD_CHECKPOINTS, oldest)
    db.execute(_FOLD_EVENTS, oldest)
    if erase:
        db.execute("DELETE FROM log")
    db.execute("INSERT OR REPLACE INTO meta VALUES ('log_folded', ?)", (str(last),))
    return int(last)


def _oldest_first(columns: str, where: str) -> str:
    """The log's live rows (from seq ``?1``, in slot ``?2``) that match ``where``, oldest
    first without a sort: the live seqs run on from ``?1`` (at most :data:`FOLD_AT` of
    them, see :func:`put_piece`), so the slots from ``?2`` up, then those below it, hold
    them in seq order, and each part is a range of the table's row ids. (The order only
    makes the indexed tables' inserts appends: each row names its seq.) The ``ORDER BY
    seq`` this replaces sorted the rows' copies first: about 5 k CPU instructions a piece,
    a sixth of the fold."""
    return (f"SELECT {columns} FROM log WHERE {where} AND seq >= ?1 AND slot >= ?2 "
            f"UNION ALL SELECT {columns} FROM log WHERE {where} AND seq >= ?1 AND slot < ?2")


_FOLD_CHECKPOINTS = (
    "INSERT INTO checkpoints (seq, run_id, id, thread_id, ts_us, node_id, status, "
    "tenant_id, graph_id, step, timestamp, format_version, path_id, path_len, data) "
    + _oldest_first(f"seq, run_id, {LOG_COLUMNS}", "id IS NOT NULL"))
"""Copy the checkpoints of the log's live pieces (from seq ``?1``, in slot ``?2``) into
``checkpoints``."""

_FOLD_EVENTS = (
    "INSERT INTO event_pieces (seq, run_id, last, ev_keys, events) " + _oldest_first(
        f"seq, run_id, COALESCE(last, {LAST_OF_KEYS}), ev_keys, events", "events IS NOT NULL"))
"""Copy the log's live pieces with events (from seq ``?1``, in slot ``?2``) into
``event_pieces``; ``last``: the highest seq of a piece's events (what a read from a seq on
looks for), as the log row keeps it since schema version 7 (worked out of ``ev_keys`` with
``json_each`` before: about 19 k CPU instructions a piece, a third of the fold's cost). A
row without it (written by a process of a version-6 build that opened the file before it
was migrated) gets it worked out as before (``COALESCE`` evaluates that only then)."""


def folded_events(db: sqlite3.Connection, run_id: str, first: int) -> list[_EventRow]:
    """The events of ``run_id`` in ``event_pieces`` from pieces holding an event of
    ``seq >= first`` (oldest piece first; the pieces' other events too: the caller filters)."""
    return _events_of([(run_id, keys, text) for keys, text in db.execute(
        "SELECT ev_keys, events FROM event_pieces WHERE run_id = ? AND last >= ? "
        "ORDER BY seq", (run_id, first))])


def unpack_events(db: sqlite3.Connection, run_id: str) -> None:
    """Move the folded pieces of ``run_id`` from ``event_pieces`` into ``events``, one row
    an event, oldest piece first (a later event of the same seq replaces an earlier one):
    for operations that count or delete a run's events by seq (compaction, thread
    deletion). The log must be folded. In the caller's transaction."""
    events = folded_events(db, run_id, _NO_SEQ)
    if events:
        db.executemany("INSERT OR REPLACE INTO events (run_id, seq, type, data) "
                       "VALUES (?, ?, ?, ?)", events)
        db.execute("DELETE FROM event_pieces WHERE run_id = ?", (run_id,))


_NO_SEQ = -(2 ** 63)
"""Below every event's seq."""


def tail_events(db: sqlite3.Connection, run_id: str) -> list[_EventRow]:
    """The events of ``run_id`` in the log's live pieces, oldest piece first."""
    return _events_of([(run_id, keys, text) for keys, text in db.execute(
        f"SELECT ev_keys, events FROM log WHERE run_id = ? AND events IS NOT NULL AND {LIVE} "
        "ORDER BY seq", (run_id,))])
