"""Opening a SQLite store file without harming it (SPEC §5).

A file is looked at read-only first and identified (SQLite header, the store's ``meta`` table
and schema version, the table layout) before anything writes to it. Only a new or empty file
becomes a store; only a store of a version this build can write is opened for writing; a file
that is not writable (or in a directory that is not) is opened for reading. Every refusal is a
:class:`~pytest_graphflow.errors.StoreFileError` (or ``UnsupportedFormat`` for another store
version) naming the file and the fix, and leaves the file's bytes as they were.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

from ...errors import UnsupportedFormat
from ._migrate import (
    migrate_v1,
    migrate_v2,
    migrate_v3,
    migrate_v4,
    migrate_v5,
    migrate_v6,
)
from ._schema import (
    APPLICATION_ID,
    EVENT_PIECES,
    LAYOUT,
    LAYOUT_V3,
    LAYOUT_V4,
    LAYOUT_V5,
    LAYOUT_V6,
    LOG,
    PASS_EXISTING,
    PASS_STORE,
    SCHEMA_VERSION,
    V1_CHECKPOINTS,
    WAITING_INDEX,
    create_statements,
    file_error,
    layout,
)

__all__ = ["SYNCHRONOUS", "open_store"]

_HEADER = b"SQLite format 3\x00"

def _identify(path: str, *, shown: str | None = None, readonly: bool = False) -> int | None:
    """The schema version of the store in ``path``; ``None`` for a new or empty file.

    Reads only (the file is opened with ``mode=ro``). Errors name ``shown`` (the user's path,
    when ``path`` is a snapshot of it), else ``path``; opened ``readonly``, they do not offer
    a new path (nothing would create it).

    Raises:
        StoreFileError: the file is not a store (another kind of file, another SQLite
            database, another table layout) or cannot be read (corrupt).
        UnsupportedFormat: a store written by a newer pytest-graphflow.
    """
    name = path if shown is None else shown
    pass_store = PASS_EXISTING if readonly else PASS_STORE
    try:
        with open(path, "rb") as f:
            header = f.read(len(_HEADER))
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise file_error(name, "is a directory", pass_store) from None
    except OSError as exc:
        raise file_error(name, f"cannot be read ({exc.strerror})",
                         "check its permissions, or pass another path") from None
    if not header:
        return None
    if header != _HEADER:
        raise file_error(name, "is not a SQLite database (its first bytes are not SQLite's "
                         "header: another kind of file, or damaged)", pass_store)
    # With no journal beside it the file holds everything: read it as immutable, which
    # creates no -wal/-shm files. Otherwise read it (and its journal) read-only.
    mode = "mode=ro" if _has_journal(path) else "immutable=1"
    try:
        probe = sqlite3.connect(f"{Path(path).absolute().as_uri()}?{mode}", uri=True)
    except sqlite3.Error as exc:
        raise file_error(name, f"cannot be opened for reading ({exc})",
                         "check the file's and its directory's permissions") from None
    try:
        tables = layout(probe)
        (app_id,) = probe.execute("PRAGMA application_id").fetchone()
        (user_version,) = probe.execute("PRAGMA user_version").fetchone()
        if not tables and app_id == 0 and user_version == 0:
            return None  # an empty SQLite database: nothing to harm
        version = _stored_version(probe, tables)
    except sqlite3.DatabaseError as exc:
        if getattr(exc, "sqlite_errorname", "").startswith("SQLITE_CANTOPEN"):
            raise file_error(name, f"cannot be opened for reading ({exc}): SQLite cannot open "
                             "it or its -wal/-shm files", "check the permissions of the file, "
                             "its -wal and -shm files and its directory") from None
        raise file_error(name, f"cannot be read as SQLite ({exc}): the file is damaged",
                         "restore it from a backup, or pass another path") from None
    finally:
        probe.close()
    if version is None:
        raise file_error(name, "is a SQLite database but not a pytest-graphflow store (no "
                         "store meta table)", pass_store)
    if version > SCHEMA_VERSION:
        raise UnsupportedFormat(
            f"store file {name!r} has schema version {version}, written by a newer "
            f"pytest-graphflow; this build reads schema versions up to {SCHEMA_VERSION}. "
            "Upgrade pytest-graphflow to open it."
        )
    expected = {1: V1_CHECKPOINTS, 2: LAYOUT["checkpoints"], 3: LAYOUT["checkpoints"],
                4: LAYOUT["checkpoints"], 5: LAYOUT["checkpoints"], 6: LAYOUT["checkpoints"],
                SCHEMA_VERSION: LAYOUT["checkpoints"]}.get(version)
    if expected is None or tables.get("checkpoints") != expected or (
        version >= 2 and tables != {4: LAYOUT_V4, 5: LAYOUT_V5, 6: LAYOUT_V6,
                                    SCHEMA_VERSION: LAYOUT}.get(version, LAYOUT_V3)
    ):
        raise file_error(name, f"says schema version {version} but its tables have another "
                         "layout (changed by hand or by another program)",
                         "restore it from a backup, or pass another path")
    return version


def _stored_version(db: sqlite3.Connection, layout: dict[str, list[str]]) -> int | None:
    if layout.get("meta") != ["key", "value"]:
        return None
    row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None:
        return None
    try:
        return int(row[0])
    except (TypeError, ValueError):
        return None


def _writable(path: str) -> bool:
    """Whether the file (or, when missing, its directory) and its directory can be written."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.access(folder, os.W_OK):
        return False
    return not os.path.exists(path) or os.access(path, os.W_OK)


