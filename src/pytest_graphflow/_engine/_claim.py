"""A run's claim on its thread: taken once per runtime instance, renewed while the run is
live, and the fencing token every commit of the run carries (SPEC §5, seed 004).

Stores with claims (``claim``/``renew``/``release``, see
:class:`~pytest_graphflow._stores._protocol.ClaimingStore`) keep the claim, so runtimes in
other processes see it; for a store without them the runtime keeps a claim table per store
object, which guards runtimes sharing that object only.
"""

from __future__ import annotations

import weakref
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, ClassVar

import anyio

from .._stores._features import StoreFeatures
from .._time._clock import Clock
from ..errors import SimulatedCrash, StaleClaim, ThreadBusy

__all__ = ["ThreadClaim", "local_holder", "take", "take_fresh"]


class _LocalClaims:
    """Thread claims for stores without their own (one table per store object)."""

    tables: ClassVar[weakref.WeakKeyDictionary[Any, dict[str, ThreadClaim]]] = (
        weakref.WeakKeyDictionary())

    @classmethod
    def table(cls, store: Any) -> dict[str, ThreadClaim]:
        try:
            return cls.tables.setdefault(store, {})
        except TypeError:  # not weak-referenceable
            return {}


class ThreadClaim:
    """The claim one run leg holds on its thread (internal).

    Attributes:
        thread_id: the claimed thread.
        run_id: the run the claim was taken for.
        token: the store's fencing token, or ``None`` for a claim kept by the runtime.
        fenced: whether the store checks the token on every commit (``supports_fencing``).
        lost: the :class:`StaleClaim` a renewal met, once the claim was taken over.
    """

    __slots__ = ("_local", "_renewed_at", "_store", "clock", "fenced", "lost", "quick",
                 "released", "run_id", "thread_id", "token", "ttl")

    def __init__(self, store: Any, clock: Clock, thread_id: str, run_id: str, ttl: float,
                 token: int | None, local: dict[str, ThreadClaim] | None,
                 taken_at: float | None = None, fencing: bool = False,
                 quick: bool = False) -> None:
        self._store = store
        self.clock = clock
        self.thread_id = thread_id
        self.run_id = run_id
        self.ttl = ttl
        self.token = token
        self._local = local
        self.fenced = token is not None and fencing
        self.quick = quick
        """Held in a store whose claims answer at once (``StoreFeatures.in_process``, the
        in-memory store): released without awaiting it (:meth:`release_now`)."""
        self.lost: StaleClaim | None = None
        self.released = False
        self._renewed_at = clock.monotonic() if taken_at is None else taken_at

    @property
    def renewable(self) -> bool:
        """Whether the claim lives in the store (and so must be renewed while the run is live).
        """
        return self._local is None and not self.released and self.lost is None

    @property
    def fence(self) -> tuple[str, int] | None:
        """``(thread_id, token)`` for a store that checks tokens, else ``None``."""
        return (self.thread_id, self.token) if self.fenced and self.token is not None else None

    async def release(self) -> None:
        """Give the thread up (a stale token is ignored: the thread is someone else's)."""
        if self.released:
            return
        self.released = True
        if self._local is not None:
            if self._local.get(self.thread_id) is self:
                del self._local[self.thread_id]
            return
        if self.quick and self._store.release_now(self.thread_id, self.token) \
                is not NotImplemented:
            return
        try:
            await self._store.release(self.thread_id, self.token)
        except StaleClaim:
            return  # the thread is someone else's now

    def release_now(self) -> bool:
        """:meth:`release` of a :attr:`quick` claim, without a coroutine. ``False`` when
        the store declined to answer at once (a ``FaultyStore`` whose rules watch
        ``release``): the claim is still held, :meth:`release` it."""
        if not self.released:
            if self._store.release_now(self.thread_id, self.token) is NotImplemented:
                return False
            self.released = True
        return True

    async def renew(self) -> None:
        """Extend the claim by its ttl from now on the runtime's clock.

        Raises:
            StaleClaim: the claim was taken over (also kept in :attr:`lost`).
        """
        if self._local is not None or self.released:
            return
        assert self.token is not None
        try:
            await self._store.renew(self.thread_id, self.token, now=self.clock.now())
        except StaleClaim as exc:
            self.lost = exc
            raise
        self._renewed_at = self.clock.monotonic()

    def due(self) -> bool:
        """Whether a third of the ttl has passed since the claim was taken or last renewed."""
        return (self._local is None and not self.released and self.lost is None
                and self.clock.monotonic() - self._renewed_at >= self.ttl / 3)

    async def renew_if_due(self) -> None:
        """Renew when a third of the ttl has passed since the claim was taken or renewed (on
        the runtime's clock); between the pieces of a run, so a run of many short sync steps
        keeps its claim too. A failed renewal is left to the next commit to report."""
        if not self.due():
            return
        try:
            await self.renew()
        except SimulatedCrash:
            raise
        except Exception:
            pass

    async def keep_alive(
        self,
        sleep: Callable[[float], Awaitable[None]],
        delay: Callable[[float], float] | None = None,
        *,
        due: bool = False,
    ) -> None:
        """Renew the claim every third of its ttl until cancelled; ``sleep`` waits on the
        runtime's clock (the batch scheduler's turn-taking sleep under a virtual clock), and
        ``delay(period)`` may stretch a wait over virtual time no one can observe; ``due``:
        the first renewal is due now (the caller waited the first period).

        Run it beside the tasks of a batch: a node that runs longer than the ttl keeps the
        thread. It stops when the claim was lost (the run's next commit is refused) or when a
        renewal fails otherwise (the claim then expires on its own).
        """
        if not self.renewable:
            return
        period = self.ttl / 3
        if not due:
            await sleep(period if delay is None else delay(period))
        while True:
            try:
                await self.renew()
            except SimulatedCrash:
                raise
            except Exception:
                return
            await sleep(period if delay is None else delay(period))


