"""``SQLiteCheckpointStore``: a durable store in one SQLite file (SPEC §5, seeds 002–004).

The store calls :mod:`sqlite3` synchronously inside its async methods: the deterministic
runtime must not see worker threads, and every operation is one short transaction. The
file is in WAL mode, so another process (or ``graphflow``) can read it while a run writes.
Opening, identifying and migrating the file live in :mod:`._file`; how a checkpoint
becomes a row (its visited path kept incrementally) in :mod:`._rows`; the connection
and its transactions in :mod:`._tx`; events, run records and artifacts in
:mod:`._log`; thread claims in :mod:`._claims`.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import weakref
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from ..._records._checkpoint import Checkpoint
from ..._records._checks import check_id
from ..._records._ids import derived_hex
from ..._records._json import DumpedEvents
from ...errors import CheckpointNotFound, ForkTargetExists, InvalidArgument, ThreadBusy
from .. import _claims as rules
from .._args import CheckedCheckpoints, check_commit, check_fork, check_list, check_nesting
from .._deletion import DeletedThread, check_deletable, check_delete_args
from .._features import StoreFeatures
from .._protocol import Fence
from .._waiting import WaitingPage, check_waiting, waiting_row
from .._wire import dumped_row, event_row, plain_run_record
from ._claims import RELEASE, SQLiteClaims, raise_token_floor
from ._file import SYNCHRONOUS, open_store
from ._known import VERSION, read_facts
from ._log import SQLiteLog
from ._plain import plain_rows
from ._rows import SELECT, PathWriter, decode, encode, with_tail
from ._schema import SCHEMA_VERSION
from ._tail import FOLD_AT, LIVE, PUT_NEW, Piece, put_piece, unpack_events

__all__ = ["SCHEMA_VERSION", "SQLiteCheckpointStore"]

_ORDER = "ORDER BY ts_us, seq"
_NEWEST = "ORDER BY ts_us DESC, seq DESC LIMIT 1"
_PICK = "SELECT id, format_version, data, path_id, path_len, ts_us, seq FROM"
"""A checkpoint row (what :func:`decode` reads) and its order, from ``checkpoints`` or
``log`` (the pieces not folded yet, see :mod:`._tail`)."""
_SERIALIZER = Checkpoint.__pydantic_serializer__
_NO_VISITED = {"visited"}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
"""What the plain step's row takes inline: :func:`encode`'s serialiser and exclusion,
:func:`~.._claims.to_micros`' epoch and unit."""
_THREAD_LATEST = (
    "NOT EXISTS (SELECT 1 FROM checkpoints d WHERE d.thread_id = c.thread_id AND "
    "(d.ts_us > c.ts_us OR (d.ts_us = c.ts_us AND d.seq > c.seq)))")
"""``c`` is its thread's latest checkpoint (latest timestamp, then saved last)."""
_GC_PATHS = """
WITH RECURSIVE
    dead(id) AS (
        SELECT value FROM json_each(?)
        UNION SELECT p.parent FROM paths p JOIN dead d ON p.id = d.id WHERE p.parent IS NOT NULL
    ),
    live(id) AS (
        SELECT path_id FROM checkpoints WHERE run_id = ? AND path_id IS NOT NULL
        UNION SELECT p.parent FROM paths p JOIN live l ON p.id = l.id WHERE p.parent IS NOT NULL
    )
DELETE FROM paths WHERE id IN (SELECT id FROM dead EXCEPT SELECT id FROM live)
"""
"""Delete the path segments only the deleted checkpoints (path ids in ``?1``) used."""


