"""Thread claims with fencing tokens in a SQLite store (seed 004), decided by the shared
rules of :mod:`.._claims` inside one ``BEGIN IMMEDIATE`` transaction (the file's write lock),
so two processes claiming one thread at once are serialised and exactly one gets it.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime

from ..._records._checks import check_id
from ...errors import StaleClaim
from .. import _claims as rules
from .._deletion import TOKEN_FLOOR
from ._tail import LIVE
from ._tx import SQLiteTransactions

__all__ = ["RELEASE", "SQLiteClaims", "raise_token_floor", "token_floor"]


class SQLiteClaims(SQLiteTransactions):
    """The claim operations of a SQLite store (a part of it)."""

    claim_ttl: float

    # -- claims with fencing tokens (seed 004) --

    @staticmethod
    def _claim_of(db: sqlite3.Connection, thread_id: str) -> tuple[rules.Claim | None, int]:
        row = db.execute("SELECT run_id, token, expires_us, ttl FROM claims WHERE thread_id = ?",
                         (thread_id,)).fetchone()
        if row is None:
            return None, 0
        run_id, token, expires_us, ttl = row
        if run_id is None:
            return None, int(token)
        claim = rules.Claim(run_id, int(token), rules.from_micros(expires_us), float(ttl))
        return claim, claim.token

    @staticmethod
    def _hold(db: sqlite3.Connection, thread_id: str, token: int) -> None:
        """Check that ``token`` is the thread's current claim (a fenced write's check: one
        indexed read, no claim object built).

        Raises:
            StaleClaim: it is not (taken over, released, never issued).
        """
        row = db.execute("SELECT token FROM claims WHERE thread_id = ? AND run_id IS NOT NULL",
                         (thread_id,)).fetchone()
        if row is None or row[0] != token:
            raise StaleClaim(thread_id, token, None if row is None else int(row[0]))

    @staticmethod
    def _put_claim(db: sqlite3.Connection, thread_id: str, claim: rules.Claim) -> None:
        db.execute("INSERT OR REPLACE INTO claims VALUES (?, ?, ?, ?, ?)",
                   (thread_id, claim.run_id, claim.token, rules.to_micros(claim.expires_at),
                    claim.ttl))

    async def claim(
        self, thread_id: str, run_id: str, *, now: datetime, ttl: float | None = None
    ) -> int:
        """Claim ``thread_id`` for ``run_id`` and return a new, strictly increasing fencing token.

        ``now`` is the claiming runtime's clock; the claim is live until ``now + ttl``
        (``claim_ttl`` by default). While a claim is live every other claim is refused, the
        same run's included: a claim belongs to the holder of its token.

        Raises:
            ThreadBusy: a claim on the thread is live.
        """
        token = self._take_claim(thread_id, run_id, now, ttl, fresh=False)
        assert token is not None  # only a fresh claim answers None
        return token

    async def claim_fresh(
        self, thread_id: str, run_id: str, *, now: datetime, ttl: float | None = None
    ) -> int | None:
        """:meth:`claim` for a run id no checkpoint has yet: the new token, or ``None``
        (nothing written, the thread not even looked at) when the store holds a checkpoint
        of ``run_id`` (``StoreFeatures.folded_claims``: a new run's free-run-id read rides on
        its claim's transaction, one transaction fewer a run).

        Raises:
            ThreadBusy: the run id is free and a claim on the thread is live.
        """
        return self._take_claim(thread_id, run_id, now, ttl, fresh=True)

    def _take_claim(
        self, thread_id: str, run_id: str, now: datetime, ttl: float | None, *, fresh: bool
    ) -> int | None:
        """:meth:`claim`'s and :meth:`claim_fresh`'s one transaction: ``None`` when ``fresh``
        and the store holds a checkpoint of ``run_id``."""
        check_id(thread_id, "thread_id", "claim")
        check_id(run_id, "run_id", "claim")
        moment = rules.utc_now(now, "claim")
        seconds = self.claim_ttl if ttl is None else rules.check_ttl(ttl, "claim")
        with self._tx() as db:
            if fresh and db.execute(_HAS_RUN, (run_id, run_id)).fetchone() is not None:
                return None
            current, last = self._claim_of(db, thread_id)
            if not last:  # a thread never claimed, or deleted: above every deleted token
                last = token_floor(db)
            claim = rules.take_claim(thread_id, run_id, current, last, moment, seconds)
            self._put_claim(db, thread_id, claim)
        return claim.token

    async def renew(self, thread_id: str, token: int, *, now: datetime) -> None:
        """Extend the claim ``token`` by its ttl from ``now``.

        Raises:
            StaleClaim: ``token`` is not the thread's current claim.
        """
        check_id(thread_id, "thread_id", "renew")
        moment = rules.utc_now(now, "renew")
        token = rules.check_token(token, "renew")
        with self._tx() as db:
            current = rules.current_or_stale(thread_id, token, self._claim_of(db, thread_id)[0])
            self._put_claim(db, thread_id, rules.renewed(current, moment))

    async def release(self, thread_id: str, token: int) -> None:
        """Release the claim ``token``; the thread is free at once.

        Raises:
            StaleClaim: ``token`` is not the thread's current claim.
        """
        check_id(thread_id, "thread_id", "release")
        token = rules.check_token(token, "release")
        with self._tx() as db:
            rules.current_or_stale(thread_id, token, self._claim_of(db, thread_id)[0])
            db.execute(RELEASE, (thread_id,))

    async def current_claim(self, thread_id: str) -> tuple[str, int, datetime] | None:
        """``(run_id, token, expires_at)`` of the thread's claim (live or expired), or ``None``."""
        check_id(thread_id, "thread_id", "current_claim")
        found = self._claim_of(self._conn, thread_id)[0]
        return None if found is None else found.as_tuple()


RELEASE = "UPDATE claims SET run_id = NULL, expires_us = NULL, ttl = NULL WHERE thread_id = ?"
"""Free the thread's claim (its token checked by the caller, in its transaction)."""

_HAS_RUN = ("SELECT 1 FROM checkpoints WHERE run_id = ? UNION ALL SELECT 1 FROM log WHERE "
            f"id IS NOT NULL AND run_id = ? AND {LIVE} LIMIT 1")
"""A row when the store holds a checkpoint of the run (indexed, or in the log's live rows:
where :meth:`latest` looks)."""


def token_floor(db: sqlite3.Connection) -> int:
    """The largest fencing token of a deleted thread (0 when none was deleted)."""
    row = db.execute("SELECT value FROM meta WHERE key = ?", (TOKEN_FLOOR,)).fetchone()
    return 0 if row is None else int(row[0])


def raise_token_floor(db: sqlite3.Connection, token: int) -> None:
    """Keep ``token``, a deleted thread's last, as the floor of new threads' tokens."""
    if token > token_floor(db):
        db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (TOKEN_FLOOR, str(token)))
