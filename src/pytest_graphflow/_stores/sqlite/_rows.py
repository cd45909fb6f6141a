"""Checkpoint rows of the SQLite store.

A checkpoint's ``visited`` nodes are not copied into every row: they are kept as a chain of
path segments (table ``paths``: a parent segment, the total length, the nodes it adds), and a
row names the last segment of its path's prefix plus the few nodes after it (its *tail*, fewer
than :data:`TAIL`, kept as ``visited`` in the row's JSON; schema version 3). A segment is
written once every :data:`TAIL` steps, so most steps write no ``paths`` row at all; a
checkpoint costs the same at step 10,000 as at step 10, and the file grows linearly with the
steps. Reading joins the chain once for every checkpoint that shares it (a page of
``history()``). Rows of schema version 2 have no tail (every step had its segment), which
reads the same way.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from pydantic import ValidationError
from pydantic_core import PydanticSerializationError, to_json

from ..._records._checkpoint import FORMAT_VERSION, Checkpoint
from .. import _claims as rules
from .._wire import checkpoint_json
from ._schema import file_error

__all__ = ["SELECT", "TAIL", "PathWriter", "decode", "encode", "with_tail"]

SELECT = "SELECT id, format_version, data, path_id, path_len FROM checkpoints"
"""The columns :func:`decode` reads."""

_Row = tuple[str, int, str, int | None, int]

_CHAIN = """
WITH RECURSIVE chain(id, parent, length, nodes) AS (
    SELECT id, parent, length, nodes FROM paths WHERE id = ?
    UNION ALL
    SELECT p.id, p.parent, p.length, p.nodes FROM paths p JOIN chain c ON p.id = c.parent
)
SELECT id, length, nodes FROM chain
"""

_CACHED_RUNS = 256

_NO_VISITED = {"visited"}

SPAN = 64
"""Segments an anchor segment covers (see :class:`PathWriter`)."""

TAIL = 16
"""A row keeps at most ``TAIL - 1`` visited nodes itself; its path's prefix is a segment."""

_SAME = "SELECT 1 FROM paths WHERE id = ? AND run_id = ? AND length = ?"
_EXTEND = (
    "INSERT INTO paths (run_id, parent, length, nodes) SELECT ?, ?, ?, ? "
    "WHERE EXISTS (SELECT 1 FROM paths WHERE id = ? AND run_id = ? AND length = ?)"
)


class PathWriter:
    """Writes each checkpoint's visited path as the segment it adds to the run's last path.

    Every :data:`SPAN`-th segment of a chain covers the last ``SPAN`` steps at once and hangs
    from the previous such segment, so reading any path walks at most ``n / SPAN + SPAN``
    segments (the file keeps each node about twice). It remembers the last path it wrote
    per run (a bounded number of runs); a checkpoint whose path does not extend it (a resume
    in another process, time travel) starts a new chain.

    A path is a tuple, or the runtime's snapshot of its run's append-only log (an object
    with ``snapshot() -> (log, n)``, the path being ``log[:n]``): a path of the same log as
    the last one extends it, known in O(1), so a step costs the same at step 100,000 as at
    step 10 (a tuple is compared node by node).

    A commit passes ``version``, the file's ``PRAGMA data_version`` read in its transaction:
    a segment this connection wrote or found at that same version is still there (no other
    connection wrote since, and this one forgets what it remembers when it deletes paths or
    rolls back), so it is used without reading it again.
    """

    def __init__(self) -> None:
        # run -> (nodes, length, its segment id, anchor segment id, anchor length, steps since,
        # the data version it was written or found at)
        self._last: dict[str, tuple[Sequence[str], int, int, int, int, int, int | None]] = {}

    def place(self, db: sqlite3.Connection, run_id: str, visited: Sequence[str] | Snapshot,
              version: int | None = None) -> tuple[int | None, tuple[str, ...]]:
        """Where the row of a checkpoint with path ``visited`` keeps it: the id of the segment
        ending in its prefix (written if needed; ``None`` for an empty prefix) and its tail.

        The prefix is cut at a multiple of :data:`TAIL`, so consecutive checkpoints of a run
        share one segment and only every ``TAIL``-th step writes one.
        """
        nodes, n = _nodes(visited)
        cut = n - n % TAIL
        cached = self._last.get(run_id)
        if cached is not None and cached[0] is nodes and cached[1] == cut and cut \
                and version is not None and cached[6] == version:
            # The segment this connection wrote (or found) for the same log at this data
            # version: still there (what _write checks first, without a call).
            return cached[2], tuple(nodes[cut:n])
        return self._write(db, run_id, nodes, cut, version), tuple(nodes[cut:n])

    def forget(self) -> None:
        """Drop what it remembers (after a rolled-back transaction or a deletion)."""
        self._last.clear()

    def write(self, db: sqlite3.Connection, run_id: str, visited: tuple[str, ...]) -> int | None:
        """The id of the path segment ending in ``visited`` (written if needed); ``None``
        for an empty path."""
        return self._write(db, run_id, visited, len(visited))

    def _write(self, db: sqlite3.Connection, run_id: str, nodes: Sequence[str], n: int,
               version: int | None = None) -> int | None:
        """:meth:`write` for the path ``nodes[:n]``."""
        if n == 0:
            return None
        cur: sqlite3.Cursor | None = None
        anchor: tuple[int, int, int] | None = None
        cached = self._last.get(run_id)
        if cached is not None:
            prev, m, pid, anchor_id, anchor_len, since, seen = cached
            # The segment it hangs from must still be there and be this run's path of that
            # length (another process may have pruned it, and SQLite reuses a deleted row's
            # id): the insert checks it in the same statement.
            if m == n and _starts_with(nodes, prev, m):
                if version is not None and seen == version:
                    return pid  # nothing else wrote the file since it was there
                if db.execute(_SAME, (pid, run_id, m)).fetchone() is not None:
                    self._last[run_id] = (*cached[:6], version)
                    return pid
            elif m < n and _starts_with(nodes, prev, m):
                parent, start = (anchor_id, anchor_len) if since + 1 >= SPAN else (pid, m)
                cur = db.execute(_EXTEND, (run_id, parent, n, json.dumps(nodes[start:n]),
                                           parent, run_id, start))
                if cur.rowcount != 1:
                    cur = None
                elif parent == pid:
                    anchor = (anchor_id, anchor_len, since + 1)
        if cur is None:
            cur = db.execute("INSERT INTO paths (run_id, parent, length, nodes) "
                             "VALUES (?, NULL, ?, ?)", (run_id, n, json.dumps(nodes[:n])))
        new_id = cur.lastrowid
        assert new_id is not None
        if anchor is None:  # this segment is the new anchor
            anchor = (new_id, n, 0)
        self._last.pop(run_id, None)
        self._last[run_id] = (nodes, n, new_id, *anchor, version)
        if len(self._last) > _CACHED_RUNS:
            del self._last[next(iter(self._last))]
        return new_id


