"""A step's statement straight through libpq (issue 29): prepared once per connection under a
name of the store's, its parameters dumped and its row loaded by psycopg's own adapters.

psycopg's cursor costs a step more Python than the step's own work (query conversion, its
prepared-statement bookkeeping, a cursor's result state); this is what is left of it: the
statement's ``%s`` become ``$n`` once, the parameters are dumped as text by the connection's
``Transformer`` (psycopg's dumpers: the same texts, the same refusals, a NUL in a text
included), the server told their types at preparation (``int`` as ``bigint``, ``bool`` as
``boolean``, the rest left to infer, as psycopg leaves a ``str``), and the row is loaded by
its loaders. A parameter of another Python type than the statement was prepared with is left
to psycopg's cursor. Sending and waiting are psycopg's own (``psycopg.generators.execute``),
and so are its errors (``psycopg.errors.error_from_result``: a ``UniqueViolation`` is one).
"""

from __future__ import annotations

import re
from collections.abc import Generator, Sequence
from contextlib import suppress
from itertools import count
from typing import Any
from weakref import WeakKeyDictionary

import psycopg
from psycopg import pq
from psycopg.abc import Transformer
from psycopg.adapt import PyFormat
from psycopg.adapt import Transformer as _Transformer
from psycopg.generators import execute as _execute
from psycopg.generators import fetch_many as _fetch_many
from psycopg.generators import send as _flushed

__all__ = ["Statement", "Statements"]

_TYPES = {bool: 16, int: 20}
"""The type the server is told of a parameter, by its Python type (0: the server infers)."""

_OK = pq.ExecStatus.TUPLES_OK
_OFF = pq.PipelineStatus.OFF
_DONE = pq.ExecStatus.COMMAND_OK
_PLACEHOLDER = re.compile(r"%s")


class Statement:
    """One statement of the store's: its name on a connection, its ``$n`` text, the types
    of its parameters, and the Python types of the parameters it has been called with."""

    __slots__ = ("formats", "kinds", "name", "text", "types")

    def __init__(self, name: bytes, text: bytes, params: Sequence[Any]) -> None:
        self.name = name
        self.text = text
        self.types = [_TYPES.get(type(p), 0) for p in params]
        self.formats = [PyFormat.TEXT] * len(params)
        self.kinds: set[tuple[type, ...]] = {tuple(map(type, params))}

    def fits(self, params: Sequence[Any]) -> bool:
        """Whether ``params`` can be sent as the statement was prepared: each an ``int``,
        a ``bool`` where it was, anything else (or ``None``) where the server infers."""
        kinds = tuple(map(type, params))
        if kinds in self.kinds:
            return True
        if len(kinds) != len(self.types) or any(
                _TYPES.get(k, 0) != t for k, t in zip(kinds, self.types, strict=True)
                if k is not type(None)):
            return False
        self.kinds.add(kinds)
        return True


