"""Thread claims with fencing tokens in PostgreSQL (seed 004), decided by the shared rules of
:mod:`.._claims` under a row lock on the thread's claim row.

A free or new thread is claimed in one statement (:data:`_TAKE`: it inserts the row, or
updates a released or expired one, and answers the token; one round trip). Any other claim,
and ``renew``, lock the row (``SELECT ... FOR UPDATE``, after making sure it exists), decide
with the rules, write and commit: two processes claiming one thread at once are serialised by
the server, and exactly one of them gets it. ``release`` is one conditional
``UPDATE`` (one round trip) that frees the row only while the token holds it. A commit fenced
by a token locks the row in share mode (:meth:`PgClaims._fence`), so no claim can change
hands between the check and the write of the same transaction.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any

from ..._records._checks import check_id
from ...errors import StaleClaim
from .. import _claims as rules
from .._deletion import TOKEN_FLOOR
from ._conn import Cursor, PgConnections
from ._events import events_lock_key, share_events_lock

__all__ = ["RELEASE", "PgClaims"]

_TAKE = (
    "WITH lock AS (SELECT pg_try_advisory_xact_lock_shared(hashtextextended(%s, 0)) AS got), "
    "seen AS (SELECT 1 FROM claims WHERE thread_id = %s), "
    "ins AS (INSERT INTO claims (thread_id, token, run_id, expires_us, ttl) SELECT %s, "
    "COALESCE((SELECT value::bigint FROM meta WHERE key = %s), 0) + 1, %s, %s, %s "
    "WHERE (SELECT got FROM lock) AND NOT EXISTS (SELECT 1 FROM seen) "
    "ON CONFLICT (thread_id) DO NOTHING RETURNING token), "
    "upd AS (UPDATE claims SET run_id = %s, token = token + 1, expires_us = %s, ttl = %s "
    "WHERE (SELECT got FROM lock) AND thread_id = %s AND (run_id IS NULL OR expires_us <= %s) "
    "RETURNING token) "
    "SELECT token FROM ins UNION ALL SELECT token FROM upd")
"""A free or new thread's claim in one statement (one round trip), or nothing written.