class Snapshot(Protocol):
    """The runtime's visited path: ``log[:n]`` of a log that is only appended to."""

    def snapshot(self) -> tuple[list[str], int]:
        """``(log, n)``."""
        ...

    def __len__(self) -> int: ...


def _nodes(visited: Sequence[str] | Snapshot) -> tuple[Sequence[str], int]:
    """``(nodes, n)``: the path is ``nodes[:n]``."""
    if type(visited) is tuple:
        return visited, len(visited)
    snapshot = getattr(visited, "snapshot", None)
    if snapshot is not None:
        log: list[str]
        log, n = snapshot()
        return log, n
    nodes = tuple(visited)  # type: ignore[arg-type]
    return nodes, len(nodes)


def _starts_with(nodes: Sequence[str], prev: Sequence[str], m: int) -> bool:
    """Whether ``nodes`` starts with ``prev[:m]``: at once for one append-only log (or one
    tuple), else node by node."""
    return nodes is prev or tuple(nodes[:m]) == tuple(prev[:m])


def encode(path: str, cp: Checkpoint) -> str:
    """The row data of ``cp`` (JSON without ``visited``; :func:`with_tail` adds the tail).

    Raises:
        InvalidArgument: when ``cp`` holds a value with no JSON/UTF-8 form.
    """
    return checkpoint_json(cp, repr(path), _NO_VISITED)


def with_tail(data: str, tail: tuple[str, ...]) -> str:
    """Row data ``data`` (from :func:`encode`) with the path's ``tail`` as its ``visited``.

    ``_wire.with_visited(data, _wire.nodes_array(tail))``, inline: every SQLite step with a
    tail calls this, and the two calls would be two frames more a step (the call ceilings
    of tests/stores/test_sqlite_plain_commit.py)."""
    if not tail:
        return data
    try:
        nodes = to_json(tail).decode()
    except (PydanticSerializationError, UnicodeError, ValueError):  # a lone surrogate
        nodes = json.dumps(tail)
    return f"{data[:-1]},\"visited\":{nodes}}}"


def _paths(db: sqlite3.Connection, wanted: Iterable[int]) -> dict[int, tuple[str, ...]]:
    """The visited tuple of each path id in ``wanted`` (a shared chain is read once)."""
    ids = set(wanted)
    out: dict[int, tuple[str, ...]] = {}
    for pid in sorted(ids, reverse=True):  # later segments first: they extend earlier ones
        if pid in out:
            continue
        chain = db.execute(_CHAIN, (pid,)).fetchall()
        chain.reverse()
        nodes: list[str] = []
        for cid, length, segment in chain:
            nodes.extend(json.loads(segment))
            if len(nodes) != length:
                raise ValueError(f"path segment {cid} has length {len(nodes)}, not {length}")
            if cid in ids and cid not in out:
                out[cid] = tuple(nodes)
    return out


def decode(path: str, db: sqlite3.Connection, rows: Sequence[_Row]) -> list[Checkpoint]:
    """Checkpoints from rows of :data:`SELECT`.

    Raises:
        UnsupportedFormat: a row was written in another checkpoint format version.
        StoreFileError: a row (or its path) is damaged.
    """
    for cid, version, *_ in rows:
        if version != FORMAT_VERSION:
            raise rules.unsupported_format(cid, version)
    try:
        paths = _paths(db, (r[3] for r in rows if r[3] is not None))
    except (ValueError, TypeError) as exc:
        raise file_error(path, f"has a damaged checkpoint path ({exc})",
                         "restore it from a backup, or delete the run's checkpoints") from None
    out: list[Checkpoint] = []
    for cid, _, data, pid, length in rows:
        try:
            cp = Checkpoint.model_validate_json(data)
        except ValidationError as exc:
            raise file_error(path, f"has a damaged checkpoint {cid!r} ("
                             f"{exc.error_count()} problem(s), first: {_first(exc)})",
                             "restore it from a backup, or delete it with "
                             f"store.delete({cid!r})") from None
        visited = cp.visited if pid is None else paths[pid] + cp.visited  # prefix + tail
        if len(visited) != length:
            raise file_error(path, f"has a damaged checkpoint {cid!r} (its path has "
                             f"{len(visited)} nodes, the row says {length})",
                             f"restore it from a backup, or delete it with store.delete({cid!r})")
        cp.visited = visited
        out.append(cp)
    return out


def _first(exc: ValidationError) -> Any:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    return f"{loc}: {err['msg']}" if loc else err["msg"]
