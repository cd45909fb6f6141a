"""Fenced commits in PostgreSQL (seed 004, SPEC §5): a run's checkpoints, events and run
record written together under its claim's token, or nothing at all.

The hot path — a step's checkpoint, its events and the run record — is one statement:
data-modifying CTEs that read the thread's claim row ``FOR SHARE`` and write only when the
token is the current claim's (the run record merged into the stored one in SQL, keeping its
keys' order). One statement is one transaction and one round trip; the share lock holds the
claim row until it ends, so no claim can change hands between the check and the write. A
commit of several checkpoints runs as a transaction of several statements, the claim row
share-locked first.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import psycopg

from ..._records._checkpoint import Checkpoint
from ..._records._json import DumpedEvents
from ...errors import GraphflowError, StaleClaim
from .. import _claims as rules
from .._args import check_commit, check_nesting
from .._protocol import Fence
from .._wire import dumped_row, event_row, with_visited
from ._conn import Cursor, PgConnections
from ._events import CLEAR, Batch, batch, clear_params, lock_events, write_events
from ._paths import TAIL, Path, PathBlocks
from ._plain import plain_step
from ._release import release_in, releasing
from ._sent import Sent

__all__ = ["NODE_IDS", "PgCommits", "SentCommit", "array_literal"]

_Rows = list[tuple[str, int, Any, str]]

_NO_VISITED = {"visited"}


NODE_IDS = "%s::text[]"
"""A checkpoint's ``node_ids`` column from its array literal (one text parameter, not an
array psycopg dumps element by element; :func:`array_literal`)."""


def array_literal(items: list[str]) -> str:
    """The PostgreSQL array literal of the texts ``items``: each quoted, its ``"`` and ``\\``
    escaped (read back as the same texts, whatever they hold)."""
    quoted = [f'"{i.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
              for i in items]
    return "{" + ",".join(quoted) + "}"


_RUN_COLUMNS = ("thread_id", "graph_id", "status", "tenant_id", "updated_at")

# ``{**old, **new}`` on JSON text, keeping the keys' order: the old keys in their order
# (values from ``new`` where it has them), then the keys only ``new`` has.
_MERGE = (
    "(SELECT json_object_agg(k, v ORDER BY pos)::text FROM ("
    "SELECT o.key AS k, COALESCE(n.value, o.value) AS v, o.pos FROM json_each(runs.data::json) "
    "WITH ORDINALITY AS o(key, value, pos) LEFT JOIN json_each(excluded.data::json) AS n "
    "ON n.key = o.key UNION ALL SELECT n.key, n.value, 1000000 + n.pos FROM "
    "json_each(excluded.data::json) WITH ORDINALITY AS n(key, value, pos) WHERE NOT EXISTS "
    "(SELECT 1 FROM json_each(runs.data::json) AS o WHERE o.key = n.key)) AS merged)"
)


_RUN_SETS = ", ".join(f"{c} = CASE WHEN %s THEN excluded.{c} ELSE runs.{c} END"
                      for c in _RUN_COLUMNS)

_RUN_RECORD = (f"rr AS (INSERT INTO runs (run_id, {', '.join(_RUN_COLUMNS)}, data) SELECT %s, "
               "%s, %s, %s, %s, %s, %s FROM fence WHERE ok ON CONFLICT (run_id) DO UPDATE SET "
               f"{_RUN_SETS}, data = {_MERGE})")
"""The CTE that upserts a run record (merged into the stored one) under the fence."""


def _run_record_params(record: dict[str, Any]) -> list[Any]:
    values = [None if record.get(c) is None else str(record[c]) for c in _RUN_COLUMNS]
    return [record["run_id"], *values, json.dumps(record), *(c in record for c in _RUN_COLUMNS)]


_LATEST = ("SELECT id FROM checkpoints WHERE thread_id = %s ORDER BY ts_us DESC, "
           "save_order DESC LIMIT 1")

def _fence(events: bool) -> str:
    # ``claim``: the thread's claim row, share-locked (no row: the thread has none), with the
    # thread's latest checkpoint, whether the claim is held and, with events, whether their
    # row may be inserted as it is (``c``; it also asks that the claim row locked is the
    # version the statement's snapshot sees: an unfenced merge committed since marks it,
    # MARK_CLAIMS). ``fence`` adds ``ok``: held, and the thread's latest is the step's
    # parent (or the commit's lineage needs no parent). One row read by each write and by
    # the answer: a small plan, which the server sets up afresh every step.
    clear = (f"{CLEAR} AND xmin = (SELECT xmin FROM claims AS snap WHERE snap.thread_id = %s) "
             "AS c, " if events else "")
    return (f"WITH claim AS MATERIALIZED (SELECT token, run_id, ({_LATEST}) AS latest, {clear}"
            "run_id IS NOT NULL AND token = %s AS held FROM claims WHERE thread_id = %s "
            "FOR SHARE), fence AS (SELECT *, held AND (%s OR latest IS NOT DISTINCT FROM %s)"
            f"{' AND c' if events else ''} AS ok FROM claim)")


# A plain insert (an upsert writes one more WAL record and probes the primary key first): a
# checkpoint whose id is taken fails the statement, and the transaction path upserts it.
# Its path prefix (._paths): a chain's id and length; a new chain's id is the ``pa`` CTE's.
# Its save order is the column's default (_schema.SAVE_ORDER_DEFAULT).
def _cp(pa: int) -> str:
    chain = "(SELECT chain FROM pa)" if pa == 2 else "%s"
    return ("cp AS (INSERT INTO checkpoints (id, run_id, thread_id, graph_id, node_id, "
            "node_ids, step, ts_us, status, tenant_id, format_version, data, path_chain, "
            f"path_len) SELECT %s, %s, %s, %s, %s, {NODE_IDS}, %s, %s, %s, %s, %s, %s, "
            f"{chain}, %s FROM fence WHERE ok)")


_PA = {
    1: "pa AS (INSERT INTO paths (chain, upto, run_id, nodes) SELECT %s, %s, %s, %s "
       "FROM fence WHERE ok)",
    2: "pa AS (INSERT INTO paths (chain, upto, run_id, nodes) SELECT nextval('path_chains'), "
       "%s, %s, %s FROM fence WHERE ok RETURNING chain)",
}
"""The path block a step adds (1: to its run's chain; 2: the first of a new chain, whose id
the statement answers), written when ``ok`` holds (see :mod:`._paths`)."""

_EV = ("ev AS (INSERT INTO events (run_id, seq, last_seq, seqs, data) "
       "SELECT %s, %s, %s, %s, %s FROM fence WHERE ok)")
"""The step's events as one row (see :mod:`._events`), written when ``ok`` holds."""

