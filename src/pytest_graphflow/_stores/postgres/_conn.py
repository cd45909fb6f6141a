"""How the PostgreSQL store reaches its server: psycopg's async pool or a plain connection.

Every store operation is one transaction on a cursor this module hands out:

- on the asyncio loop the store was opened on (``async with store`` / ``await store.aopen()``),
  a connection of a :class:`psycopg_pool.AsyncConnectionPool`: queries wait without blocking
  the loop (a step's statement, the store's only operation in flight, waits up to
  :data:`_QUICK_WAIT` before it does), and concurrent runs in one process use several
  connections;
- anywhere else (trio, the sync API's short-lived loops, the testing runtime's virtual-time
  loop) a synchronous connection per thread, called inside the async methods as the SQLite
  store does: the query never yields, so virtual time never moves under it and no worker
  thread is involved.

Connections are in autocommit mode: an operation of one statement runs as it is (``one()``);
one of several statements runs in an explicit transaction (``tx()``). Both give the same cursor
interface (``await cur.execute(...)``, ``await cur.fetchone()``),
so each operation is written once. Concurrency between processes is the server's: row locks
(``SELECT ... FOR UPDATE``) and transaction-scoped advisory locks, never a lock here.
"""

from __future__ import annotations

import asyncio
import re
import select
import threading
from asyncio import _get_running_loop
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Generator,
    Iterable,
    Sequence,
)
from contextlib import asynccontextmanager, suppress
from time import monotonic
from typing import Any, Protocol, TypeVar, cast

import psycopg
from psycopg.waiting import Ready, Wait
from psycopg_pool import AsyncConnectionPool

from ._prepared import Statement, Statements
from ._sent import Sent

__all__ = ["Cursor", "PgConnections", "check_schema_name", "on_plain_asyncio", "run_now"]

T = TypeVar("T")


