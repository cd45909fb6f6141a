"""``PostgresCheckpointStore``: a store in a PostgreSQL database shared by many processes on
many machines (SPEC §5, seeds 002–004), with the SQLite store's semantics.

Each operation is one transaction. What must not interleave between processes is decided by
the server: a thread's claim row is locked (``SELECT ... FOR UPDATE``) while a claim, renewal
or release decides; a run's event log and a fork source are serialised by transaction-scoped
advisory locks; save order comes from a sequence. Nothing here is a process-local lock, so
workers on different hosts get the same guarantees as tasks in one process.

Needs the ``postgres`` extra (``pip install "pytest-graphflow[postgres]"``: psycopg 3 and
psycopg-pool).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any

from ..._records._checkpoint import FORMAT_VERSION, Checkpoint
from ..._records._checks import check_id
from ..._records._ids import derived_hex
from ...errors import CheckpointNotFound, ForkTargetExists, InvalidArgument
from .. import _claims as rules
from .._args import (
    CheckedCheckpoints,
    check_events,
    check_fork,
    check_list,
    check_nesting,
    check_run_record,
)
from .._closing import ClosingStore
from .._deletion import DeletedThread, check_delete_args
from .._features import StoreFeatures
from .._protocol import Fence
from .._waiting import WaitingPage, check_waiting, waiting_row
from .._wire import checkpoint_json, event_row
from ._claims import PgClaims
from ._commit import NODE_IDS, PgCommits, array_literal
from ._conn import Cursor, PgConnections, check_schema_name, on_plain_asyncio, run_now
from ._delete import delete_thread
from ._events import compact, lock_events, read_events, write_events
from ._paths import PREFIX, PathBlocks, joined
from ._queue import PgQueue
from ._schema import SCHEMA_VERSION, drop_tables, ensure_schema

__all__ = ["SCHEMA_VERSION", "PostgresCheckpointStore"]

_THREAD_LATEST = (
    "NOT EXISTS (SELECT 1 FROM checkpoints d WHERE d.thread_id = c.thread_id AND "
    "(d.ts_us > c.ts_us OR (d.ts_us = c.ts_us AND d.save_order > c.save_order)))")
"""``c`` is its thread's latest checkpoint (latest timestamp, then saved last)."""

_Records = list[dict[str, Any]]

_COLUMNS = f"id, format_version, data, path_len, {PREFIX}"
_ORDER = "ORDER BY ts_us, save_order"
_NEWEST = "ORDER BY ts_us DESC, save_order DESC LIMIT 1"
_UPSERT = (
    "INSERT INTO checkpoints (id, run_id, thread_id, graph_id, node_id, node_ids, step, ts_us, "
    f"save_order, status, tenant_id, format_version, data) VALUES (%s, %s, %s, %s, %s, {NODE_IDS}, "
    "%s, %s, nextval('save_order'), %s, %s, %s, %s) ON CONFLICT (id) DO UPDATE SET "
    "path_chain = 0, path_len = 0, "
    "run_id = excluded.run_id, thread_id = excluded.thread_id, graph_id = excluded.graph_id, "
    "node_id = excluded.node_id, node_ids = excluded.node_ids, step = excluded.step, "
    "ts_us = excluded.ts_us, save_order = excluded.save_order, status = excluded.status, "
    "tenant_id = excluded.tenant_id, format_version = excluded.format_version, "
    "data = excluded.data"
)


_GET = f"SELECT {_COLUMNS} FROM checkpoints WHERE id = %s"
_LATEST_OF_RUN = f"SELECT {_COLUMNS} FROM checkpoints WHERE run_id = %s {_NEWEST}"
_LATEST_OF_NODE = (f"SELECT {_COLUMNS} FROM checkpoints WHERE run_id = %s AND (node_id = %s "
                   f"OR %s = ANY(node_ids)) {_NEWEST}")


