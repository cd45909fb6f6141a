"""What a commit of a SQLite store knows of its file after its previous commit (issue 29).

A commit checks the thread's claim token and its latest checkpoint, and needs the run's
compaction point and where the log's next piece goes (the last seq used, the last one
folded). Read from the file, that is three statements and a scan of the log's live rows.
But when this connection's previous commit was of the same run under the same token and
nothing has written the file since, the commit knows all of it already: what it read then,
updated with what it wrote. SQLite says whether anything else wrote the file: ``PRAGMA
data_version`` changes when another connection commits and not for this connection's own
commits. It is read inside the commit's ``BEGIN IMMEDIATE`` (which holds the file's write
lock, so nothing can change between that read and the commit's writes). The one fact a
commit cannot know ahead, whether its checkpoint's id is stored already, it knows for the
log's live rows (their ids are among what it knows) and lets the log row's insert check
for the indexed table (:data:`~._tail.put_piece`'s ``new``).
Every other write transaction of the store (claims, renewals, deletions, plain saves,
events recorded outside a commit) drops what it knows, and so does a commit that fails.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from ._tail import FOLDED

__all__ = ["LIVE_ROWS", "PRELUDE", "THREAD_TOP", "VERSION", "Known", "read_facts"]

VERSION = "PRAGMA data_version"
"""This connection's view of the file's version (a statement of its own: as a table-valued
function inside a ``SELECT`` it costs more than the rest of that statement)."""

PRELUDE = (
    "SELECT (SELECT token FROM claims WHERE thread_id = ? AND run_id IS NOT NULL), "
    "(SELECT earliest_seq FROM event_compactions WHERE run_id = ?), "
    f"COALESCE((SELECT MAX(seq) FROM checkpoints), 0), {FOLDED}, "
    "EXISTS (SELECT 1 FROM checkpoints WHERE id = ?)"
)
"""A commit's reads of the indexed tables when it knows nothing, one statement of index
lookups: the thread's claim token, the run's compaction point, the last seq of
``checkpoints``, the last folded one, whether the first checkpoint's id is there. The
thread's latest checkpoint there is one more lookup (:data:`THREAD_TOP`), the log's live
rows one scan (:data:`LIVE_ROWS`)."""
THREAD_TOP = ("SELECT id, ts_us, seq FROM checkpoints WHERE thread_id = ? "
              "ORDER BY ts_us DESC, seq DESC LIMIT 1")
LIVE_ROWS = "SELECT seq, id, thread_id, ts_us FROM log WHERE seq > ?"


@dataclass(slots=True)
class Known:
    """The file as a commit found and left it: the claim ``token`` checked on ``thread_id``,
    ``run_id``'s compaction point ``earliest``, the last seq used (``top``) and folded
    (``done``), the thread's latest checkpoint (``latest`` at ``(at, order)``: its
    timestamp in µs and seq) and the checkpoint ids of the log's live rows (``live``), all
    as of ``version`` (``PRAGMA data_version``)."""

    version: int
    thread_id: str
    token: int
    run_id: str
    earliest: int
    top: int
    done: int
    latest: str | None
    at: int
    order: int
    live: set[str]

    def holds(self, version: int, thread_id: str, token: int, run_id: str) -> bool:
        """Whether these facts are the file's now for a commit of ``run_id`` under
        ``token`` on ``thread_id`` (``version``: the data version read in its transaction)."""
        return (version == self.version and token == self.token
                and thread_id == self.thread_id and run_id == self.run_id)

    def placed(self, seq: int, done: int) -> None:
        """A piece was written as ``seq``, the log folded up to ``done``."""
        if done != self.done:  # folded: the log's live rows are the ones after it
            self.live.clear()
            self.done = done
        self.top = seq

    def saved(self, cid: str, ts_us: int, seq: int, done: int) -> None:
        """A checkpoint of the thread was written as piece ``seq``, the log folded up to
        ``done``."""
        if done != self.done:  # folded (as placed() does)
            self.live.clear()
            self.done = done
        self.top = seq
        self.live.add(cid)
        if self.latest is None or (ts_us, seq) > (self.at, self.order):
            self.latest, self.at, self.order = cid, ts_us, seq


def read_facts(db: sqlite3.Connection, version: int, thread_id: str, token: int,
               run_id: str, first: str) -> tuple[Known, int | None, bool]:
    """The facts a commit needs, read from the file (in the commit's transaction): them,
    the thread's claim token (``None``: no live claim) and whether ``first`` is stored."""
    held, earliest, top, done, stored = db.execute(
        PRELUDE, (thread_id, run_id, first)).fetchone()
    latest, at, order = db.execute(THREAD_TOP, (thread_id,)).fetchone() or (None, 0, 0)
    live: set[str] = set()
    for seq, cid, thread, ts_us in db.execute(LIVE_ROWS, (done,)):
        top = max(top, seq)
        if cid is not None:
            live.add(cid)
            if thread == thread_id and (latest is None or (ts_us, seq) > (at, order)):
                latest, at, order = cid, ts_us, seq
    facts = Known(version, thread_id, token, run_id, earliest or 0, max(top, done), done,
                  latest, at, order, live)
    return facts, held, bool(stored) or first in live