# Data-modifying CTEs run whether or not the final SELECT reads them (no RETURNING needed).
_ANSWER = " SELECT token, run_id, held, latest, ok"

_STATEMENTS = {
    (cp, ev, rr, pa): ", ".join([_fence(ev), *([_PA[pa]] if pa else []),
                                 *([_cp(pa)] if cp else []), *([_EV] if ev else []),
                                 *([_RUN_RECORD] if rr else [])])
    + _ANSWER + (", c" if ev else ", true") + (", (SELECT chain FROM pa)" if pa == 2 else "")
    + " FROM fence"
    for cp in (False, True) for ev in (False, True) for rr in (False, True)
    for pa in ((0, 1, 2) if cp else (0,))
}
"""The fenced statement of each shape (with a checkpoint, events, a run record, a path
block), built once: the same string object every step (psycopg's cache of prepared
statements hashes it once)."""

_STEPS = [_STATEMENTS[True, True, False, pa] for pa in (0, 1, 2)]
"""A plain step's statements: a checkpoint and events, no run record; no path block, a
block of its run's chain, the first of a new chain (:mod:`._paths`)."""

_STEP = _STEPS[0]
"""A plain step's statement when no path block is due (most steps)."""


def _fenced_statement(
    thread_id: str, token: int, run_id: str, cp_row: tuple[Any, ...] | None,
    piece: Batch | None, record: dict[str, Any] | None = None, latest: str | None = None,
    free: bool = True, path: Path = (0, [], [0, 0]),
) -> tuple[str, list[Any]]:
    """The one statement writing a checkpoint (``cp_row``, if any), the events' row
    (``piece``, :func:`~._events.batch`'s, if any) and the run record under the fence, when
    the thread's latest checkpoint is ``latest`` (what seed 004's checks passed against); it
    returns the claim's token and run id, whether the fence held, the thread's latest
    checkpoint id before the write, whether it wrote, and whether the events' row could be
    inserted as it is (else the transaction path merges them); ``path``: the checkpoint's
    path (:data:`._paths.Path`), its row ``cp_row`` the one :mod:`._paths` places."""
    params: list[Any] = [thread_id]
    if piece is not None:
        first, last, seqs, data = piece
        params.extend(clear_params(run_id, first, last))
        params.append(thread_id)
    params.extend((token, thread_id, free, latest))
    pa = 0
    if cp_row is not None:
        pa, block, cols = path
        params.extend(block)
        params.extend(cp_row)
        params.extend(cols)
    if piece is not None:
        params.extend((run_id, first, last, seqs, data))
    if record is not None:
        params.extend(_run_record_params(record))
    return _STATEMENTS[cp_row is not None, piece is not None, record is not None, pa], params


