"""Connection and transactions of :class:`~._store.SQLiteCheckpointStore`: one write
transaction per operation (``BEGIN IMMEDIATE`` ... ``COMMIT``), reads that turn a SQLite
failure into a ``StoreFileError`` naming the file, closing and giving space back.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

from ...errors import StoreFileError
from .._closing import ClosingStore
from ._known import Known
from ._rows import PathWriter
from ._schema import file_error
from ._tail import fold

__all__ = ["SQLiteTransactions"]

_FAILURES = {
    "SQLITE_FULL": ("cannot be written: the disk (or the file's size limit) is full",
                    "free some space and retry; nothing of this operation was written"),
    "SQLITE_READONLY": ("cannot be written: the file or its directory is read-only",
                        "fix its permissions, or open it with readonly=True to read it"),
    "SQLITE_BUSY": ("is locked by another process (waited 5 s)",
                    "retry once the other writer is done"),
    "SQLITE_LOCKED": ("is locked by another connection", "retry once the other writer is done"),
    "SQLITE_CORRUPT": ("is damaged (the database image is malformed)",
                       "restore it from a backup"),
    "SQLITE_NOTADB": ("is damaged (not a database any more)", "restore it from a backup"),
}



class SQLiteTransactions(ClosingStore):
    """The connection of a SQLite store and its transactions (the base of its parts)."""

    path: str
    readonly: bool
    _db: sqlite3.Connection | None
    _cur: sqlite3.Cursor
    """One cursor of the connection for the statements of a transaction's bounds and of a
    plain commit (``Connection.execute`` makes a cursor a statement)."""
    _paths: PathWriter
    _facts: Known | None = None
    """What this connection's last commit left in the file, while nothing else wrote it
    (see :mod:`._known`)."""
    _snapshot: Callable[[], object] = staticmethod(lambda: None)
    """Removes the private copy of the file the store reads (see ``open_store``), if any."""

    # -- connection and transactions --

    @property
    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise sqlite3.ProgrammingError(
                f"{self!r} is closed; open a new SQLiteCheckpointStore on the file"
            )
        return self._db

    def _failure(self, exc: sqlite3.Error) -> StoreFileError:
        name = "_".join(str(getattr(exc, "sqlite_errorname", "")).split("_")[:2])
        problem, fix = _FAILURES.get(
            name, (f"failed: {exc}", "check the file, its directory and free disk space"))
        return file_error(self.path, problem, fix)

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: ``BEGIN IMMEDIATE`` ... ``COMMIT`` (rolled back on error).

        A SQLite failure (full disk, read-only file, lock timeout, damage) becomes a
        ``StoreFileError`` naming the file; nothing of the transaction is kept. What the
        last commit knew of the file (see :mod:`._known`) is dropped: this one changes it.
        """
        self._facts = None
        db = self._begin()
        try:
            yield db
        except BaseException as exc:
            failure = self._undo(db, exc)
            if failure is None:
                raise
            raise failure from None
        self._end(db)

    def _begin(self) -> sqlite3.Connection:
        """``BEGIN IMMEDIATE`` (the file's write lock) on the connection, which it returns.

        Raises:
            StoreFileError: the store is read-only, or SQLite refused (a lock timeout).
        """
        db = self._db
        if db is None:
            db = self._conn  # raises: the store is closed
        if self.readonly:
            raise file_error(self.path, "is open read-only", "open it without readonly=True "
                             "(and with write access to the file and its directory) to write")
        try:
            self._cur.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            raise self._failure(exc) from None
        return db

    def _undo(self, db: sqlite3.Connection, exc: BaseException) -> StoreFileError | None:
        """Roll back the transaction ``exc`` interrupted; the ``StoreFileError`` to raise
        instead of ``exc`` when it is SQLite's failure (``None``: raise ``exc`` itself)."""
        self._rollback(db)
        if isinstance(exc, sqlite3.Error) and not isinstance(exc, sqlite3.ProgrammingError):
            return self._failure(exc)
        return None

    def _end(self, db: sqlite3.Connection) -> None:
        """``COMMIT`` (rolled back, and a ``StoreFileError``, when SQLite refuses)."""
        try:
            self._cur.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback(db)
            raise self._failure(exc) from None

    @contextmanager
    def _folded(self) -> Iterator[sqlite3.Connection]:
        """:meth:`_tx` that first folds the log into the indexed tables and empties it (see
        :mod:`._tail`): for operations on many rows, which then see only those, and
        for deletions, which leave no copy of what they delete in the log's slots."""
        with self._tx() as db:
            fold(db, erase=True)
            yield db

    @contextmanager
    def _reading(self, db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        """Several reads as of one moment: a read transaction (in WAL mode, a snapshot), so a
        fold by another connection between them cannot move a row out of their sight; inside
        a transaction already, just that one."""
        if db.in_transaction:
            yield db
            return
        db.execute("BEGIN")
        try:
            yield db
        finally:
            if db.in_transaction:
                db.execute("COMMIT")

    def _rollback(self, db: sqlite3.Connection) -> None:
        self._paths.forget()
        self._facts = None
        if db.in_transaction:
            with suppress(sqlite3.Error):  # SQLite may have rolled back already
                db.execute("ROLLBACK")

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        """The rows of a read; a SQLite failure becomes a ``StoreFileError``."""
        try:
            return self._conn.execute(sql, params).fetchall()
        except sqlite3.ProgrammingError:
            raise
        except sqlite3.Error as exc:
            raise self._failure(exc) from None

    def close(self) -> None:
        """Close the connection; closing twice is harmless."""
        if self._db is not None:
            self._db.close()
            self._db = None
        self._snapshot()  # remove the copy a read-only store read, if any

    def vacuum(self) -> None:
        """Rebuild the file so it takes no more space than its data (``VACUUM``).

        ``prune`` and ``compact_events`` already give freed pages back (incremental
        auto-vacuum); this also defragments, and compacts a file migrated from an old layout.
        """
        with self._folded():
            pass  # refuse on a read-only store, like every write; the log goes in the tables
        try:
            self._conn.execute("VACUUM")
        except sqlite3.ProgrammingError:  # pragma: no cover
            raise
        except sqlite3.Error as exc:
            raise self._failure(exc) from None

    def _give_back(self) -> None:
        try:
            # executescript runs the pragma to the end (execute() frees one page only)
            self._conn.executescript("PRAGMA incremental_vacuum;")
        except sqlite3.Error as exc:  # pragma: no cover - space is given back next time
            del exc