def run_now(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends (a store operation on the sync connection) to its
    end, from sync code or from inside any event loop."""
    try:
        coro.send(None)
    except StopIteration as done:
        return cast(T, done.value)
    coro.close()
    raise RuntimeError("a synchronous store operation suspended")  # pragma: no cover


def on_plain_asyncio() -> bool:
    """Whether the caller runs on an asyncio loop with the real clock (not trio, not the
    testing runtime's virtual-time loop): where the async pool may be used."""
    from ..._time._vloop import LOOP_OWNED

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return LOOP_OWNED.get() is None

_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")

_RESERVED_WORDS = (
    "all analyse analyze and any array as asc asymmetric authorization binary both case cast "
    "check collate collation column concurrently constraint create cross current_catalog "
    "current_date current_role current_schema current_time current_timestamp current_user "
    "default deferrable desc distinct do else end except false fetch for foreign freeze from "
    "full grant group having ilike in initially inner intersect into is isnull join lateral "
    "leading left like limit localtime localtimestamp natural not notnull null offset on only "
    "or order outer overlaps placing primary references returning right select session_user "
    "similar some symmetric table tablesample then to trailing true union unique user using "
    "variadic verbose when where window with"
)
_RESERVED = frozenset(_RESERVED_WORDS.split())
"""PostgreSQL's reserved key words (and those that may only name a function or type): none
of them can name a schema without quotes."""


def check_schema_name(schema: object) -> str:
    """A schema name, checked: lower-case letters, digits and ``_`` (it is put into SQL), not a
    reserved word, not ``pg_...``.

    Raises:
        ValueError: for anything else (the caller turns it into ``InvalidArgument``).
    """
    if not isinstance(schema, str) or not _SCHEMA_NAME.fullmatch(schema):
        raise ValueError(f"schema={schema!r}: a schema name is lower-case letters, digits and "
                         "'_', starting with a letter or '_' (at most 63 characters)")
    if schema in _RESERVED:
        raise ValueError(f"schema={schema!r}: {schema!r} is a reserved word in PostgreSQL; "
                         f"pick another name (e.g. 'graphflow_{schema}')")
    if schema.startswith("pg_"):
        raise ValueError(f"schema={schema!r}: the prefix 'pg_' is reserved for PostgreSQL's own "
                         "schemas; pick another name")
    return schema


class Cursor(Protocol):
    """What a store operation needs from a cursor (psycopg's ``AsyncCursor`` has it)."""

    @property
    def rowcount(self) -> int: ...

    async def execute(self, query: Any, params: Sequence[Any] | None = None) -> Any: ...

    async def executemany(self, query: Any, params_seq: Iterable[Sequence[Any]]) -> Any: ...

    async def fetchone(self) -> Any: ...

    async def fetchall(self) -> list[Any]: ...


class _SyncCursor:
    """A synchronous psycopg cursor behind the async :class:`Cursor` interface.

    Its coroutines never suspend, so no other task of the loop runs inside a transaction.
    """

    __slots__ = ("_cur",)

    def __init__(self, cur: psycopg.Cursor[Any]) -> None:
        self._cur = cur

    @property
    def rowcount(self) -> int:
        return self._cur.rowcount

    async def execute(self, query: Any, params: Sequence[Any] | None = None) -> Any:
        return self._cur.execute(query, params)

    async def executemany(self, query: Any, params_seq: Iterable[Sequence[Any]]) -> Any:
        return self._cur.executemany(query, params_seq)

    async def fetchone(self) -> Any:
        return self._cur.fetchone()

    async def fetchall(self) -> list[Any]:
        return self._cur.fetchall()


_Hot = tuple["psycopg.AsyncConnection[Any]", "psycopg.AsyncCursor[Any]"]

Dumped = tuple[Statement, Any, Any]
"""A statement made ready ahead (:meth:`PgConnections.ready_one`): the statement, the
connection it would go on, its parameters dumped for that connection."""

_IDLE = psycopg.pq.TransactionStatus.IDLE
_BAD = psycopg.pq.ConnStatus.BAD

_HOT_USES = 10_000
"""Operations the hot connection serves before it goes back to the pool once (where the
pool's lifetime and health rules apply to it as to the others)."""

IN_FLIGHT = 2
"""How many statements :meth:`PgConnections.send_one` keeps unanswered on a connection: one
the server runs while the next waits in its socket, so it starts that one without waiting
for the client (libpq's pipeline mode)."""


_QUICK_WAIT = 0.001
"""Seconds the store's only operation in flight on the loop waits for its answer without
giving the loop a turn (see ``PgConnections.fetch_one``): a step's statement on a server
nearby is answered in a fraction of that; a slower one (a lock wait, a busy or distant server)
is waited for as any other, and the waits after it stay on the loop until an answer comes
within this time again (a distant server never holds the loop more than once)."""

_MAX_BUSY = 0.005
"""Seconds of quick waits after which the next statement waits on the loop (a turn for the
loop's other tasks): the bound psycopg's own waits keep (``psycopg.waiting.MAX_BUSY_TIME``)."""

_WAIT_R, _WAIT_W = int(Wait.R), int(Wait.W)
_READY_R, _READY_W = int(Ready.R), int(Ready.W)
_NOTHING: tuple[int, ...] = ()

_Gen = Generator[Any, Any, Any]


def _resumed(gen: _Gen, state: Any) -> _Gen:
    """A psycopg generator that waited for ``state`` already, to be finished by psycopg's
    own waiting (on the loop, with its handling of a cancellation)."""
    while True:
        ready = yield state
        try:
            state = gen.send(ready)
        except StopIteration as done:
            return done.value


# In pipeline mode, BEGIN and COMMIT are sent as statements: psycopg's transaction() waits
# for the server at BEGIN (one more round trip) to learn the transaction's state.
_BEGIN, _COMMIT, _ROLLBACK = b"BEGIN", b"COMMIT", b"ROLLBACK"
_OPEN = (psycopg.pq.TransactionStatus.INTRANS, psycopg.pq.TransactionStatus.INERROR)


@asynccontextmanager
async def _apipelined(aconn: psycopg.AsyncConnection[Any],
                      acur: psycopg.AsyncCursor[Any]) -> AsyncIterator[Cursor]:
    """A transaction in pipeline mode on an async connection (see ``PgConnections.tx``)."""
    try:
        async with aconn.pipeline():
            await aconn.execute(_BEGIN)
            try:
                yield acur
            except BaseException:
                with suppress(psycopg.Error):  # an aborted pipeline: rolled back below
                    await aconn.execute(_ROLLBACK)
                raise
            await aconn.execute(_COMMIT)
    finally:
        if aconn.pgconn.transaction_status in _OPEN and not aconn.closed:
            await aconn.execute(_ROLLBACK)


@asynccontextmanager
async def _pipelined(conn: psycopg.Connection[Any],
                     cur: psycopg.Cursor[Any]) -> AsyncIterator[Cursor]:
    """A transaction in pipeline mode on a sync connection (see ``PgConnections.tx``)."""
    try:
        with conn.pipeline():
            conn.execute(_BEGIN)
            try:
                yield _SyncCursor(cur)
            except BaseException:
                with suppress(psycopg.Error):  # an aborted pipeline: rolled back below
                    conn.execute(_ROLLBACK)
                raise
            conn.execute(_COMMIT)
    finally:
        if conn.pgconn.transaction_status in _OPEN and not conn.closed:
            conn.execute(_ROLLBACK)


class PgConnections:
    """The store's connections: one async pool (once opened) and a sync connection per thread.

    Args:
        dsn: a libpq connection string or URI.
        schema: the schema every connection works in (its ``search_path``).
        pool_size: the async pool's maximum number of connections.
    """

    def __init__(self, dsn: str, schema: str, pool_size: int) -> None:
        self.dsn = dsn
        self.schema = schema
        self.pool_size = pool_size
        self._local = threading.local()
        self._sync: list[psycopg.Connection[Any]] = []
        self._pool: AsyncConnectionPool | None = None
        self._pool_loop: asyncio.AbstractEventLoop | None = None
        self._hot: _Hot | None = None
        self._hot_uses = 0
        self._out = 0
        self._busy_since = 0.0
        self._sent = 0.0
        self._slow = False
        self.quick_answers = 0
        """Statements answered within the quick wait (counted for tests and benchmarks)."""
        self._statements = Statements()
        self._queue: list[Sent] = []
        """The statements sent on the hot connection whose answers are not read yet, in the
        order sent (at most :data:`IN_FLIGHT`; the connection is theirs until then)."""
        self._reading: asyncio.Future[None] | None = None
        """Set while a task reads answers of the queue (:meth:`_read_pooled`): another task
        waits for it before reading any (one reader of a connection at a time), and no
        statement is sent meanwhile."""
        self.unread = 0
        """Statements sent whose answers are not read yet, on any thread (:meth:`send_one`):
        while it is 0, an operation has none to read first."""
        self.closed = False

    @property
    def _options(self) -> str:
        return f"-c search_path={self.schema}"

    def sync_connection(self) -> psycopg.Connection[Any]:
        """This thread's synchronous connection (opened, or reopened when it broke)."""
        if self.closed:
            raise psycopg.OperationalError("the PostgreSQL store is closed; open a new one")
        if self.unread:
            self._read_local()
        conn: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        if conn is None or conn.closed or conn.broken:
            conn = psycopg.connect(self.dsn, options=self._options, autocommit=True)
            self._local.conn = conn
            self._sync.append(conn)
        return conn

    async def open_pool(self) -> None:
        """Open the async pool on the running asyncio loop (idempotent on that loop)."""
        loop = asyncio.get_running_loop()
        if self._pool is not None and self._pool_loop is loop:
            return
        if self._pool is not None:
            raise RuntimeError("the store's connection pool is open on another event loop; "
                               "open one store per event loop")
        pool = AsyncConnectionPool(
            self.dsn, min_size=1, max_size=self.pool_size, open=False,
            kwargs={"options": self._options, "autocommit": True},
        )
        await pool.open(wait=True)
        self._pool, self._pool_loop = pool, loop

    def _on_pool_loop(self) -> bool:
        if self._pool is None:
            return False
        try:
            return asyncio.get_running_loop() is self._pool_loop
        except RuntimeError:
            return False

    @asynccontextmanager
    async def tx(self, *, pipeline: bool = False) -> AsyncIterator[Cursor]:
        """One transaction: committed when the block ends, rolled back when it raises.

        With ``pipeline=True`` the statements go in libpq's pipeline mode: ``BEGIN`` and the
        statements up to the first read of a result travel in one round trip, the rest and
        ``COMMIT`` (or ``ROLLBACK``) in one more. A statement's ``rowcount`` is known once
        the block has ended.
        """
        if self._on_pool_loop():
            aconn, acur = await self._take()
            try:
                if pipeline:
                    async with _apipelined(aconn, acur) as cur:
                        yield cur
                else:
                    async with aconn.transaction():
                        yield acur
            finally:
                await self._give_back(aconn, acur)
            return
        conn = self.sync_connection()
        if pipeline:  # the cursor stays open: its rowcount is read after the block
            async with _pipelined(conn, conn.cursor()) as sync_cur:
                yield sync_cur
            return
        with conn.transaction(), conn.cursor() as cur:
            yield _SyncCursor(cur)

    @asynccontextmanager
    async def one(self) -> AsyncIterator[Cursor]:
        """A cursor for one statement, which is its own transaction (one round trip, where a
        ``BEGIN``/``COMMIT`` pair would cost two more)."""
        if self._on_pool_loop():
            aconn, acur = await self._take()
            try:
                yield acur
            finally:
                await self._give_back(aconn, acur)
            return
        cur = self._spare_cursor()
        yield cur
        self._local.cur = cur

    def _spare_cursor(self) -> _SyncCursor:
        """This thread's spare cursor on its connection (its dumpers already looked up),
        taken while in use (put back in ``_local.cur`` after)."""
        conn = self.sync_connection()
        cur: _SyncCursor | None = self._local.__dict__.pop("cur", None)
        if cur is None or cur._cur.connection is not conn or cur._cur.closed:
            cur = _SyncCursor(conn.cursor())
        return cur

    async def fetch_one(self, query: str, params: Sequence[Any]) -> Any:
        """Run one statement (its own transaction) and return its first row (a step's
        commit): prepared and sent straight through libpq (:mod:`._prepared`) when its
        parameters allow, else through psycopg's cursor; on the async pool, the store's only
        operation in flight waits for its answer without a turn of the loop (:meth:`_quick`).

        The common cases (the hot connection of the pool; this thread's sync connection, open)
        are written inline: :meth:`_take`, :meth:`_give_back`, :meth:`_run_async`
        and :meth:`sync_connection` are each a frame a step (issue 29).
        """
        statement = self._statements.statement(query, params)
        if self._pool is not None and _get_running_loop() is self._pool_loop:
            if self._queue:  # a step's statement sent: its answer first
                await self._read_pooled(self._queue[-1])
            hot = self._hot
            if hot is None or statement is None:
                return await self._fetch_pooled(query, params, statement)
            self._hot = None  # _take's, inline
            self._out += 1
            aconn = hot[0]
            try:
                answered, found = self._quick(
                    aconn, self._statements.exchange(aconn, statement, params))
                if not answered:
                    found = await self._on_loop(aconn, found)
            except psycopg.errors.InvalidSqlStatementName:  # DEALLOCATE ALL or DISCARD ALL
                self._statements.forget(aconn)
                found = await self._wait_async(aconn, statement, params)
            finally:  # _give_back's, inline, when the connection stays hot (its test)
                if (self._hot is None and self._pool is not None and not aconn.closed
                        and aconn.pgconn.transaction_status == _IDLE
                        and self._hot_uses + 1 < _HOT_USES):
                    self._hot_uses += 1
                    self._out -= 1
                    self._hot = hot
                else:
                    await self._give_back(aconn, hot[1])
            return found
        if statement is not None:
            if self.unread:  # a step's statement sent on this thread: its answer first
                self._read_local()
            try:
                conn = self._local.conn  # sync_connection's, inline, when it is open
            except AttributeError:
                conn = None
            if conn is None or conn.pgconn.status == _BAD or self.closed:
                conn = self.sync_connection()
            try:  # psycopg's wait: Ctrl-C cancels
                return conn.wait(self._statements.exchange(conn, statement, params))
            except psycopg.errors.InvalidSqlStatementName:  # DEALLOCATE ALL or DISCARD ALL
                self._statements.forget(conn)  # prepare it again
                return conn.wait(self._statements.exchange(conn, statement, params))
        spare = self._spare_cursor()
        cur = spare._cur
        cur.execute(query, params)
        row = cur.fetchone()
        self._local.cur = spare
        return row

    def ready_one(self, query: str, params: Sequence[Any]) -> Dumped | None:
        """:meth:`send_one`'s own work done ahead, while the statement before it is still
        unanswered: the statement, the connection it would go on (this thread's sync
        connection, or the pool's hot one, or the one the pool's unanswered statement
        holds) and its parameters dumped for it. ``None``: nothing made ahead
        (:meth:`send_one` does it all)."""
        statement = self._statements.statement(query, params)
        if statement is None:
            return None
        conn: Any
        if self._pool is not None and _get_running_loop() is self._pool_loop:
            queue, hot = self._queue, self._hot
            conn = queue[0].conn if queue else None if hot is None else hot[0]
        else:
            conn = self._local.__dict__.get("conn")
        if conn is None:
            return None
        try:
            values = self._statements.dump(conn, statement, params)
        except psycopg.Error:  # send_one dumps them again, and says what failed
            return None
        return None if values is None else (statement, conn, values)

    def send_one(self, query: str, params: Sequence[Any],
                 ready: Dumped | None = None) -> Sent | None:
        """Send one statement (its own transaction) as :meth:`fetch_one` would, without
        waiting for its answer (:meth:`answer` reads it; see :mod:`._sent`): on this
        thread's open sync connection, or the pool's hot connection on the pool's loop,
        when the connection has prepared the statement and fewer than :data:`IN_FLIGHT`
        statements sent on it are unanswered (libpq's pipeline mode: each its own
        transaction, answered in order).
        ``ready``: :meth:`ready_one`'s for the same ``query`` and ``params`` (its values
        are sent when the statement goes on its connection). ``None``: nothing was sent
        (:meth:`fetch_one` then)."""
        statement = self._statements.statement(query, params) if ready is None else ready[0]
        if statement is None or self.closed:
            return None
        hot: Any = None
        queue: list[Sent] | None
        if self._pool is not None and _get_running_loop() is self._pool_loop:
            queue = self._queue
            if queue:
                if len(queue) >= IN_FLIGHT or self._reading is not None:
                    return None
                hot = queue[0].hot
            else:
                hot = self._hot
                if hot is None:
                    return None
            conn = hot[0]
            if conn.lock.locked():  # (psycopg's own operation on it, as _quick declines)
                return None
        else:
            conn = self._local.__dict__.get("conn")
            queue = self._local.__dict__.get("queue")
            if conn is None or conn.pgconn.status == _BAD \
                    or (queue and len(queue) >= IN_FLIGHT):
                return None
        try:
            tx = self._statements.send(conn, statement, params,
                                       None if ready is None or ready[1] is not conn
                                       else ready[2])
        except psycopg.Error:  # nothing queued: fetch_one runs it (and says what failed)
            return None
        if tx is None:  # not prepared on this connection yet: fetch_one prepares it
            return None
        sent = Sent(conn, hot, tx, statement, params)
        self.unread += 1
        if hot is not None:
            if not queue:
                self._hot = None  # _take's: the connection is the queue's until answered
                self._out += 1
            self._queue.append(sent)
        elif queue is None:
            self._local.queue = [sent]
        else:
            queue.append(sent)
        return sent

    async def answer(self, sent: Sent) -> Any:
        """The first row of the answer to ``sent`` (:meth:`send_one`), read now unless an
        operation on its connection read it first.

        Raises:
            psycopg.Error: the server's error, or the connection's.
        """
        if not sent.done:
            if sent.hot is None:
                self._read_local(sent)
                if not sent.done:  # (its connection is another thread's: read it there)
                    raise RuntimeError("a PostgreSQL statement's answer was asked for on "
                                       "another thread than the one that sent it; await "
                                       "it on the thread that runs the run")
            else:
                await self._read_pooled(sent)
        if sent.error is not None:
            raise sent.error
        return sent.row

    def _read_local(self, upto: Sent | None = None) -> None:
        """Read the answers to the statements sent on this thread's sync connection, in
        order, through ``upto`` (all of them: ``None``), each kept in its :class:`Sent`."""
        queue: list[Sent] | None = self._local.__dict__.get("queue")
        if not queue:
            return
        conn = queue[0].conn
        redo = self._read_queue(conn, queue, upto, conn.wait)
        if redo:  # DEALLOCATE ALL: prepared again, run again in order
            self._statements.forget(conn)
        for sent in redo:
            try:
                sent.row = conn.wait(self._statements.exchange(conn, sent.statement,
                                                               sent.params))
                sent.error = None
            except BaseException as exc:  # kept for answer(); Ctrl-C goes on at once
                sent.error = exc
                if not isinstance(exc, Exception):
                    raise

    def _read_queue(self, conn: Any, queue: list[Sent], upto: Sent | None,
                    wait: Callable[[Any], Any]) -> list[Sent]:
        """Read ``queue``'s answers on ``conn`` in order through ``upto`` (``None``: all),
        ``wait`` driving each reading generator; once it is empty the connection leaves
        pipeline mode. Returns those the server answered that it knows no such prepared
        statement (``DEALLOCATE ALL``): the whole queue is read then, to run them again."""
        redo: list[Sent] = []
        statements = self._statements
        while queue:
            sent = queue.pop(0)
            self.unread -= 1
            sent.done = True
            try:  # psycopg's wait: Ctrl-C cancels
                sent.row = wait(statements.answer(conn, sent.tx))
            except BaseException as exc:
                self._failed(sent, exc, conn, queue, redo)
            if sent is upto and not redo:  # (a statement to run again: all of them read)
                break
        if not queue:
            self._left(conn)
        return redo

    def _failed(self, sent: Sent, exc: BaseException, conn: Any, queue: list[Sent],
                redo: list[Sent]) -> None:
        """Keep ``exc`` as ``sent``'s answer (for :meth:`answer`): a statement the server
        forgot (``DEALLOCATE ALL``) goes to ``redo``; a reading interrupted (Ctrl-C, a
        cancellation: not an ``Exception``) loses the rest (:meth:`_lost`) and goes on at
        once."""
        sent.error = exc
        if isinstance(exc, psycopg.errors.InvalidSqlStatementName):
            redo.append(sent)
        elif not isinstance(exc, Exception):
            self._lost(conn, queue, exc)
            raise exc

    def _left(self, conn: Any) -> None:
        """Every answer sent on ``conn`` read: it leaves pipeline mode."""
        if conn.pgconn.status != _BAD:
            try:
                self._statements.answered(conn)
            except psycopg.Error as exc:  # (a connection the server left mid-answer)
                self._lost(conn, [], exc)

    def _lost(self, conn: Any, queue: list[Sent], exc: BaseException) -> None:
        """An answer's reading stopped midway (Ctrl-C, a cancellation): what is queued
        after it is not read (each keeps ``exc``), and the connection, in a state psycopg
        cannot use, is closed (a thread's reopens at its next use; the pool drops it)."""
        for sent in queue:
            self.unread -= 1
            sent.done = True
            sent.error = exc
        queue.clear()
        with suppress(Exception):
            conn.pgconn.finish()

    async def _read_pooled(self, upto: Sent) -> None:
        """Read the answers to the statements sent on the hot connection, in order,
        through ``upto`` (each kept in its :class:`Sent`), and once none is left give the
        connection back, as :meth:`fetch_one` does once answered (as
        :meth:`_read_queue`, each answer waited for as :meth:`fetch_one` waits)."""
        while self._reading is not None:  # another task reads this connection's answers
            await asyncio.shield(self._reading)
        if upto.done:
            return
        reading = self._reading = asyncio.get_running_loop().create_future()
        queue = self._queue
        aconn, hot = queue[0].conn, queue[0].hot
        assert hot is not None  # (sent on the hot connection)
        statements = self._statements
        redo: list[Sent] = []
        try:
            while queue:
                sent = queue.pop(0)
                self.unread -= 1
                sent.done = True
                try:
                    answered, found = self._quick(aconn, statements.answer(aconn, sent.tx))
                    sent.row = found if answered else await self._on_loop(aconn, found)
                except BaseException as exc:
                    self._failed(sent, exc, aconn, queue, redo)
                if sent is upto and not redo:
                    break
            if not queue:
                self._left(aconn)
            if redo:  # DEALLOCATE ALL: prepared again, run again in order
                statements.forget(aconn)
            for sent in redo:
                try:
                    sent.row = await self._wait_async(aconn, sent.statement, sent.params)
                    sent.error = None
                except BaseException as exc:
                    sent.error = exc
                    if not isinstance(exc, Exception):
                        raise
        finally:
            self._reading = None
            reading.set_result(None)
            if not queue:
                await self._give_back(aconn, hot[1])

    async def _fetch_pooled(self, query: str, params: Sequence[Any],
                            statement: Statement | None) -> Any:
        """:meth:`fetch_one` on a connection of the pool that is not the hot one (or a
        statement psycopg's cursor sends)."""
        aconn, acur = await self._take()
        try:
            if statement is None:
                await acur.execute(query, params)
                return await acur.fetchone()
            return await self._run_async(aconn, statement, params)
        finally:
            await self._give_back(aconn, acur)

    async def _run_async(self, aconn: psycopg.AsyncConnection[Any], statement: Statement,
                         params: Sequence[Any]) -> Any:
        """:meth:`fetch_one` on a connection of the pool."""
        try:
            return await self._wait_async(aconn, statement, params)
        except psycopg.errors.InvalidSqlStatementName:
            self._statements.forget(aconn)
            return await self._wait_async(aconn, statement, params)

    async def _wait_async(self, aconn: psycopg.AsyncConnection[Any], statement: Statement,
                          params: Sequence[Any]) -> Any:
        """The statement's row, waited for quickly (:meth:`_quick`) or on the loop."""
        answered, found = self._quick(aconn, self._statements.exchange(aconn, statement, params))
        if answered:
            return found
        return await self._on_loop(aconn, found)

    async def _on_loop(self, aconn: psycopg.AsyncConnection[Any], gen: _Gen) -> Any:
        """The answer ``gen`` reads, waited for on the loop (psycopg's wait), after
        :meth:`_quick` declined or timed out (it noted when the statement was sent)."""
        row = await aconn.wait(gen)
        self._busy_since = now = monotonic()
        if self._slow and now - self._sent < _QUICK_WAIT:
            self._slow = False  # answered quickly again: the next may wait quickly
        return row

    def _quick(self, aconn: psycopg.AsyncConnection[Any], gen: _Gen) -> tuple[bool, Any]:
        """Wait up to :data:`_QUICK_WAIT` for the answer ``gen`` (a psycopg-style generator:
        :meth:`~._prepared.Statements.exchange`) reads, without a turn of the loop, as a sync
        connection waits, when it is the store's only operation in flight on the loop:
        ``(True, answer)`` when it came in that time, else ``(False, generator)`` for psycopg
        to finish on the loop (``aconn.wait``). After :data:`_MAX_BUSY` of quick answers the
        next statement waits on the loop, so the loop's other tasks get a turn at least that
        often.

        A wait on the loop costs more Python than a step's own work (a reader, a future, a
        timer and two turns of the loop a statement).
        """
        self._sent = now = monotonic()
        fd = aconn.pgconn.socket
        if (self._slow or self._out != 1 or now - self._busy_since >= _MAX_BUSY or fd >= 1024
                or aconn.lock.locked()):
            self._busy_since = now  # the caller's wait gives the loop a turn
            return False, gen
        try:
            state = next(gen)
            end = now + _QUICK_WAIT
            while True:
                reads, writes, _ = select.select(
                    (fd,) if state & _WAIT_R else _NOTHING,
                    (fd,) if state & _WAIT_W else _NOTHING, _NOTHING,
                    max(0.0, end - monotonic()))
                if not reads and not writes:  # late: this and the next waits on the loop
                    self._slow = True
                    return False, _resumed(gen, state)
                state = gen.send((_READY_R if reads else 0) | (_READY_W if writes else 0))
        except StopIteration as done:
            self.quick_answers += 1
            return True, done.value

    async def _take(self) -> _Hot:
        """A connection of the pool and a cursor on it: the hot one when no other operation
        of the loop has it (no pool checkout: its lock, bookkeeping and logging cost more
        than a step's own Python), else one checked out of the pool."""
        if self._queue:  # a step's statement sent: its answer first
            await self._read_pooled(self._queue[-1])
        self._out += 1
        hot = self._hot
        if hot is not None:
            self._hot = None
            return hot
        assert self._pool is not None
        try:
            aconn = await self._pool.getconn()
        except BaseException:
            self._out -= 1
            raise
        return aconn, aconn.cursor()

    async def _give_back(self, aconn: psycopg.AsyncConnection[Any],
                         acur: psycopg.AsyncCursor[Any]) -> None:
        """Keep the connection as the hot one when it is idle and the slot is free; anything
        else (a second connection, one left in a transaction or broken by a failure or a
        cancellation, or one kept for :data:`_HOT_USES` operations) goes back to the pool,
        whose checks and reset apply as for any connection."""
        self._hot_uses += 1
        self._out -= 1
        if (self._hot is None and self._pool is not None and not aconn.closed
                and aconn.pgconn.transaction_status == _IDLE and self._hot_uses < _HOT_USES):
            self._hot = (aconn, acur)
            return
        if self._hot is None:
            self._hot_uses = 0
        pool = self._pool
        if pool is None:  # closed meanwhile
            await aconn.close()
        else:
            await pool.putconn(aconn)

    async def _drop_hot(self, pool: AsyncConnectionPool) -> None:
        hot, self._hot = self._hot, None
        if hot is not None:
            await pool.putconn(hot[0])

    async def sync_tx(self, op: Callable[..., Awaitable[T]], *args: Any) -> T:
        """``await op(cursor, *args)`` in one transaction on this thread's sync connection."""
        conn = self.sync_connection()
        with conn.transaction(), conn.cursor() as cur:
            return await op(_SyncCursor(cur), *args)

    async def aclose(self) -> None:
        """Close the pool (on its loop) and every sync connection."""
        if self._queue:
            await self._read_pooled(self._queue[-1])
        pool, self._pool = self._pool, None
        if pool is not None:
            await self._drop_hot(pool)
            await pool.close()
        self.close()

    async def _shut(self, pool: AsyncConnectionPool) -> None:
        await self._drop_hot(pool)
        await pool.close()

    def close(self) -> None:
        """Close the sync connections; a pool still open is closed where possible."""
        self.closed = True
        pool, self._pool = self._pool, None
        loop, self._pool_loop = self._pool_loop, None
        if pool is not None and loop is not None:
            if loop.is_running():
                loop.create_task(self._shut(pool))
            elif not loop.is_closed():
                loop.run_until_complete(self._shut(pool))
        for conn in self._sync:
            conn.close()
        self._sync.clear()