It takes the run's events lock shared without waiting (``_events.MARK_CLAIMS``: a merge of
the run's events under way makes it write nothing), then either inserts the thread's row
when the statement's snapshot has none (its token above every deleted thread's,
:data:`TOKEN_FLOOR`; a row another claim inserted meanwhile makes it write nothing), or
updates the row it has when the claim on it was released or expired (locked, and re-checked
on its newest version: a row deleted meanwhile, or claimed by another, is not written). The
token and expiry are the ones :func:`.._claims.take_claim` gives. It answers the new token,
or no row when it wrote nothing: :meth:`PgClaims.claim` then decides in a transaction (and
refuses a live claim with ``ThreadBusy``)."""

_GOT = "(SELECT got FROM lock)"
_TAKE_FRESH = (
    "WITH used AS (SELECT EXISTS (SELECT 1 FROM checkpoints WHERE run_id = %s) AS taken), "
    + _TAKE[len("WITH "):].replace(_GOT, f"{_GOT} AND NOT (SELECT taken FROM used)")
    + " UNION ALL SELECT -1 FROM used WHERE taken")
""":data:`_TAKE` for a run id no checkpoint has yet (``claim_fresh``: the free-run-id read
and the claim in one round trip). It writes nothing when a checkpoint of the run exists and
answers ``-1`` then; else what :data:`_TAKE` answers. Built from :data:`_TAKE`'s text (its
writes guarded by one more condition; the run id its first parameter), so a change to
:data:`_TAKE` is a change to it."""
assert _TAKE_FRESH.count("NOT (SELECT taken FROM used)") == 2  # both of _TAKE's writes

_RELEASE = ("UPDATE claims SET run_id = NULL, expires_us = NULL, ttl = NULL WHERE thread_id = %s "
            "AND token = %s AND run_id IS NOT NULL RETURNING 1")
RELEASE = _RELEASE
"""The release of a claim ``token`` (frees the row only while the token holds it)."""


class PgClaims:
    """The claim operations of :class:`PostgresCheckpointStore` (a mixin)."""

    claim_ttl: float

    def _tx(self, *, pipeline: bool = False) -> AbstractAsyncContextManager[Cursor]:
        raise NotImplementedError  # pragma: no cover - the store's

    def _one(self) -> AbstractAsyncContextManager[Cursor]:  # pragma: no cover - the store's
        raise NotImplementedError

    _pg: PgConnections

    @staticmethod
    async def _claim_row(
        cur: Cursor, thread_id: str, *, lock: str = "FOR UPDATE"
    ) -> tuple[rules.Claim | None, int]:
        """The thread's claim (``None`` when released or never taken) and its last token."""
        await cur.execute("SELECT run_id, token, expires_us, ttl FROM claims "
                          f"WHERE thread_id = %s {lock}", (thread_id,))
        row = await cur.fetchone()
        if row is None:
            return None, 0
        run_id, token, expires_us, ttl = row
        if run_id is None:
            return None, int(token)
        claim = rules.Claim(run_id, int(token), rules.from_micros(int(expires_us)), float(ttl))
        return claim, claim.token

    @staticmethod
    async def _put_claim(cur: Cursor, thread_id: str, claim: rules.Claim) -> None:
        await cur.execute(
            "UPDATE claims SET run_id = %s, token = %s, expires_us = %s, ttl = %s "
            "WHERE thread_id = %s",
            (claim.run_id, claim.token, rules.to_micros(claim.expires_at), claim.ttl, thread_id))

    @classmethod
    async def _fence(cls, cur: Cursor, thread_id: str, token: int) -> rules.Claim:
        """Check, inside a commit's transaction, that ``token`` is the thread's current claim;
        the row stays share-locked until the commit ends.

        Raises:
            StaleClaim: it is not (taken over, released, never issued).
        """
        current = (await cls._claim_row(cur, thread_id, lock="FOR SHARE"))[0]
        return rules.current_or_stale(thread_id, token, current)

    def _take_params(self, thread_id: str, run_id: str, now: datetime, ttl: float | None
                     ) -> tuple[datetime, float, tuple[Any, ...]]:
        """A claim's arguments checked: its moment, its ttl in seconds, and :data:`_TAKE`'s
        parameters (the claim :func:`rules.take_claim` gives a free or new thread)."""
        check_id(thread_id, "thread_id", "claim")
        check_id(run_id, "run_id", "claim")
        moment = rules.utc_now(now, "claim")
        seconds = self.claim_ttl if ttl is None else rules.check_ttl(ttl, "claim")
        taken = rules.take_claim(thread_id, run_id, None, 0, moment, seconds)
        expires = rules.to_micros(taken.expires_at)
        return moment, seconds, (
            events_lock_key(run_id), thread_id, thread_id, TOKEN_FLOOR, run_id, expires,
            seconds, run_id, expires, seconds, thread_id, rules.to_micros(moment))

    async def claim(
        self, thread_id: str, run_id: str, *, now: datetime, ttl: float | None = None
    ) -> int:
        """Claim ``thread_id`` for ``run_id`` and return a new, strictly increasing fencing token.

        ``now`` is the claiming runtime's clock; the claim is live until ``now + ttl``
        (``claim_ttl`` by default). While a claim is live every other claim is refused, the
        same run's included: a claim belongs to the holder of its token.

        Raises:
            ThreadBusy: another run holds a live claim on the thread.
        """
        moment, seconds, params = self._take_params(thread_id, run_id, now, ttl)
        # A free or new thread: one statement. The claim it writes is take_claim's.
        found = await self._pg.fetch_one(_TAKE, params)
        if found is not None:
            return int(found[0])
        while True:
            # Anything else (a live claim, a row the statement could not take): pipelined,
            # BEGIN, the insert and the locking read in one round trip, the update and COMMIT
            # in one more.
            async with self._tx(pipeline=True) as cur:
                # A new row starts above every deleted thread's tokens (see _deletion).
                await cur.execute("INSERT INTO claims (thread_id, token) VALUES (%s, COALESCE("
                                  "(SELECT value::bigint FROM meta WHERE key = %s), 0)) "
                                  "ON CONFLICT (thread_id) DO NOTHING", (thread_id, TOKEN_FLOOR))
                # The run's events lock, shared, before the claim row (see
                # ``_events.MARK_CLAIMS``): a merge of the run's events under way ends first.
                await share_events_lock(cur, run_id)
                current, last = await self._claim_row(cur, thread_id)
                claim = rules.take_claim(thread_id, run_id, current, last, moment, seconds)
                await self._put_claim(cur, thread_id, claim)
            if cur.rowcount == 1:
                return claim.token
            # delete_thread removed the row while this claim waited for its lock: the token
            # decided from nothing could repeat a deleted thread's, and the update wrote
            # nothing (the transaction changed nothing); take the thread afresh, above the
            # floor that deletion raised.

    async def claim_fresh(
        self, thread_id: str, run_id: str, *, now: datetime, ttl: float | None = None
    ) -> int | None:
        """:meth:`claim` for a run id no checkpoint has yet: the new token, or ``None`` (nothing
        written, the thread not even looked at) when the store holds a checkpoint of
        ``run_id`` (``StoreFeatures.folded_claims``: a new run's free-run-id read and its
        claim in one round trip).

        Raises:
            ThreadBusy: the run id is free and another run holds a live claim on the thread.
        """
        found = await self._pg.fetch_one(
            _TAKE_FRESH, (run_id, *self._take_params(thread_id, run_id, now, ttl)[2]))
        if found is None:  # a claim the statement could not take: claim()'s own way
            return await self.claim(thread_id, run_id, now=now, ttl=ttl)
        token = int(found[0])
        return None if token < 0 else token

    async def renew(self, thread_id: str, token: int, *, now: datetime) -> None:
        """Extend the claim ``token`` by its ttl from ``now``.

        Raises:
            StaleClaim: ``token`` is not the thread's current claim.
        """
        check_id(thread_id, "thread_id", "renew")
        moment = rules.utc_now(now, "renew")
        token = rules.check_token(token, "renew")
        async with self._tx() as cur:
            current = rules.current_or_stale(
                thread_id, token, (await self._claim_row(cur, thread_id))[0])
            await self._put_claim(cur, thread_id, rules.renewed(current, moment))

    async def release(self, thread_id: str, token: int) -> None:
        """Release the claim ``token``; the thread is free at once.

        Raises:
            StaleClaim: ``token`` is not the thread's current claim.
        """
        check_id(thread_id, "thread_id", "release")
        token = rules.check_token(token, "release")
        # One statement (one round trip): it frees the row only while ``token`` holds it.
        if await self._pg.fetch_one(_RELEASE, (thread_id, token)) is not None:
            return
        async with self._one() as cur:
            current = (await self._claim_row(cur, thread_id, lock=""))[0]
        rules.current_or_stale(thread_id, token, current)
        raise StaleClaim(thread_id, token, None)  # pragma: no cover - released meanwhile