def _no_surrogate(visited: Sequence[str]) -> bool:
    """Whether no node name of ``visited`` holds a surrogate (which UTF-8 refuses)."""
    try:
        "".join(visited).encode()
    except UnicodeError:
        return False
    return True


class PgCommits:
    """``commit`` and fenced ``save`` of :class:`PostgresCheckpointStore` (a mixin)."""

    supports_fencing = True
    """``save`` takes ``fence=(thread_id, token)`` and the store has ``commit``."""

    def _tx(self, *, pipeline: bool = False) -> AbstractAsyncContextManager[Cursor]:
        raise NotImplementedError  # pragma: no cover - the store's

    def _one(self) -> AbstractAsyncContextManager[Cursor]:  # pragma: no cover - the store's
        raise NotImplementedError

    _pg: PgConnections

    _checked_run: tuple[Any, ...]
    """The run ids ``_checked`` checked last (:class:`~.._args.CheckedCheckpoints`')."""

    _plain_ids: tuple[str, str] | None = None
    """The ``(thread_id, run_id)`` the last general commit checked as ids: a plain step of
    them skips those checks (:mod:`._plain`)."""

    _UPSERT: str = ""
    """The store's checkpoint upsert statement."""

    _paths: PathBlocks

    @staticmethod
    def _checkpoint_row(cp: Checkpoint, exclude: set[str] | None = None
                        ) -> tuple[Any, ...]:  # pragma: no cover - the store's
        raise NotImplementedError

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
        """Write ``checkpoints`` (in order), ``events`` and the run record ``run`` of
        ``run_id`` atomically under the claim ``token`` on ``thread_id``; ``release``: and
        release the claim in the same transaction (a leg's last commit,
        ``StoreFeatures.folded_claims``).

        Raises:
            StaleClaim: ``token`` is not the thread's current claim; nothing is written.
            InvalidArgument: a part is not of ``run_id`` on ``thread_id``; nothing is written.
            ParentNotLatest, MalformedCommit: seed 004's commit checks
                (:func:`~.._claims.check_lineage`); nothing is written.
        """
        rows: _Rows | None
        pairs: list[tuple[int, Any]] | None
        piece: Batch | None
        plain = plain_step(self._plain_ids, self._checked_run, thread_id, token, run_id,
                           checkpoints, events, run)
        if plain is not None:  # the runtime's plain step, its ids checked already
            cps: list[Any] = [plain[0]]
            piece, free = plain[1], plain[2]
            log, cut, lean_row = self._plain_row(plain[0])
            sql, params, chain, path = self._plain_statement(thread_id, token, run_id, plain,
                                                             log, cut, lean_row)
            cp_rows = None
            rows = pairs = record = None
            latest = plain[0].parent_id
        else:
            cps, pairs, record = check_commit(thread_id, run_id, checkpoints, events, run,
                                              normalise=False)
            token = rules.check_token(token, "commit")
            # Serialised once, by the rule the SQLite store uses (the runtime's own events
            # only serialised: their values were checked where they entered the run).
            row = dumped_row if type(events) is DumpedEvents else event_row
            rows = [row(run_id, data, seq) for seq, data in pairs]
            checked = [self._checked(cp, "commit") for cp in cps]
            # The runtime's one checkpoint past its path's first block (a leg's end, an
            # interrupt): serialised once, as its lean row below, when its path holds no
            # surrogate (the one thing the whole row's JSON refuses that the lean row's
            # does not: the lean row's tail falls back to json.dumps); the transaction path
            # makes the whole row if it runs.
            lean_only = (len(cps) == 1 and type(events) is DumpedEvents
                         and len(cps[0].visited) >= TAIL and _no_surrogate(cps[0].visited))
            cp_rows = None if lean_only else [self._checkpoint_row(cp) for cp in checked]
            if cp_rows is not None and type(events) is not DumpedEvents:  # not the runtime's
                for cp, cp_row in zip(cps, cp_rows, strict=True):
                    check_nesting(cp, cp_row[-1], "commit")
            self._plain_ids = (thread_id, run_id)  # both checked as ids
            piece = batch(rows) if rows else None
            # A step: one statement, one round trip, written when the thread's latest is
            # the step's parent; another latest is judged by the shared rule, and once found
            # sound, written against it.
            free = rules.lineage_free(cps, pairs)
            latest = cps[0].parent_id if cps else None
            try:
                rules.check_lineage(thread_id, latest, cps, pairs)
            except GraphflowError:  # judged below, once the claim is known to hold
                free, latest = False, ""  # no checkpoint has this id: nothing is written
            lean_row, path = None, (0, [], [0, 0])
            log, chain, cut = (), 0, 0
            if len(cps) == 1:
                cp = cps[0]
                log, chain, cut, tail, path = self._paths.place(run_id, cp.visited)
                if cut:
                    lean = self._checkpoint_row(cp, _NO_VISITED)
                    lean_row = (*lean[:-1], with_visited(lean[-1], tail))
                else:
                    if cp_rows is None:  # the whole path in the row after all
                        cp_rows = [self._checkpoint_row(cp)]
                    lean_row = cp_rows[0]
            sql, params = _fenced_statement(thread_id, token, run_id, lean_row, piece, record,
                                            latest, free, path)
        if release:  # the leg's last commit: the release in its statement
            sql, params = releasing(sql, params, thread_id, token, _ANSWER)
        for _ in range(3) if len(cps) <= 1 else ():
            try:
                found = await self._pg.fetch_one(sql, params)
            except psycopg.errors.UniqueViolation:  # the checkpoint's id is taken (the step
                # inserts, not upserts: no speculative insertion), a racing writer's events
                # row starts at the same seq, or the path block is there (a statement whose
                # answer was lost): the transaction below upserts and merges
                self._paths.forget(run_id)
                break
            except BaseException:
                self._paths.forget(run_id)  # written or not: a new chain next time
                raise
            if _written(found, thread_id, token):
                if path[0]:
                    self._paths.wrote(run_id, log, found[6] if path[0] == 2 else chain, cut)
                return
            found_latest, clear = found[3], found[5]
            if not clear:  # events to merge into the log: the transaction below
                break
            if pairs is None:
                pairs = [(e["seq"], e) for e in events]
            rules.check_lineage(thread_id, found_latest, cps, pairs)
            latest = found_latest
            sql, params = _fenced_statement(thread_id, token, run_id, lean_row, piece, record,
                                            latest, free, path)
            if release:
                sql, params = releasing(sql, params, thread_id, token, _ANSWER)
        if rows is None:  # the plain step's events, as the general commit serialises them
            rows = [dumped_row(run_id, e, e["seq"]) for e in events]
        if cp_rows is None:  # the transaction path keeps a row's whole path in its data
            cp_rows = [self._checkpoint_row(cp) for cp in cps]
        if pairs is None:
            pairs = [(e["seq"], e) for e in events]
        async with self._tx() as cur:
            if rows:  # the events lock before the claim row, as an unfenced merge takes them
                await lock_events(cur, run_id, mark=False)
            await cur.execute("SELECT run_id, token FROM claims WHERE thread_id = %s FOR SHARE",
                              (thread_id,))
            found = await cur.fetchone()
            if found is None or found[0] is None or found[1] != token:
                raise StaleClaim(thread_id, token,
                                 None if found is None or found[0] is None else int(found[1]))
            await cur.execute(_LATEST, (thread_id,))
            top = await cur.fetchone()
            rules.check_lineage(thread_id, None if top is None else top[0], cps, pairs)
            for cp_row in cp_rows:
                await cur.execute(self._UPSERT, cp_row)
            if rows:
                await write_events(cur, run_id, rows, fenced=True)
            if record is not None:
                await self._write_run(cur, record)
            if release:
                await release_in(cur, thread_id, token)

    def _plain_row(self, cp: Checkpoint) -> tuple[Any, int, tuple[Any, ...]]:
        """``(log, cut, row)`` of the runtime's plain step's checkpoint ``cp``: its path's
        log and cut (:meth:`PathBlocks.shape`) and its row, keeping the path's tail when
        the path is cut."""
        log, cut, tail = self._paths.shape(cp.visited)
        if cut:  # the row keeps the path's tail, the chain the rest
            lean = self._checkpoint_row(cp, _NO_VISITED)
            text = lean[-1]  # with_visited(text, tail), inline (a frame a step fewer)
            return log, cut, (*lean[:-1], f"{text[:-1]},\"visited\":{tail}}}" if tail else text)
        return log, cut, self._checkpoint_row(cp)

    def _plain_statement(self, thread_id: str, token: int, run_id: str,
                         plain: tuple[Checkpoint, Batch, bool], log: Any, cut: int,
                         lean_row: tuple[Any, ...]) -> tuple[str, list[Any], int, Path]:
        """The step statement of the runtime's plain step ``plain`` (:func:`plain_step`'s
        answer; its checkpoint's :meth:`_plain_row` ``log``, ``cut`` and ``lean_row``):
        ``(sql, params, chain, path)``, its path placed by the chain the store last wrote
        (:meth:`PathBlocks.block`)."""
        cp, piece, free = plain
        chain, path = self._paths.block(run_id, log, cut)
        first, last, seqs, data = piece  # _fenced_statement's parameters, in its order
        params = [thread_id, run_id, last, first, first, first, run_id, thread_id, token,
                  thread_id, free, cp.parent_id, *path[1], *lean_row, *path[2], run_id, first,
                  last, seqs, data]
        return _STEPS[path[0]], params, chain, path

    def commit_sent(self, thread_id: str, token: int, *, run_id: str,
                    checkpoints: Sequence[Checkpoint], events: Sequence[dict[str, Any]]
                    ) -> SentCommit | None:
        """:meth:`commit` of the runtime's plain step (one checkpoint and its dumped events,
        no run record, of the run and thread the last commit checked), made ready to be
        sent without waiting for its answer (``StoreFeatures.sent_commits``): its rows
        serialised now, its statement sent by :meth:`SentCommit.send` (once the commit
        before it is settled), its answer read by :meth:`SentCommit.settled`, which the
        runtime awaits before anything depends on it. ``None``: not such a step:
        :meth:`commit` it."""
        plain = plain_step(self._plain_ids, self._checked_run, thread_id, token, run_id,
                           checkpoints, events, None)
        if plain is None:
            return None
        return SentCommit(self, plain, self._plain_row(plain[0]),
                          (thread_id, token, run_id, checkpoints, events))

    def _checked(self, checkpoint: object, where: str) -> Checkpoint:  # pragma: no cover
        raise NotImplementedError

    @staticmethod
    async def _write_run(cur: Cursor, data: dict[str, Any]) -> None:  # pragma: no cover
        raise NotImplementedError

    async def _save_fenced(self, checkpoint: Checkpoint, fence: Fence) -> None:
        token = rules.fence_token(fence, checkpoint.thread_id, checkpoint.id)
        await self.commit(checkpoint.thread_id, token, run_id=checkpoint.run_id,
                          checkpoints=[checkpoint])