class Statements:
    """The store's statements sent this way, and what each connection has prepared (and the
    ``Transformer`` it dumps and loads with)."""

    def __init__(self) -> None:
        self._by_query: dict[str, Statement | None] = {}
        self._names = count()
        self._on: WeakKeyDictionary[Any, tuple[set[bytes], Transformer]] = WeakKeyDictionary()
        # The connection asked for last and its entry (``on`` without the weak dictionary's
        # look-up, a frame and a weak reference a step).
        self._last: Any = None
        self._last_known: tuple[set[bytes], Transformer] | None = None

    def statement(self, query: str, params: Sequence[Any]) -> Statement | None:
        """The statement of ``query`` with ``params``, or ``None`` when it cannot be sent
        this way (a ``%`` that is not a placeholder, a parameter of another type)."""
        try:
            found = self._by_query[query]
        except KeyError:
            found = None
        if found is not None:  # fits()'s common case inline (a frame a step fewer)
            if tuple(map(type, params)) in found.kinds:
                return found
            return found if found.fits(params) else None
        if query in self._by_query or query.count("%") != query.count("%s"):
            self._by_query[query] = None
            return None
        n = count(1)
        text = _PLACEHOLDER.sub(lambda _: f"${next(n)}", query)
        found = Statement(f"graphflow_{next(self._names)}".encode(), text.encode(), params)
        self._by_query[query] = found
        return found

    def on(self, conn: Any) -> tuple[set[bytes], Transformer]:
        """The names prepared on ``conn`` and its ``Transformer``."""
        known = self._last_known if conn is self._last else None
        if known is not None:
            return known
        known = self._on.get(conn)
        if known is None:
            known = self._on[conn] = (set(), _Transformer(conn))
        self._last, self._last_known = conn, known
        return known

    def exchange(self, conn: Any, statement: Statement,
                 params: Sequence[Any]) -> Generator[Any, Any, Any]:
        """``statement`` run on ``conn`` with ``params``, as a generator of psycopg's kind
        (what to wait for out, readiness in; ``conn.wait`` drives it): prepared first if the
        connection has not prepared it, then sent; it returns the answer's first row.

        Raises:
            psycopg.Error: the server's error (``InvalidSqlStatementName``: the server
                dropped the statement; :meth:`forget` the connection's and run it again).
        """
        known = self._last_known if conn is self._last else None  # on()'s, inline
        names, tx = self.on(conn) if known is None else known
        pgconn = conn.pgconn
        values = tx.dump_sequence(params, statement.formats)
        if statement.name not in names:
            pgconn.send_prepare(statement.name, statement.text, statement.types)
            _prepared_done((yield from _execute(pgconn)))
            names.add(statement.name)
        pgconn.send_query_prepared(statement.name, values)
        return _first_row((yield from _execute(pgconn)), tx)

    def send(self, conn: Any, statement: Statement, params: Sequence[Any],
             values: Any = None) -> Transformer | None:
        """:meth:`exchange`'s first half, when ``conn`` has prepared ``statement``: its
        parameters dumped (or their ``values`` :meth:`dump` made for ``conn``) and the
        statement sent in libpq's pipeline mode, its own transaction (a sync point after
        it), so that statements sent before it may still be unanswered (flushed as far as
        the socket takes it; :meth:`answer` sends the rest); the ``Transformer`` to read
        its answer with. ``None``: the connection has not prepared it (:meth:`exchange`
        then). The connection leaves pipeline mode once every answer is read
        (:meth:`answered`).

        Raises:
            psycopg.Error: the parameters' dump, or the connection's (a broken one).
        """
        known = self._last_known if conn is self._last else None  # on()'s, inline
        names, tx = self.on(conn) if known is None else known
        if statement.name not in names:
            return None
        pgconn = conn.pgconn
        if values is None:
            values = tx.dump_sequence(params, statement.formats)
        entered = pgconn.pipeline_status == _OFF
        if entered:
            pgconn.enter_pipeline_mode()
        try:
            pgconn.send_query_prepared(statement.name, values)
            pgconn.pipeline_sync()
        except BaseException:
            if entered:  # nothing queued: the connection as it was
                with suppress(psycopg.Error):
                    pgconn.exit_pipeline_mode()
            raise
        # libpq sends a query of this size only when asked (below its buffer's threshold):
        # on the wire now, so the server works on it while the caller goes on
        pgconn.flush()
        return tx

    def dump(self, conn: Any, statement: Statement, params: Sequence[Any]) -> Any:
        """``params`` dumped for ``statement`` on ``conn`` ahead of :meth:`send`; ``None``
        when ``conn`` has not prepared it.

        Raises:
            psycopg.Error: the parameters' dump.
        """
        known = self._last_known if conn is self._last else None  # on()'s, inline
        names, tx = self.on(conn) if known is None else known
        if statement.name not in names:
            return None
        return tx.dump_sequence(params, statement.formats)

    @staticmethod
    def answer(conn: Any, tx: Transformer) -> Generator[Any, Any, Any]:
        """:meth:`exchange`'s second half: the answer to the statement :meth:`send` sent on
        ``conn``, as a generator of psycopg's kind; it returns the answer's first row.

        Raises:
            psycopg.Error: the server's error (as :meth:`exchange`).
        """
        pgconn = conn.pgconn
        yield from _flushed(pgconn)  # (what the socket did not take at send)
        results = yield from _fetch_many(pgconn)
        yield from _fetch_many(pgconn)  # its sync point (a PIPELINE_SYNC result)
        return _first_row(results, tx)

    @staticmethod
    def answered(conn: Any) -> None:
        """Every answer to what :meth:`send` sent on ``conn`` is read: the connection leaves
        pipeline mode (psycopg's own operations run on it again)."""
        conn.pgconn.exit_pipeline_mode()

    def forget(self, conn: Any) -> None:
        """Forget what ``conn`` has prepared (the server dropped it: ``DEALLOCATE ALL``)."""
        self._on.pop(conn, None)
        if conn is self._last:
            self._last = self._last_known = None


def _prepared_done(results: list[Any]) -> None:
    """Check the answer to a ``Prepare``.

    Raises:
        psycopg.Error: the server's error.
    """
    for res in results:
        if res.status != _DONE:
            raise psycopg.errors.error_from_result(res, encoding="utf-8")


def _first_row(results: list[Any], tx: Transformer) -> Any:
    """The first row of a statement's answer (a tuple, as psycopg's cursor gives it).

    Raises:
        psycopg.Error: the server's error (a ``UniqueViolation``, ...).
    """
    res = results[-1]
    if res.status != _OK:
        raise psycopg.errors.error_from_result(res, encoding="utf-8")
    if res.ntuples == 0:
        return None
    tx.set_pgresult(res)
    return tx.load_row(0, tuple)