_NODE_IDS_JSON: dict[tuple[str, ...], str] = {}
"""The array literal of each list of node ids seen (a graph's few: a step's list is one of its
nodes' or supersteps'), kept up to :data:`_NODE_IDS_KEPT` of them."""

_NODE_IDS_KEPT = 4096


def _node_ids_json(node_ids: list[str]) -> str:
    """The array literal of ``node_ids`` (:func:`._commit.array_literal`), once per list."""
    key = tuple(node_ids)
    text = _NODE_IDS_JSON.get(key)
    if text is None:
        if len(_NODE_IDS_JSON) >= _NODE_IDS_KEPT:
            _NODE_IDS_JSON.clear()
        text = _NODE_IDS_JSON[key] = array_literal(node_ids)
    return text


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SERIALIZER = Checkpoint.__pydantic_serializer__
_MICROSECOND = timedelta(microseconds=1)


def _row(cp: Checkpoint, exclude: set[str] | None = None) -> tuple[Any, ...]:
    visited: Any = cp.visited
    if exclude is None and type(visited) is not tuple:  # the run's snapshot of its path
        cp.__dict__["visited"] = visited.as_tuple()  # (StoreFeatures.visited_snapshots: a
        # row with all of it, a short path's: written as its tuple, the same JSON)
    node_ids = cp.node_ids
    try:  # _node_ids_json's, without its call a step
        ids = _NODE_IDS_JSON[tuple(node_ids)]
    except KeyError:
        ids = _node_ids_json(node_ids)
    moment = cp.timestamp
    try:  # checkpoint_json(cp, "the PostgreSQL store", exclude), inline (a frame a step fewer)
        data: str = _SERIALIZER.to_json(cp, exclude=exclude, warnings=False).decode()
        if not data.isascii():
            data.encode("utf-8")
    except (ValueError, UnicodeError, RecursionError):
        data = checkpoint_json(cp, "the PostgreSQL store", exclude)  # raises its message
    return (cp.id, cp.run_id, cp.thread_id, cp.graph_id, cp.node_id, ids, cp.step,
            rules.to_micros(moment) if moment.tzinfo is None else
            (moment - _EPOCH) // _MICROSECOND,  # to_micros' of an aware time, inline
            cp.status, cp.tenant_id, cp.format_version, data)


def _parse(row: tuple[str, int, str, int, str | None]) -> Checkpoint:
    cid, version, data, length, prefix = row
    if version != FORMAT_VERSION:
        raise rules.unsupported_format(cid, version)
    cp = Checkpoint.model_validate_json(data)
    return joined(cp, length, prefix) if length else cp


def _lock_key(kind: str, name: str) -> tuple[str]:
    return (f"graphflow-{kind}:{name}",)


_ADVISORY = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"