def _written(found: Any, thread_id: str, token: int) -> bool:
    """Whether a step statement's answer ``found`` (its row) says it wrote.

    Raises:
        StaleClaim: the thread has no claim row, or ``token`` is not its claim's.
    """
    if found is None:  # the thread has no claim row
        raise StaleClaim(thread_id, token, None)
    current, holder, held, _latest, written = found[:5]
    if not held:
        raise StaleClaim(thread_id, token, None if holder is None else int(current))
    return bool(written)


class SentCommit:
    """A plain step's commit (:meth:`PgCommits.commit_sent`): serialised, then sent
    (:meth:`send`), then settled (:meth:`settled`)."""

    __slots__ = ("ahead", "args", "placed", "plain", "row", "sent", "store")

    def __init__(self, store: PgCommits, plain: tuple[Checkpoint, Batch, bool],
                 row: tuple[Any, int, tuple[Any, ...]],
                 args: tuple[str, int, str, Sequence[Checkpoint], Sequence[dict[str, Any]]]
                 ) -> None:
        self.store = store
        self.plain = plain
        self.row = row
        self.args = args
        self.sent: Sent | None = None
        self.placed = (0, 0)  # the chain its path was placed by and its block's kind
        # Its statement made now, while the commit before it is on the wire: its path placed
        # by the chain last written (right unless that commit changes it: ``seen``) and its
        # parameters dumped for the connection (``send`` then only sends them).
        thread_id, token, run_id, _cps, _events = args
        log, cut, lean_row = row
        seen = store._paths.seen(run_id)
        made = store._plain_statement(thread_id, token, run_id, plain, log, cut, lean_row)
        self.ahead = (seen, made, store._pg.ready_one(made[0], made[1]))

    def send(self) -> bool:
        """Send the step's statement, its path placed by the chains written so far (the
        commit before it settled); ``False``: nothing was sent (its connection cannot take
        it now: ``commit`` it)."""
        store = self.store
        thread_id, token, run_id, _cps, _events = self.args
        log, cut, lean_row = self.row
        seen, (sql, params, chain, path), dumped = self.ahead
        if store._paths.seen(run_id) is not seen:  # the commit before wrote a block (or not)
            sql, params, chain, path = store._plain_statement(thread_id, token, run_id,
                                                              self.plain, log, cut, lean_row)
            dumped = None
        sent = store._pg.send_one(sql, params, dumped)
        if sent is None:
            return False
        self.sent = sent
        self.placed = (chain, path[0])
        return True

    def send_behind(self, before: SentCommit) -> bool:
        """:meth:`send` while ``before`` (the run's commit sent just before it) is still
        unanswered: on the same connection, after it (libpq's pipeline; the server runs
        them in order, each its own transaction). Its fence refuses it unless ``before``
        wrote (its parent is ``before``'s checkpoint), so it writes nothing if that one does
        not, and :meth:`settled` then commits it the general way. ``False``: not now — its
        path is placed by the chain ``before`` writes a block of, or its lineage is free of
        the thread's latest (its fence would not wait for ``before``'s checkpoint) — or
        its connection cannot take it; the caller settles ``before`` first."""
        if before.placed[1] or self.plain[2]:
            return False
        return self.send()

    async def dropped(self) -> None:
        """Read the answer to this commit, sent behind one that failed, and do nothing else
        (its fence refused it: its parent was not written; the run that sent it is put
        back to before either)."""
        self.store._paths.forget(self.args[2])
        if self.sent is not None:
            await self.store._pg.answer(self.sent)

    async def settled(self) -> None:
        """Read the sent commit's answer and finish it as :meth:`PgCommits.commit` does:
        written, or done again by ``commit`` when the statement did not write (a lineage to
        judge, events to merge, an id taken), which judges it the general way.

        Raises:
            StaleClaim, ParentNotLatest, psycopg.Error: what ``commit`` raises.
        """
        store = self.store
        thread_id, token, run_id, checkpoints, events = self.args
        assert self.sent is not None  # (sent)
        try:
            found = await store._pg.answer(self.sent)
        except psycopg.errors.UniqueViolation:  # (commit's case: nothing was written)
            store._paths.forget(run_id)
        except BaseException:
            store._paths.forget(run_id)  # written or not: a new chain next time
            raise
        else:
            if _written(found, thread_id, token):
                chain, kind = self.placed
                if kind:
                    log, cut, _row = self.row
                    store._paths.wrote(run_id, log, found[6] if kind == 2 else chain, cut)
                return
        await store.commit(thread_id, token, run_id=run_id, checkpoints=checkpoints,
                           events=events)