async def take(store: Any, features: StoreFeatures, clock: Clock, thread_id: str,
               run_id: str, ttl: float, at: datetime | None = None) -> ThreadClaim:
    """Claim ``thread_id`` for one leg of ``run_id`` (in the store when it has claims).

    ``at``: the instant the claim is taken, when it is not the clock's now (a resume on a
    virtual clock behind the checkpoint: the clock is moved there only once the leg is
    admitted).

    Raises:
        ThreadBusy: a claim on the thread is live (``holder`` is the store's answer; the
            runtime decides what the caller may see).
    """
    if features.claims:
        now = clock.now()
        quick = features.in_process
        # A store answering at once may decline (NotImplemented: a FaultyStore whose rules
        # watch ``claim``): the general claim then.
        token = store.claim_now(thread_id, run_id, now if at is None else at, ttl) if quick \
            else NotImplemented
        if token is NotImplemented:
            token = await store.claim(thread_id, run_id, now=now if at is None else at,
                                      ttl=ttl)
        try:
            since = None if at is None else clock.monotonic() + (at - now).total_seconds()
            # (positional: keywords to a class go through a dict both ways)
            return ThreadClaim(store, clock, thread_id, run_id, ttl, token, None, since,
                               features.fencing, quick)
        except BaseException:  # the clock threw (seed 004): the claim is not kept
            with anyio.CancelScope(shield=True):
                await store.release(thread_id, token)
            raise
    table = _LocalClaims.table(store)
    holder = table.get(thread_id)
    if holder is not None:
        raise ThreadBusy(thread_id, holder.run_id)
    taken = table[thread_id] = ThreadClaim(store, clock, thread_id, run_id, ttl, None, table)
    return taken


async def take_fresh(store: Any, features: StoreFeatures, clock: Clock, thread_id: str,
                     run_id: str, ttl: float) -> ThreadClaim | None:
    """:func:`take` for a new run on a store that claims a thread for a run id no checkpoint
    has yet in one call (``StoreFeatures.folded_claims``, ``claim_fresh``); ``None`` when the
    store holds a checkpoint of ``run_id`` (nothing claimed: the runtime tries another id).

    Raises:
        ThreadBusy: the run id is free and a claim on the thread is live.
    """
    now = clock.now()
    token = await store.claim_fresh(thread_id, run_id, now=now, ttl=ttl)
    if token is None:
        return None
    try:
        return ThreadClaim(store, clock, thread_id, run_id, ttl, token, None,
                           fencing=features.fencing)
    except BaseException:  # the clock threw (seed 004): the claim is not kept
        with anyio.CancelScope(shield=True):
            await store.release(thread_id, token)
        raise


def local_holder(store: Any, thread_id: str) -> str | None:
    """The run holding ``thread_id`` by a claim the runtime keeps for ``store`` (a store
    without claims of its own), or ``None``."""
    held = _LocalClaims.table(store).get(thread_id)
    return None if held is None or held.released else held.run_id


async def released_on_error(claim: ThreadClaim) -> None:
    """Release ``claim`` after a refused admission, shielded from cancellation."""
    with anyio.CancelScope(shield=True):
        await claim.release()