_READABLE = (2, 3, 4, 5, 6, SCHEMA_VERSION)
"""Schema versions read as they are (opened read-only: no ``log`` table before version 4
and no ``event_pieces`` before version 6, so the connection gets empty ones of its own, see
:func:`_open_readonly`; the log's ``last``, new in version 7, only a fold reads)."""

SYNCHRONOUS = ("normal", "full", "off")
"""The values of ``SQLiteCheckpointStore(synchronous=...)`` (SQLite's ``PRAGMA synchronous``)."""


def open_store(path: str, *, readonly: bool, synchronous: str = "normal"
               ) -> tuple[sqlite3.Connection, bool, str | None]:
    """Open (creating or migrating if needed) the store ``path``; a writable connection
    commits with ``PRAGMA synchronous`` set to ``synchronous`` (one of :data:`SYNCHRONOUS`).

    Returns:
        The connection (autocommit mode), whether it is read-only, and the temporary
        directory of the snapshot it reads (see :func:`_snapshot`; the caller removes it when
        it closes the connection), or ``None``.

    Raises:
        StoreFileError, UnsupportedFormat: see :func:`_identify`; also a missing file opened
            ``readonly``, a new file in a directory that cannot be written, a failed migration.
    """
    if path == ":memory:":
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        _create(db)
        return db, False, None
    if _stranded_journal(path):
        copy = _snapshot(path)
        try:
            version = _identify(copy, shown=path, readonly=readonly)
            if version not in _READABLE:
                raise _needs_migration(path, version)
            return _open_readonly(copy, shown=path), True, os.path.dirname(copy)
        except BaseException:
            shutil.rmtree(os.path.dirname(copy), ignore_errors=True)
            raise
    version = _identify(path, readonly=readonly)
    writable = not readonly and _writable(path)
    if version is None:
        if readonly:
            raise file_error(path, "does not exist (or is empty), and it was opened read-only",
                             "pass the path of an existing store file")
        if not writable:
            raise file_error(path, "cannot be created: the file or its directory is not "
                             "writable", "pass a path in a writable directory")
    if not writable:
        if version == 1:  # a version-2 file reads as it is (its rows have no path tail)
            raise _needs_migration(path, version)
        return _open_readonly(path), True, None
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        db.execute("PRAGMA busy_timeout = 5000")
        if version is None:
            _create(db)
        elif version == 1:
            migrate_v1(db, path)
        elif version == 2:
            migrate_v2(db)
        elif version == 3:
            migrate_v3(db)
        elif version == 4:
            migrate_v4(db)
        elif version == 5:
            migrate_v5(db)
        elif version == 6:
            migrate_v6(db)
        db.execute(WAITING_INDEX)  # a file written before waiting() gets it (no-op after)
        if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            db.execute("PRAGMA journal_mode = WAL")
        db.execute(f"PRAGMA synchronous = {synchronous.upper()}")  # one of SYNCHRONOUS
    except sqlite3.Error as exc:
        db.close()
        name = getattr(exc, "sqlite_errorname", "")
        if name.startswith("SQLITE_READONLY") and version in _READABLE:
            return _open_readonly(path), True, None  # read-only after all (a read-only mount)
        raise file_error(path, f"could not be prepared for writing ({exc})",
                         "check free disk space and permissions, or open it read-only "
                         "(SQLiteCheckpointStore(path, readonly=True))") from None
    except BaseException:
        db.close()
        raise
    return db, False, None


def _needs_migration(path: str, version: int | None) -> UnsupportedFormat:
    return UnsupportedFormat(
        f"store file {path!r} has schema version {version}, which this build migrates "
        f"to version {SCHEMA_VERSION} when it opens the file for writing; it was opened "
        "read-only. Open it once with write access (SQLiteCheckpointStore(path)), or "
        "read it with the pytest-graphflow version that wrote it."
    )