class PostgresCheckpointStore(CheckedCheckpoints, PgClaims, PgCommits, PgQueue, ClosingStore):
    """A durable :class:`CheckpointStore` in a PostgreSQL database, for workers on many hosts.

    The same data and answers as :class:`SQLiteCheckpointStore`: checkpoints, run records,
    ordered event logs with compaction, artifacts, thread claims with fencing tokens (the
    claim ``ttl`` measured on the claiming runtime's clock), retention and thread deletion.
    Tables live in ``schema`` (created, or migrated, when the store opens).

    Open it with ``async with PostgresCheckpointStore(dsn) as store:`` (or ``await
    store.aopen()``) on an asyncio loop to use psycopg's async connection pool there; used
    from sync code, trio or the testing runtime's virtual-time loop, it calls the server
    synchronously on one connection per thread, as the SQLite store does.

    Args:
        dsn: a libpq connection string or URI (``"postgresql://user@host/db"``).
        schema: the schema holding the tables (default ``"graphflow"``; created if missing);
            stores on different schemas of one database are independent. A schema that holds
            tables of anything but a store (an application's, even ``public``'s) is refused.
        claim_ttl: seconds a claim stays live unless renewed, on the claiming runtime's clock.
        pool_size: the async pool's maximum number of connections.

    Raises:
        InvalidArgument: a bad schema name (not lower-case letters, digits and ``_``, a
            reserved word), ttl or pool size, or a schema holding tables that are not a
            store's (nothing in it is changed).
        UnsupportedFormat: the schema was written by a newer build.
        psycopg.OperationalError: the server cannot be reached.
    """

    records_events = True
    """The runtime records every run's events and run record here (durable inspection)."""

    pages_history = True
    """:meth:`list` takes ``limit`` and ``before`` (``GraphRuntime.history`` pages with them)."""

    features = StoreFeatures(claims=True, fencing=True, commit=True, events=True,
                             run_records=True, history_pages=True, artifacts=True, prune=True,
                             delete_thread=True, queue=True, waiting=True, tenants=True,
                             folded_claims=True, sent_commits=True, visited_snapshots=True)
    """Durable: claims with fencing, atomic commits of events and run records, paged history,
    artifacts, prune, thread deletion, waiting runs and the workers' queue; a new run's
    free-run-id read rides on its claim, a leg's release on its last commit; a plain step's
    commit is sent and answered while the next step's ``pure`` node runs."""

    _UPSERT = _UPSERT

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "graphflow",
        claim_ttl: float = rules.DEFAULT_CLAIM_TTL,
        pool_size: int = 4,
    ) -> None:
        try:
            self.schema: str = check_schema_name(schema)
        except ValueError as exc:
            raise InvalidArgument(f"PostgresCheckpointStore({exc})") from None
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise InvalidArgument(f"PostgresCheckpointStore(pool_size={pool_size!r}): the pool "
                                  "size is an int >= 1")
        self.claim_ttl: float = rules.check_ttl(claim_ttl, "PostgresCheckpointStore")
        self.dsn: str = dsn
        self._pg = PgConnections(dsn, self.schema, pool_size)
        self._paths = PathBlocks()
        try:
            run_now(self._pg.sync_tx(ensure_schema, self.schema, repr(self)))
        except BaseException:
            self._pg.close()
            raise

    def __repr__(self) -> str:
        return f"PostgresCheckpointStore(schema={self.schema!r})"

    # -- opening and closing --

    async def aopen(self) -> PostgresCheckpointStore:
        """Use psycopg's async connection pool on the running asyncio loop; returns ``self``."""
        await self._pg.open_pool()
        return self

    async def aclose(self) -> None:
        """Close the pool and every connection; closing twice is harmless."""
        await self._pg.aclose()

    def close(self) -> None:
        """Close the connections (from sync code); closing twice is harmless."""
        self._pg.close()

    async def __aenter__(self) -> PostgresCheckpointStore:
        if on_plain_asyncio():
            await self.aopen()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def drop(self) -> None:
        """Drop the store's tables with everything in them (irreversible), and its schema when
        nothing else is in it; close the store after. Tables that are not the store's stay."""
        run_now(self._pg.sync_tx(drop_tables, self.schema))

    def _tx(self, *, pipeline: bool = False) -> AbstractAsyncContextManager[Cursor]:
        return self._pg.tx(pipeline=pipeline)

    def _one(self) -> AbstractAsyncContextManager[Cursor]:
        return self._pg.one()

    # -- checkpoints (seed 003) --

    @staticmethod
    async def _first(cur: Cursor, sql: str, params: tuple[Any, ...]) -> Checkpoint | None:
        await cur.execute(sql, params)
        row = await cur.fetchone()
        return None if row is None else _parse(row)

    async def _read_one(self, sql: str, params: tuple[Any, ...]) -> Checkpoint | None:
        """The checkpoint one statement reads (a statement of its own, as a step's is sent)."""
        row = await self._pg.fetch_one(sql, params)
        return None if row is None else _parse(row)

    _checkpoint_row = staticmethod(_row)
    """A checkpoint's row of parameters (``_row`` itself: no call in between a step)."""

    async def save(self, checkpoint: Checkpoint, *, fence: Fence | None = None) -> None:
        """Persist ``checkpoint``; one with the same id is overwritten (and counts as saved last).

        With ``fence=(thread_id, token)`` the save is made under that claim, in the statement
        that checks it: it is refused (nothing written) unless ``token`` is the thread's
        current claim.

        Raises:
            InvalidArgument: not a Checkpoint, a bad id, or a value with no JSON form.
            StaleClaim: the fence's token is not the current claim.
        """
        cp = self._checked(checkpoint, "save")
        if fence is not None:
            await self._save_fenced(cp, fence)
            return
        row = _row(cp)
        check_nesting(cp, row[-1], "save")
        async with self._one() as cur:
            await cur.execute(_UPSERT, row)

    async def get(self, checkpoint_id: str) -> Checkpoint | None:
        """The checkpoint with this id, or ``None``.

        Raises:
            UnsupportedFormat: it was written in another format version.
        """
        check_id(checkpoint_id, "checkpoint_id", "get")
        return await self._read_one(_GET, (checkpoint_id,))

    async def latest(self, run_id: str) -> Checkpoint | None:
        """The run's most recent checkpoint (latest timestamp, then saved last), or ``None``."""
        check_id(run_id, "run_id", "latest")
        return await self._read_one(_LATEST_OF_RUN, (run_id,))

    async def load(self, run_id: str, node_id: str | None = None) -> Checkpoint | None:
        """The run's most recent checkpoint, or the most recent one for ``node_id`` (its
        ``node_id`` or one of its ``node_ids``), or ``None``."""
        check_id(run_id, "run_id", "load")
        if node_id is None:
            return await self.latest(run_id)
        check_id(node_id, "node_id", "load")
        return await self._read_one(_LATEST_OF_NODE, (run_id, node_id, node_id))

    def checkpointed_runs(self) -> list[str]:
        """The ids of the runs that have checkpoints, in the order they were first saved."""
        return run_now(self._pg.sync_tx(_checkpointed_runs))

    async def list(
        self,
        run_id: str | None = None,
        *,
        thread_id: str | None = None,
        limit: int | None = None,
        before: str | None = None,
    ) -> list[Checkpoint]:
        """Checkpoints of a run, a thread or the whole store, oldest first.

        ``limit`` keeps the newest ``limit`` of them (a page); ``before`` only those older than
        the checkpoint with that id (the next page back: ``before=page[0].id``).

        Raises:
            CheckpointNotFound: ``before`` names no checkpoint.
        """
        check_list(run_id, thread_id, limit, before)
        where: list[str] = []
        params: list[Any] = []
        if run_id is not None:
            where.append("run_id = %s")
            params.append(run_id)
        if thread_id is not None:
            where.append("thread_id = %s")
            params.append(thread_id)
        async with self._tx() as cur:
            if before is not None:
                await cur.execute("SELECT ts_us, save_order FROM checkpoints WHERE id = %s",
                                  (before,))
                found = await cur.fetchone()
                if found is None:
                    raise CheckpointNotFound(f"list(before={before!r}): the store has no such "
                                             "checkpoint; pass the id of a checkpoint of a page")
                where.append("(ts_us < %s OR (ts_us = %s AND save_order < %s))")
                params.extend((found[0], found[0], found[1]))
            clause = f"WHERE {' AND '.join(where)} " if where else ""
            if limit is None:
                await cur.execute(f"SELECT {_COLUMNS} FROM checkpoints {clause}{_ORDER}",
                                  tuple(params))
            else:
                await cur.execute(f"SELECT {_COLUMNS} FROM checkpoints {clause}ORDER BY "
                                  "ts_us DESC, save_order DESC LIMIT %s", (*params, limit))
            rows = await cur.fetchall()
        if limit is not None:
            rows.reverse()
        return [_parse(r) for r in rows]

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
        tenant, limit, after, anyone = check_waiting("PostgresCheckpointStore", tenant_id,
                                                     limit, after, any_tenant)
        where = ["c.status = 'interrupted'", _THREAD_LATEST]
        params: list[Any] = []
        if not anyone:
            where.append("c.tenant_id IS NOT DISTINCT FROM %s")
            params.append(tenant)
        if after is not None:
            where.append('c.thread_id COLLATE "C" > %s')
            params.append(after)
        page = "" if limit is None else f" LIMIT {int(limit)}"
        async with self._one() as cur:
            await cur.execute(
                f"SELECT {_COLUMNS} FROM checkpoints c WHERE {' AND '.join(where)} "
                f'ORDER BY c.thread_id COLLATE "C"{page}', tuple(params))
            rows = await cur.fetchall()
        return [waiting_row(_parse(r)) for r in rows]

    async def delete(self, checkpoint_id: str) -> bool:
        """Delete one checkpoint; ``True`` if it existed."""
        check_id(checkpoint_id, "checkpoint_id", "delete")
        async with self._one() as cur:
            await cur.execute("DELETE FROM checkpoints WHERE id = %s", (checkpoint_id,))
            return cur.rowcount > 0

    async def fork(
        self,
        checkpoint_id: str,
        patch_state: Mapping[str, Any] | None = None,
        *,
        thread_id: str | None = None,
    ) -> str:
        """Clone a checkpoint into a new run and thread; return the new run id.

        The new ids derive from ``checkpoint_id`` exactly as in the other stores; concurrent
        forks of one checkpoint (from any process) get distinct runs. ``thread_id`` names the
        new thread (default: a fresh one); it must not exist yet. ``patch_state`` is applied
        after cloning, as given (``GraphRuntime.afork`` checks it against the graph's state
        schema first).

        Raises:
            CheckpointNotFound: when ``checkpoint_id`` does not exist.
            InvalidArgument: a bad id, or a ``patch_state`` with no JSON form; nothing is
                written.
            ForkTargetExists: when ``thread_id`` is given and the store holds a checkpoint of
                it (a fork only ever creates a new thread); nothing was changed.
        """
        check_fork(checkpoint_id, patch_state, thread_id)
        async with self._tx() as cur:
            await cur.execute(_ADVISORY, _lock_key("fork", checkpoint_id))
            source = await self._first(
                cur, f"SELECT {_COLUMNS} FROM checkpoints WHERE id = %s", (checkpoint_id,))
            if source is None:
                raise CheckpointNotFound(
                    f"cannot fork checkpoint {checkpoint_id!r}: the store has no such checkpoint"
                )
            patch = rules.fork_patch(checkpoint_id, patch_state)
            target = thread_id
            if target is not None:
                await cur.execute(_ADVISORY, _lock_key("thread", target))
                await cur.execute("SELECT 1 FROM checkpoints WHERE thread_id = %s LIMIT 1",
                                  (target,))
                if await cur.fetchone() is not None:
                    raise rules.fork_target_exists(checkpoint_id, target)
            n = 0
            while True:
                token = derived_hex("fork", checkpoint_id, n)
                run_id, cid = f"run-{token}", f"cp-{token}-f"
                thread_id = target or f"thread-{token}"
                await cur.execute(  # a fresh thread never lands on one with checkpoints or
                    # a claim
                    "SELECT 1 FROM checkpoints WHERE run_id = %s OR id = %s OR "
                    "(thread_id = %s AND %s) UNION ALL SELECT 1 FROM claims WHERE "
                    "thread_id = %s AND %s LIMIT 1",
                    (run_id, cid, thread_id, target is None, thread_id, target is None))
                if await cur.fetchone() is None:
                    break
                n += 1
                if n > 1000:  # pragma: no cover - defensive
                    raise ForkTargetExists(f"no free run id for a fork of {checkpoint_id!r}")
            state = {**source.state, **patch}
            forked = source.clone(
                id=cid, run_id=run_id, thread_id=thread_id, parent_id=source.id, state=state,
                metadata={**source.metadata, "forked_from": source.id},
            )
            await cur.execute(_UPSERT, _row(forked))
        return run_id

    async def prune(self, run_id: str, keep_last: int) -> int:
        """Delete all but the newest ``keep_last`` checkpoints of the run; return how many."""
        check_id(run_id, "run_id", "prune")
        keep = rules.check_keep_last(keep_last)
        async with self._one() as cur:
            await cur.execute(
                "DELETE FROM checkpoints WHERE id IN (SELECT id FROM checkpoints WHERE "
                "run_id = %s ORDER BY ts_us DESC, save_order DESC OFFSET %s FOR UPDATE)",
                (run_id, keep))
            return cur.rowcount

    async def delete_thread(
        self, thread_id: str, *, tenant_id: str | None = None, now: datetime | None = None
    ) -> DeletedThread:
        """Delete the thread in one transaction: its checkpoints, the events, run records
        and artifacts of its runs, its queue job and its claim row; a thread the store does
        not know is a no-op (all zeros). Its fencing tokens are never issued again.

        Args:
            tenant_id: the caller's tenant; the thread's is the one on its latest checkpoint.
            now: the caller's clock: a claim (or a worker's hold on the thread's job) expired
                by then does not hold the thread (``None``: every one not released does).

        Raises:
            TenantMismatch: the thread belongs to another tenant; nothing is deleted.
            ThreadBusy: a claim on the thread is live, or a worker holds its queued job;
                nothing is deleted.
        """
        thread_id, tenant, moment = check_delete_args(thread_id, tenant_id, now)
        async with self._tx() as cur:
            return await delete_thread(cur, thread_id, tenant, moment)

    # -- events (seed 002; compaction: seed 004) --

    @staticmethod
    async def _earliest(cur: Cursor, run_id: str) -> int:
        await cur.execute("SELECT earliest_seq FROM event_compactions WHERE run_id = %s",
                          (run_id,))
        row = await cur.fetchone()
        return 0 if row is None else int(row[0])

    async def record_events(self, run_id: str, events: _Records) -> None:
        """Record events of ``run_id`` in wire form; an event with a recorded seq overwrites it.

        Events before the run's compaction point are dropped: that part of the log is gone.

        Raises:
            InvalidArgument: when an event is not a JSON dict with an int ``seq``.
        """
        check_events(run_id, events)
        rows = [event_row(run_id, e) for e in events]
        if not rows:
            return
        async with self._tx() as cur:
            await write_events(cur, run_id, rows)

    async def events(self, run_id: str, after_seq: int | None = None) -> _Records:
        """The run's recorded events with ``seq > after_seq`` (all when ``None``), by seq.

        Raises:
            EventsCompacted: when part of what was asked for was compacted away.
        """
        check_id(run_id, "run_id", "events")
        first = rules.check_after_seq(after_seq)
        async with self._tx() as cur:
            earliest = await self._earliest(cur, run_id)
            if first < earliest:
                raise rules.events_compacted(run_id, earliest)
            return await read_events(cur, run_id, first)

    async def compact_events(self, run_id: str, before_seq: int) -> int:
        """Remove the run's events with ``seq < before_seq``; return how many were removed."""
        check_id(run_id, "run_id", "compact_events")
        before = rules.check_before_seq(before_seq)
        async with self._tx() as cur:
            await lock_events(cur, run_id, mark=True)
            if before <= await self._earliest(cur, run_id):
                return 0
            await cur.execute(
                "INSERT INTO event_compactions VALUES (%s, %s) ON CONFLICT (run_id) "
                "DO UPDATE SET earliest_seq = excluded.earliest_seq", (run_id, before))
            return await compact(cur, run_id, before)

    # -- run records (seed 002) --

    async def record_run(self, record: dict[str, Any]) -> None:
        """Insert or update the run record keyed by ``record["run_id"]``.

        Fields of an existing record that ``record`` does not name are kept. Datetimes are
        stored in their ISO form.
        """
        data = check_run_record(record)
        async with self._tx() as cur:
            await self._write_run(cur, data)

    @staticmethod
    async def _write_run(cur: Cursor, data: dict[str, Any]) -> None:
        await cur.execute("INSERT INTO runs (run_id, data) VALUES (%s, '{}') "
                          "ON CONFLICT (run_id) DO NOTHING", (data["run_id"],))
        await cur.execute("SELECT data FROM runs WHERE run_id = %s FOR UPDATE", (data["run_id"],))
        row = await cur.fetchone()
        data = {**json.loads(row[0]), **data}
        await cur.execute(
            "UPDATE runs SET thread_id = %s, graph_id = %s, status = %s, tenant_id = %s, "
            "updated_at = %s, data = %s WHERE run_id = %s",
            (*(_text(data.get(k)) for k in ("thread_id", "graph_id", "status", "tenant_id",
                                             "updated_at")), json.dumps(data), data["run_id"]),
        )

    async def runs(self) -> _Records:
        """Every run record, in the order the runs were first recorded."""
        async with self._one() as cur:
            await cur.execute("SELECT data FROM runs ORDER BY first_order")
            rows = await cur.fetchall()
        return [json.loads(r[0]) for r in rows]

    async def run(self, run_id: str) -> dict[str, Any] | None:
        """The record of ``run_id``, or ``None``."""
        check_id(run_id, "run_id", "run")
        async with self._one() as cur:
            await cur.execute("SELECT data FROM runs WHERE run_id = %s", (run_id,))
            row = await cur.fetchone()
        return None if row is None else dict(json.loads(row[0]))

    # -- artifacts (seed 002) --

    async def put_artifact(
        self,
        run_id: str,
        name: str,
        data: bytes | str,
        media_type: str = "application/octet-stream",
    ) -> None:
        """Store an artifact of ``run_id`` (``str`` as UTF-8), replacing one of that name."""
        content = rules.artifact_bytes(run_id, name, data, media_type)
        async with self._one() as cur:
            await cur.execute(
                "INSERT INTO artifacts (run_id, name, media_type, size, content) "
                "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (run_id, name) DO UPDATE SET "
                "media_type = excluded.media_type, size = excluded.size, "
                "content = excluded.content",
                (run_id, name, media_type, len(content), content),
            )

    async def get_artifact(self, run_id: str, name: str) -> bytes | None:
        """The content of the run's artifact ``name``, or ``None``."""
        check_id(run_id, "run_id", "get_artifact")
        check_id(name, "name", "get_artifact")
        async with self._one() as cur:
            await cur.execute("SELECT content FROM artifacts WHERE run_id = %s AND name = %s",
                              (run_id, name))
            row = await cur.fetchone()
        return None if row is None else bytes(row[0])

    async def artifacts(self, run_id: str) -> _Records:
        """The run's artifacts (``name``, ``media_type``, ``size``), in the order first stored."""
        check_id(run_id, "run_id", "artifacts")
        async with self._one() as cur:
            await cur.execute("SELECT name, media_type, size FROM artifacts WHERE run_id = %s "
                              "ORDER BY first_order", (run_id,))
            rows = await cur.fetchall()
        return [{"name": n, "media_type": m, "size": int(s)} for n, m, s in rows]

    # -- claims: see _pgclaims.PgClaims --

    async def current_claim(self, thread_id: str) -> tuple[str, int, datetime] | None:
        """``(run_id, token, expires_at)`` of the thread's claim (live or expired), or ``None``."""
        check_id(thread_id, "thread_id", "current_claim")
        async with self._one() as cur:
            found = (await self._claim_row(cur, thread_id, lock=""))[0]
        return None if found is None else found.as_tuple()


async def _checkpointed_runs(cur: Cursor) -> list[str]:
    await cur.execute("SELECT run_id FROM checkpoints GROUP BY run_id ORDER BY MIN(save_order)")
    return [r[0] for r in await cur.fetchall()]


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
