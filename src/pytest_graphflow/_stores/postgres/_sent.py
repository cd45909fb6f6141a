"""A statement sent whose answer is read later (issue 29): a step's commit on the wire while
the runtime works out the next step.

:meth:`~._conn.PgConnections.send_one` sends a step's statement on this thread's sync
connection (or the async pool's hot connection) and returns a :class:`Sent`;
:meth:`~._conn.PgConnections.answer` reads its answer. Up to two are on a connection at once
(libpq's pipeline mode, each statement its own transaction; answers are read in order: the
second's reads the first's first). Until they are read the connection is theirs: any other
operation of the store on it (a node reading the store, a claim's renewal) reads the answers
first and keeps them here for :meth:`~._conn.PgConnections.answer` (and leaves pipeline
mode), so the operation sees the steps' commits, as it would have without the overlap.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg.abc import Transformer

from ._prepared import Statement

__all__ = ["Sent"]


class Sent:
    """One statement sent on ``conn`` (``hot``: the pool's hot connection and its cursor,
    given back once its answer is read; ``None``: a thread's sync connection) and, once
    read (``done``), its answer: the first ``row``, or the ``error`` reading it raised."""

    __slots__ = ("conn", "done", "error", "hot", "params", "row", "statement", "tx")

    def __init__(self, conn: Any, hot: tuple[Any, Any] | None, tx: Transformer,
                 statement: Statement, params: Sequence[Any]) -> None:
        self.conn = conn
        self.hot = hot
        self.tx = tx
        self.statement = statement
        self.params = params
        self.done = False
        self.row: Any = None
        self.error: BaseException | None = None