class SQLiteCheckpointStore(SQLiteClaims, SQLiteLog, CheckedCheckpoints):
    """A durable :class:`CheckpointStore` in one SQLite file, with the in-memory store's
    semantics: a run saved by one instance (or process) is read by another over the same file.

    Besides checkpoints (stored as JSON with indexed run, thread, node, timestamp and save
    order), it records run records, ordered event logs, artifacts, thread claims with fencing
    tokens and supports retention (``prune``, which gives the space back) and thread
    deletion (``delete_thread``). One connection per
    instance; each operation is one transaction. Close it with :meth:`close` or use it as a
    (sync or async) context manager.

    The file is identified read-only before anything is written: only a new or empty file
    becomes a store, and a store of an older schema version is migrated in one transaction.
    A file (or directory) that cannot be written opens read-only. In a read-only directory
    where a writer that is gone left its ``-wal`` journal without the ``-shm`` index, SQLite
    cannot read the file in place: the store reads a private copy of the file and journal
    taken when it opens (refused if a writer touches them meanwhile), removed on close.

    Args:
        path: the database file (created if missing), or ``":memory:"``.
        claim_ttl: seconds a claim stays live unless renewed, measured on the claiming
            runtime's clock (the ``now`` it passes), so a dead process's claim expires.
        readonly: open for reading only (the file must be a store); every write then raises
            ``StoreFileError``. ``graphflow`` opens files this way.
        synchronous: how hard a commit is pushed to the disk (SQLite's ``synchronous``, with
            the file in WAL mode): ``"normal"`` (a commit survives the process crashing; a
            power loss may lose the last commits, never the file), ``"full"`` (an fsync per
            commit: commits survive a power loss too) or ``"off"`` (no fsync at all: an
            operating-system crash or power loss may damage the file; for throwaway files,
            such as a test's store). It holds for this connection only.

    Raises:
        StoreFileError: the file is not a store, is damaged, or cannot be created; the
            message names the file and the fix. The file is left as it was.
        UnsupportedFormat: the file was written by a newer pytest-graphflow.
        InvalidArgument: a bad ``path``, ``claim_ttl``, ``readonly`` or ``synchronous``.
    """

    records_events = True
    """The runtime records every run's events and run record here (durable inspection)."""

    pages_history = True
    """:meth:`list` takes ``limit`` and ``before`` (``GraphRuntime.history`` pages with them)."""

    features = StoreFeatures(claims=True, fencing=True, commit=True, events=True,
                             run_records=True, history_pages=True, artifacts=True, prune=True,
                             delete_thread=True, waiting=True, tenants=True,
                             visited_snapshots=True, folded_claims=True)
    """Durable: claims with fencing, atomic commits of events and run records, paged history,
    artifacts, prune, thread deletion and waiting runs; folded claims (a new run's
    free-run-id read rides on its claim, a leg's release on its last commit: two
    transactions fewer a run). The runtime may hand this class (not
    a subclass, which may read ``visited``: only the class itself declares features) its
    checkpoints with ``visited`` left as its snapshot of the run's log: the rows keep a path
    as segments, and building a tuple of every node so far at each step made a step's cost
    grow with the run."""

    supports_fencing = True
    """``save`` takes ``fence=(thread_id, token)`` and the store has ``commit``."""

    _stamp_second: int | None = None
    _stamp_prefix = ""
    """The last plain step's second (since the epoch) and its ``isoformat`` up to it."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        claim_ttl: float = rules.DEFAULT_CLAIM_TTL,
        readonly: bool = False,
        synchronous: Literal["normal", "full", "off"] = "normal",
    ) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise InvalidArgument(f"SQLiteCheckpointStore(path={path!r}): pass a file path "
                                  "(str or pathlib.Path) or ':memory:'")
        fspath = os.fspath(path)
        if not isinstance(fspath, str) or not fspath or "\x00" in fspath:
            raise InvalidArgument(f"SQLiteCheckpointStore(path={path!r}): pass a non-empty "
                                  "str path without NUL characters")
        if not isinstance(readonly, bool):
            raise InvalidArgument(f"SQLiteCheckpointStore(readonly={readonly!r}): readonly is "
                                  "True or False")
        if synchronous not in SYNCHRONOUS:
            raise InvalidArgument(f"SQLiteCheckpointStore(synchronous={synchronous!r}): pass "
                                  "'normal' (the default), 'full' or 'off'")
        self.path: str = fspath
        self.claim_ttl: float = rules.check_ttl(claim_ttl, "SQLiteCheckpointStore")
        self.synchronous: str = synchronous
        """How hard this connection's commits go to the disk (``"normal"``, ``"full"``,
        ``"off"``)."""
        self._db: sqlite3.Connection | None = None
        db, self.readonly, snapshot = open_store(self.path, readonly=readonly,
                                                 synchronous=synchronous)
        self._db = db
        self._cur = db.cursor()
        if snapshot is not None:  # a copy it reads (see docs/stores.md): removed on close
            self._snapshot = weakref.finalize(self, shutil.rmtree, snapshot, True)
        self._paths = PathWriter()

    def __repr__(self) -> str:
        return f"SQLiteCheckpointStore({self.path!r})"

    # -- checkpoints (seed 003) --

    def _checkpoints(self, db: sqlite3.Connection, sql: str, params: tuple[Any, ...]
                     ) -> list[Checkpoint]:
        try:
            rows = db.execute(sql, params).fetchall()
            return decode(self.path, db, rows)
        except sqlite3.ProgrammingError:
            raise
        except sqlite3.Error as exc:
            raise self._failure(exc) from None

    def _first(self, db: sqlite3.Connection, sql: str, params: tuple[Any, ...]
               ) -> Checkpoint | None:
        found = self._checkpoints(db, sql, params)
        return found[0] if found else None

    def _pick(self, db: sqlite3.Connection, where: str, params: tuple[Any, ...], *,
              limit: int | None = None) -> list[Checkpoint]:
        """The checkpoints matching ``where`` (on the columns both tables share), in the
        indexed table and in the log, oldest first; with ``limit``, the newest ``limit``."""
        try:
            with self._reading(db):  # both tables as of one moment (a fold moves rows)
                rows, tail = self._rows_of_both(db, where, params, limit)
                if tail:
                    rows = sorted(rows + tail, key=lambda r: (r[5], r[6]))
                    if limit is not None:
                        rows = rows[-limit:] if limit else []
                return decode(self.path, db, [r[:5] for r in rows])
        except sqlite3.ProgrammingError:
            raise
        except sqlite3.Error as exc:
            raise self._failure(exc) from None

    @staticmethod
    def _rows_of_both(db: sqlite3.Connection, where: str, params: tuple[Any, ...],
                      limit: int | None) -> tuple[list[Any], list[Any]]:
        """:meth:`_pick`'s rows: the indexed table's (oldest first), the log's live ones."""
        if limit is None:
            rows = db.execute(f"{_PICK} checkpoints WHERE {where} {_ORDER}", params).fetchall()
        else:
            rows = db.execute(f"{_PICK} checkpoints WHERE {where} ORDER BY ts_us DESC, "
                              "seq DESC LIMIT ?", (*params, limit)).fetchall()
            rows.reverse()
        tail = db.execute(f"{_PICK} log WHERE id IS NOT NULL AND {LIVE} AND {where}",
                          params).fetchall()
        return rows, tail

    def _newest(self, db: sqlite3.Connection, where: str, params: tuple[Any, ...]
                ) -> Checkpoint | None:
        found = self._pick(db, where, params, limit=1)
        return found[0] if found else None

    def _write(self, db: sqlite3.Connection, cp: Checkpoint, data: str,
               events: Sequence[tuple[str, int, Any, str]] | Piece = (),
               known: tuple[int, int, bool | None] | None = None, version: int | None = None,
               ts_us: int | None = None) -> tuple[int, int, bool]:
        """Write ``cp`` (and ``events``, the rows of the events that report it) as one piece
        of the log (see :mod:`._tail`). ``known``: :data:`~._tail.PLACE` and whether the id
        is stored (``None``: not among the log's live rows, maybe in the indexed table), when
        the caller read them in this transaction (see :mod:`._known`); ``version``: the
        file's data version read there, in a commit; ``ts_us``: the timestamp's
        :func:`~.._claims.to_micros`, when the caller has it. Returns
        :data:`~._tail.PLACE` after it and whether an older row of the id was replaced."""
        # The runtime's own checkpoints carry their path as a snapshot of the run's log
        # (``StoreFeatures.visited_snapshots``): written without a tuple of every node so far.
        visited = cp.visited
        path_id, tail = self._paths.place(db, cp.run_id, visited, version)
        row = (cp.id, cp.thread_id, rules.to_micros(cp.timestamp) if ts_us is None else ts_us,
               cp.node_id, cp.status,
               cp.tenant_id, cp.graph_id, cp.step, cp.timestamp.isoformat(), cp.format_version,
               path_id, len(visited), with_tail(data, tail))
        place = None if known is None else known[:2]
        placed = None
        if known is not None and known[2] is None:  # written unless the table has the id
            placed = put_piece(db, cp.run_id, row, events, place, new=True)
            place = None  # it may have folded the log: PLACE is read again
        # An id is kept in one place: saving it again removes the older row (the log's row
        # keeps its events), and the new one counts as saved last.
        older = 0
        if placed is None:
            if known is None or known[2] is not False:
                older = db.execute(f"UPDATE log SET id = NULL WHERE id = ? AND {LIVE}",
                                   (cp.id,)).rowcount
                older += db.execute("DELETE FROM checkpoints WHERE id = ?", (cp.id,)).rowcount
                if older:
                    db.execute("DELETE FROM checkpoint_nodes WHERE checkpoint_id = ?",
                               (cp.id,))
            placed = put_piece(db, cp.run_id, row, events, place)
            assert placed is not None
        if cp.node_ids and cp.node_ids != [cp.node_id]:  # node_id alone is found by node_id
            db.executemany("INSERT OR IGNORE INTO checkpoint_nodes VALUES (?, ?, ?)",
                           [(cp.id, cp.run_id, node) for node in cp.node_ids])
        return (*placed, older > 0)

    async def save(self, checkpoint: Checkpoint, *, fence: Fence | None = None) -> None:
        """Persist ``checkpoint``; one with the same id is overwritten (and counts as saved last).

        With ``fence=(thread_id, token)`` the save is made under that claim, in the same
        transaction that checks it: it is refused (nothing written) unless ``token`` is the
        thread's current claim.

        Raises:
            InvalidArgument: not a Checkpoint, a bad id, or a value with no JSON form.
            StoreFileError: the file cannot be written (read-only, disk full, locked).
            StaleClaim: the fence's token is not the current claim.
        """
        cp = self._checked(checkpoint, "save")
        if fence is None:
            data = encode(self.path, cp)
            check_nesting(cp, data, "save")
            with self._tx() as db:
                self._write(db, cp, data)
            return
        token = rules.fence_token(fence, cp.thread_id, cp.id)
        await self.commit(cp.thread_id, token, run_id=cp.run_id, checkpoints=[cp])

    async def commit(
        self,
        thread_id: str,
        token: int,
        *,
        run_id: str,
        checkpoints: Sequence[Checkpoint] = (),
        events: Sequence[dict[str, Any]] = (),
        run: dict[str, Any] | None = None,
        release: bool = False,
    ) -> None:
        """Write checkpoints, events and the run record of ``run_id`` under the claim
        ``token`` in one transaction, all or nothing (see
        :class:`~pytest_graphflow._stores._protocol.ClaimingStore`); ``release``: also
        release the claim, in the same transaction (``StoreFeatures.folded_claims``; a
        commit that raises releases nothing).

        The token is checked inside the transaction (``BEGIN IMMEDIATE`` holds the file's
        write lock), so no other process can take the claim between the check and the write.

        Raises:
            StaleClaim: ``token`` is not the thread's current claim; nothing is written.
            InvalidArgument: a part is not of ``run_id`` on ``thread_id``.
            ParentNotLatest, MalformedCommit: seed 004's commit checks
                (:func:`~.._claims.check_lineage`); nothing is written.
        """
        if run is None and not release:
            found = plain_rows(self._facts, thread_id, token, run_id, checkpoints, events)
            if found is not None and self._commit_plain(*found):
                return
        # The events are serialised once, by event_row (which refuses what is not JSON); a
        # plain run record (the runtime's, while a run goes on) once, by plain_run_record.
        plain = None if run is None else plain_run_record(run_id, run)
        cps, normalised, record = check_commit(thread_id, run_id, checkpoints, events,
                                               None if plain else run, normalise=False)
        token = rules.check_token(token, "commit")
        encoded = [(self._checked(cp, "commit"), encode(self.path, cp)) for cp in cps]
        if type(events) is not DumpedEvents:  # not the runtime's commit: check its nesting
            for cp, data in encoded:
                check_nesting(cp, data, "commit")
        row = dumped_row if type(events) is DumpedEvents else event_row
        rows = [row(run_id, data, seq) for seq, data in normalised]
        first = cps[0].id if cps else ""
        facts, self._facts = self._facts, None  # kept only when this commit succeeds
        db = self._begin()
        try:
            # What this connection's last commit left is still the file's when nothing else
            # wrote since (see ._known): then nothing more is read.
            version = db.execute(VERSION).fetchone()[0]
            if facts is not None and facts.holds(version, thread_id, token, run_id):
                # In the log's live rows it knows; the log row's insert checks the table.
                stored = True if first in facts.live else None
            else:
                facts, held, stored = read_facts(db, version, thread_id, token, run_id, first)
                if held != token:
                    self._hold(db, thread_id, token)  # raises StaleClaim
            rules.check_lineage(thread_id, facts.latest, cps, normalised)
            if rows and facts.earliest:
                rows = [r for r in rows if r[1] >= facts.earliest]
            last, replaced = len(encoded), False
            for n, (cp, data) in enumerate(encoded, 1):  # the events go with the last one
                seq, done, older = self._write(db, cp, data, rows if n == last else (),
                                               (facts.top, facts.done, stored if n == 1
                                                else True), version)
                replaced = replaced or older
                facts.saved(cp.id, rules.to_micros(cp.timestamp), seq, done)
            if rows and not encoded:
                placed = put_piece(db, run_id, None, rows, (facts.top, facts.done))
                assert placed is not None
                facts.placed(*placed)
            if plain is not None:
                self._put_run(db, *plain)
            elif record is not None:
                self._put_run(db, record)
            if release:  # the token was checked above
                db.execute(RELEASE, (thread_id,))
        except BaseException as exc:
            failure = self._undo(db, exc)
            if failure is None:
                raise
            raise failure from None
        self._end(db)
        # a rewritten id may have been the thread's latest: read it again; a released
        # claim: the next commit under its token must find it gone
        if not replaced and not release:
            self._facts = facts

    def _commit_plain(self, cp: Checkpoint, events: Piece) -> bool:
        """:meth:`commit` of the runtime's plain step (see :mod:`._plain`): its checkpoint
        and its events, under what this connection's last commit knows. ``False`` (nothing
        written) when something else wrote the file since: the general commit reads it."""
        facts = self._facts
        assert facts is not None
        self._checked(cp, "commit")
        # encode(self.path, cp), inline (two frames and a repr fewer a step); what it refuses
        # it is called for, to raise as it does
        try:
            data = _SERIALIZER.to_json(cp, exclude=_NO_VISITED, warnings=False).decode()
            if not data.isascii():
                data.encode("utf-8")
        except (ValueError, UnicodeError, RecursionError):
            data = encode(self.path, cp)
        # rules.to_micros and the row's ``timestamp`` (``isoformat()``), inline for the
        # runtime's aware UTC times: the text's first 19 characters (up to the second) are
        # kept from the last step in the same second (isoformat's formatting was ~11 k
        # instructions of a step's ~470 k).
        ts = cp.timestamp
        if ts.tzinfo is UTC:
            ts_us = (ts - _EPOCH) // _MICROSECOND
            second = ts_us // 1_000_000
            micros = ts_us - second * 1_000_000
            if second != self._stamp_second:
                self._stamp_prefix = ts.isoformat(timespec="seconds")[:19]
                self._stamp_second = second
            stamp = f"{self._stamp_prefix}.{micros:06d}+00:00" if micros \
                else f"{self._stamp_prefix}+00:00"
        else:
            ts_us = rules.to_micros(ts)
            stamp = ts.isoformat()
        self._facts = None  # kept only when this commit succeeds
        db = self._begin()
        try:
            version = self._cur.execute(VERSION).fetchone()[0]
            if version != facts.version:
                self._rollback(db)
                return False
            seq = facts.top + 1
            if seq - FOLD_AT > facts.done or (cp.node_ids and cp.node_ids != [cp.node_id]):
                # the log is folded first, or the nodes get rows: the general write
                seq, done, older = self._write(db, cp, data, events,
                                               (facts.top, facts.done, None), version, ts_us)
            else:
                # _write's row, written unless the indexed table has the id (the log's live
                # rows do not: plain_rows checked)
                visited = cp.visited
                path_id, tail = self._paths.place(db, cp.run_id, visited, version)
                done, older = facts.done, False
                if not self._cur.execute(PUT_NEW, (
                        seq % FOLD_AT, seq, cp.run_id, cp.id, cp.thread_id, ts_us, cp.node_id,
                        cp.status, cp.tenant_id, cp.graph_id, cp.step, stamp,
                        cp.format_version, path_id, len(visited),
                        with_tail(data, tail), *events)).rowcount:
                    # the id is stored: the general write replaces its row (nothing written)
                    seq, done, older = self._write(db, cp, data, events,
                                                   (facts.top, done, True), version, ts_us)
            facts.saved(cp.id, ts_us, seq, done)
        except BaseException as exc:
            failure = self._undo(db, exc)
            if failure is None:
                raise
            raise failure from None
        self._end(db)
        if not older:  # a rewritten id may have been the thread's latest: read it again
            self._facts = facts
        return True

    async def get(self, checkpoint_id: str) -> Checkpoint | None:
        """The checkpoint with this id, or ``None``.

        Raises:
            UnsupportedFormat: it was written in another format version.
            StoreFileError: its row is damaged.
        """
        check_id(checkpoint_id, "checkpoint_id", "get")
        return self._newest(self._conn, "id = ?", (checkpoint_id,))

    async def latest(self, run_id: str) -> Checkpoint | None:
        """The run's most recent checkpoint (latest timestamp, then saved last), or ``None``."""
        check_id(run_id, "run_id", "latest")
        return self._newest(self._conn, "run_id = ?", (run_id,))

    async def load(self, run_id: str, node_id: str | None = None) -> Checkpoint | None:
        """The run's most recent checkpoint, or the most recent one for ``node_id`` (its
        ``node_id`` or one of its ``node_ids``), or ``None``."""
        check_id(run_id, "run_id", "load")
        if node_id is None:
            return await self.latest(run_id)
        check_id(node_id, "node_id", "load")
        return self._newest(
            self._conn,
            "run_id = ? AND (node_id = ? OR id IN (SELECT checkpoint_id FROM "
            "checkpoint_nodes WHERE run_id = ? AND node = ?))",
            (run_id, node_id, run_id, node_id),
        )

    def checkpointed_runs(self) -> list[str]:
        """The ids of the runs that have checkpoints, in the order they were first saved.

        A cheap index read (no checkpoint is parsed), for tools such as ``graphflow runs``.
        """
        rows = self._query("SELECT run_id, MIN(seq) FROM checkpoints GROUP BY run_id UNION ALL "
                           f"SELECT run_id, MIN(seq) FROM log WHERE id IS NOT NULL AND {LIVE} "
                           "GROUP BY run_id")
        first: dict[str, int] = {}
        for run, seq in rows:
            first[run] = min(seq, first.get(run, seq))
        return sorted(first, key=first.__getitem__)

    async def list(
        self,
        run_id: str | None = None,
        *,
        thread_id: str | None = None,
        limit: int | None = None,
        before: str | None = None,
    ) -> list[Checkpoint]:
        """Checkpoints of a run, a thread or the whole store, oldest first.

        Args:
            run_id: only this run's checkpoints.
            thread_id: only this thread's checkpoints.
            limit: at most this many: the newest ones (a page), still oldest first.
            before: only checkpoints older than the checkpoint with this id (the next page
                back is ``list(..., limit=n, before=page[0].id)``).

        Raises:
            CheckpointNotFound: ``before`` names no checkpoint.
        """
        check_list(run_id, thread_id, limit, before)
        where: list[str] = []
        params: list[Any] = []
        if run_id is not None:
            where.append("run_id = ?")
            params.append(run_id)
        if thread_id is not None:
            where.append("thread_id = ?")
            params.append(thread_id)
        if before is not None:
            found = self._query("SELECT ts_us, seq FROM checkpoints WHERE id = ? UNION ALL "
                                f"SELECT ts_us, seq FROM log WHERE id = ? AND {LIVE}",
                                (before, before))
            if not found:
                raise CheckpointNotFound(f"list(before={before!r}): the store has no such "
                                         "checkpoint; pass the id of a checkpoint of a page")
            where.append("(ts_us < ? OR (ts_us = ? AND seq < ?))")
            params.extend((found[0][0], found[0][0], found[0][1]))
        return self._pick(self._conn, " AND ".join(where) or "1", tuple(params), limit=limit)

    async def delete(self, checkpoint_id: str) -> bool:
        """Delete one checkpoint; ``True`` if it existed."""
        check_id(checkpoint_id, "checkpoint_id", "delete")
        with self._folded() as db:
            found = db.execute("SELECT run_id, path_id FROM checkpoints WHERE id = ?",
                               (checkpoint_id,)).fetchone()
            if found is None:
                return False
            db.execute("DELETE FROM checkpoint_nodes WHERE checkpoint_id = ?", (checkpoint_id,))
            db.execute("DELETE FROM checkpoints WHERE id = ?", (checkpoint_id,))
            self._gc_paths(db, found[0], [found[1]])
        return True

    def _gc_paths(self, db: sqlite3.Connection, run_id: str, dead: Sequence[int | None]
                  ) -> None:
        ids = [pid for pid in dead if pid is not None]
        if ids:
            db.execute(_GC_PATHS, (json.dumps(ids), run_id))
            self._paths.forget()

    async def fork(
        self,
        checkpoint_id: str,
        patch_state: Mapping[str, Any] | None = None,
        *,
        thread_id: str | None = None,
    ) -> str:
        """Clone a checkpoint into a new run and thread; return the new run id.

        The new ids derive from ``checkpoint_id`` exactly as in the in-memory store.
        ``patch_state`` is applied after cloning, as given (``GraphRuntime.afork`` checks it
        against the graph's state schema first).

        Raises:
            CheckpointNotFound: when ``checkpoint_id`` does not exist.
            InvalidArgument: a bad id, or a ``patch_state`` with no JSON form. Nothing is
                written.
            ForkTargetExists: when ``thread_id`` is given and the store holds a checkpoint of
                it (a fork only ever creates a new thread); nothing was changed.
        """
        check_fork(checkpoint_id, patch_state, thread_id)
        with self._folded() as db:
            source = self._first(db, f"{SELECT} WHERE id = ?", (checkpoint_id,))
            if source is None:
                raise CheckpointNotFound(
                    f"cannot fork checkpoint {checkpoint_id!r}: the store has no such checkpoint"
                )
            state = dict(source.state)
            if patch_state:
                state.update(rules.fork_patch(checkpoint_id, patch_state))
            if thread_id is not None and db.execute(
                    "SELECT 1 FROM checkpoints WHERE thread_id = ? LIMIT 1",
                    (thread_id,)).fetchone() is not None:
                raise rules.fork_target_exists(checkpoint_id, thread_id)
            if thread_id is not None and db.execute(
                    "SELECT 1 FROM claims WHERE thread_id = ? AND run_id IS NOT NULL",
                    (thread_id,)).fetchone() is not None:
                raise ThreadBusy(thread_id, None)  # a run is starting on it: not a new thread
            n = 0
            while True:
                token = derived_hex("fork", checkpoint_id, n)
                run_id, cid = f"run-{token}", f"cp-{token}-f"
                target = thread_id or f"thread-{token}"
                taken = db.execute(
                    "SELECT 1 FROM checkpoints WHERE run_id = ? OR id = ? OR thread_id = ? "
                    "UNION ALL SELECT 1 FROM claims WHERE thread_id = ? AND run_id IS NOT NULL "
                    "LIMIT 1",
                    (run_id, cid, target if thread_id is None else "",
                     target if thread_id is None else ""),
                ).fetchone()
                if taken is None:
                    break
                n += 1
                if n > 1000:  # pragma: no cover - defensive
                    raise ForkTargetExists(f"no free run id for a fork of {checkpoint_id!r}")
            forked = source.clone(
                id=cid, run_id=run_id, thread_id=thread_id or f"thread-{token}",
                parent_id=source.id, state=state,
                metadata={**source.metadata, "forked_from": source.id},
            )
            self._write(db, forked, encode(self.path, forked))
        return run_id

    async def waiting(
        self, *, tenant_id: str | None = None, limit: int | None = None,
        after: str | None = None, any_tenant: bool = False,
    ) -> WaitingPage:
        """The runs waiting for answers (a thread's latest checkpoint is ``interrupted``),
        with their questions and deadlines, in thread-id order (see :class:`Waiting`).

        Args:
            tenant_id: only threads of this tenant (``None``: threads without one).
            limit: at most this many (a page); ``None``: all.
            after: only threads whose id sorts after this one (the next page:
                ``after=page[-1].thread_id``).
            any_tenant: every tenant's threads (for a worker firing deadlines).

        Raises:
            InvalidArgument: a bad ``limit``, ``tenant_id`` or ``after``.
        """
        tenant, limit, after, anyone = check_waiting("SQLiteCheckpointStore", tenant_id,
                                                     limit, after, any_tenant)
        where = ["c.status = 'interrupted'", _THREAD_LATEST]
        params: list[Any] = []
        if not anyone:
            where.append("c.tenant_id IS ?")
            params.append(tenant)
        if after is not None:
            where.append("c.thread_id > ?")
            params.append(after)
        with self._reading(self._conn):  # both tables as of one moment
            return self._waiting(tenant, limit, after, anyone, where, params)

    def _waiting(self, tenant: str | None, limit: int | None, after: str | None,
                 anyone: bool, where: Sequence[str], params: Sequence[Any]) -> WaitingPage:
        # Threads with a checkpoint in the log are judged by their latest of both tables;
        # the others by the indexed table's partial index, as before.
        fresh = {t for (t,) in self._query("SELECT DISTINCT thread_id FROM log WHERE id IS "
                                           f"NOT NULL AND {LIVE}")}
        sql = (f"{SELECT} c WHERE {' AND '.join(where)} ORDER BY c.thread_id LIMIT ?")
        found = [cp for cp in self._checkpoints(
                     self._conn, sql, (*params, -1 if limit is None else limit + len(fresh)))
                 if cp.thread_id not in fresh]
        for thread in fresh:
            if after is not None and thread <= after:
                continue
            cp = self._newest(self._conn, "thread_id = ?", (thread,))
            if cp is not None and cp.status == "interrupted" and (
                    anyone or cp.tenant_id == tenant):
                found.append(cp)
        found.sort(key=lambda cp: cp.thread_id)
        return [waiting_row(cp) for cp in (found if limit is None else found[:limit])]

    async def prune(self, run_id: str, keep_last: int) -> int:
        """Delete all but the newest ``keep_last`` checkpoints of the run; return how many.

        The freed space goes back to the file system (incremental auto-vacuum).
        """
        check_id(run_id, "run_id", "prune")
        keep = rules.check_keep_last(keep_last)
        with self._folded() as db:
            rows = db.execute(f"SELECT id, path_id FROM checkpoints WHERE run_id = ? {_ORDER}",
                              (run_id,)).fetchall()
            gone = rows[: max(len(rows) - keep, 0)]
            doomed = [(cid,) for cid, _ in gone]
            if doomed:
                db.executemany("DELETE FROM checkpoint_nodes WHERE checkpoint_id = ?", doomed)
                db.executemany("DELETE FROM checkpoints WHERE id = ?", doomed)
                self._gc_paths(db, run_id, sorted({pid for _, pid in gone if pid is not None}))
        if doomed:
            self._give_back()
        return len(doomed)

    async def delete_thread(
        self, thread_id: str, *, tenant_id: str | None = None, now: datetime | None = None
    ) -> DeletedThread:
        """Delete the thread in one transaction: its checkpoints, the events, run records
        and artifacts of its runs, and its claim row; a thread the store does not know is a
        no-op (all zeros). Its fencing tokens are never issued again (see
        :mod:`.._deletion`), and the freed space goes back to the file system.

        Args:
            tenant_id: the caller's tenant; the thread's is the one on its latest checkpoint.
            now: the caller's clock: a claim expired by then does not hold the thread
                (``None``: every claim not released does).

        Raises:
            TenantMismatch: the thread belongs to another tenant; nothing is deleted.
            ThreadBusy: a claim on the thread is live; nothing is deleted.
        """
        thread_id, tenant, moment = check_delete_args(thread_id, tenant_id, now)
        with self._folded() as db:
            owner = db.execute(f"SELECT tenant_id FROM checkpoints WHERE thread_id = ? {_NEWEST}",
                               (thread_id,)).fetchone()
            claim, last = self._claim_of(db, thread_id)
            check_deletable(thread_id, tenant, owner, claim, moment)
            runs = dict.fromkeys(r for (r,) in db.execute(
                "SELECT run_id FROM checkpoints WHERE thread_id = ? GROUP BY run_id "
                "ORDER BY MIN(seq)", (thread_id,)))
            runs.update(dict.fromkeys(r for (r,) in db.execute(
                "SELECT run_id FROM runs WHERE thread_id = ? ORDER BY rowid", (thread_id,))))
            paths = db.execute("SELECT run_id, path_id FROM checkpoints WHERE thread_id = ?",
                               (thread_id,)).fetchall()
            db.execute("DELETE FROM checkpoint_nodes WHERE checkpoint_id IN (SELECT id FROM "
                       "checkpoints WHERE thread_id = ?)", (thread_id,))
            checkpoints = db.execute("DELETE FROM checkpoints WHERE thread_id = ?",
                                     (thread_id,)).rowcount
            events = records = artifacts = 0
            for run in runs:
                self._gc_paths(db, run, sorted({p for r, p in paths if r == run and p}))
                unpack_events(db, run)  # one row an event: counted as they are deleted
                events += db.execute("DELETE FROM events WHERE run_id = ?", (run,)).rowcount
                db.execute("DELETE FROM event_compactions WHERE run_id = ?", (run,))
                records += db.execute("DELETE FROM runs WHERE run_id = ?", (run,)).rowcount
                artifacts += db.execute("DELETE FROM artifacts WHERE run_id = ?",
                                        (run,)).rowcount
            if db.execute("DELETE FROM claims WHERE thread_id = ?", (thread_id,)).rowcount:
                raise_token_floor(db, last)
        if checkpoints or events or artifacts:
            self._give_back()
        return DeletedThread(thread_id, tuple(runs), checkpoints, events, records, artifacts)