def _stranded_journal(path: str) -> bool:
    """A writer's ``-wal`` is beside the file without its ``-shm`` index, in a directory this
    process cannot write: SQLite cannot read the file in place (it must create the index).

    No writer is running then: a running writer keeps the ``-shm`` file open (the store
    never uses exclusive locking), and one that closes cleanly removes both files.
    """
    return (os.path.exists(f"{path}-wal") and not os.path.exists(f"{path}-shm")
            and not os.access(os.path.dirname(os.path.abspath(path)), os.W_OK))


def _snapshot(path: str) -> str:
    """A copy of the file and its ``-wal`` in a new private temporary directory (where SQLite
    can make the ``-shm`` index), to read the store as it is now; the copy's path.

    The two files are copied only while no writer touches them: if either changes during
    the copy, or a ``-shm`` appears (a writer opened the file), the copy is refused rather
    than read, since a torn copy could read wrong data.

    Raises:
        StoreFileError: the file changed while it was copied, or it cannot be copied.
    """
    def stamp() -> list[tuple[int, int, int]]:
        return [(st.st_ino, st.st_size, st.st_mtime_ns)
                for st in (os.stat(path), os.stat(f"{path}-wal"))]

    folder = tempfile.mkdtemp(prefix="graphflow-snapshot-")
    copy = os.path.join(folder, os.path.basename(path))
    try:
        before = stamp()
        shutil.copyfile(path, copy)
        shutil.copyfile(f"{path}-wal", f"{copy}-wal")
        changed = stamp() != before or os.path.exists(f"{path}-shm")
    except FileNotFoundError:  # the journal went away: a writer opened and checkpointed it
        changed = True
    except OSError as exc:
        shutil.rmtree(folder, ignore_errors=True)
        raise file_error(path, f"cannot be read in place (a writer's journal "
                         f"{os.path.basename(path)}-wal is beside it without its -shm index, "
                         "and the directory is read-only), nor copied to be read "
                         f"({exc.strerror or exc})", "free space in the temporary directory "
                         "(TMPDIR), or read it where the directory is writable") from None
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    if changed:
        shutil.rmtree(folder, ignore_errors=True)
        raise file_error(path, "changed while it was being copied to be read (a writer "
                         "opened it)", "retry: while a writer has it open, SQLite reads it in "
                         "place")
    return copy


def _has_journal(path: str) -> bool:
    return os.path.exists(f"{path}-wal") or os.path.exists(f"{path}-journal")


def _open_readonly(path: str, *, shown: str | None = None) -> sqlite3.Connection:
    """A read-only connection. Without a journal beside it, the file holds everything and
    is read as immutable (SQLite then needs no -wal/-shm files, so a read-only directory
    works); with one, SQLite reads the file and its journal read-only. Errors name
    ``shown`` (the user's path, when ``path`` is a snapshot of it), else ``path``."""
    name = path if shown is None else shown
    mode = "mode=ro" if _has_journal(path) else "immutable=1"
    uri = f"{Path(path).absolute().as_uri()}?{mode}"
    db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    try:
        db.execute("PRAGMA busy_timeout = 5000")
        if db.execute("SELECT COUNT(*) FROM sqlite_master WHERE name = 'log'").fetchone()[0] == 0:
            # a file before schema version 4 has no log: an empty one of the connection's
            # own (in its temporary database; the file is not touched) reads the same
            db.execute(LOG.replace("TABLE IF NOT EXISTS", "TEMP TABLE", 1))
        if db.execute("SELECT COUNT(*) FROM sqlite_master WHERE name = 'event_pieces'"
                      ).fetchone()[0] == 0:
            # nor event_pieces before version 6 (its index is not needed: it stays empty)
            db.execute(EVENT_PIECES[0].replace("TABLE IF NOT EXISTS", "TEMP TABLE", 1))
    except sqlite3.Error as exc:
        db.close()
        raise file_error(name, f"cannot be read read-only ({exc}): SQLite cannot open it or "
                         f"its journal ({os.path.basename(name)}-wal/-shm)",
                         "check the permissions of the file, its -wal and -shm files and its "
                         "directory") from None
    return db


def _create(db: sqlite3.Connection) -> None:
    """Lay out a new store (incremental auto-vacuum must be set before the first table)."""
    db.execute("PRAGMA auto_vacuum = INCREMENTAL")
    db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    db.execute("BEGIN IMMEDIATE")
    try:
        for statement in create_statements():
            db.execute(statement)
        db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)",
                   (str(SCHEMA_VERSION),))
        db.execute("INSERT OR IGNORE INTO meta VALUES ('application', ?)",
                   (json.dumps("pytest-graphflow"),))
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
