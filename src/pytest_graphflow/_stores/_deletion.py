"""Deleting a thread (seed 004's ``deleteThread``): what every store decides the same way.

A store's ``delete_thread`` runs in one transaction: it reads the thread's owner (the tenant
on its latest checkpoint) and its claim, asks :func:`check_deletable`, then removes the
thread's checkpoints, the events, run records and artifacts of its runs, and its claim row,
and answers with a :class:`DeletedThread`.

The fencing tokens of a deleted thread are never issued again: a store that drops the claim
row keeps the largest token it dropped (:data:`TOKEN_FLOOR`, a counter naming no thread), and
a thread claimed for the first time starts above it, so a writer that held a claim on the
deleted thread can never write into a new thread of the same id.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .._records._checks import check_id, check_optional_id
from ..errors import TenantMismatch, ThreadBusy
from . import _claims as rules

__all__ = ["TOKEN_FLOOR", "DeletedThread", "check_deletable", "check_delete_args"]

TOKEN_FLOOR = "claim_token_floor"
"""The ``meta`` key of a durable store's largest fencing token of a deleted thread."""


@dataclass(frozen=True)
class DeletedThread:
    """What ``delete_thread`` removed (all zeros for a thread the store does not know).

    Attributes:
        thread_id: the deleted thread.
        run_ids: the runs of the thread, in the order the store found them.
        checkpoints: checkpoints removed.
        events: events removed (of the thread's runs).
        runs: run records removed.
        artifacts: artifacts removed (of the thread's runs).
        jobs: queued or ended jobs of the thread removed (PostgreSQL's queue; 0 elsewhere).
    """

    thread_id: str
    run_ids: tuple[str, ...] = ()
    checkpoints: int = 0
    events: int = 0
    runs: int = 0
    artifacts: int = 0
    jobs: int = 0

    @property
    def found(self) -> bool:
        """Whether the store held anything of the thread."""
        return bool(self.run_ids or self.checkpoints or self.events or self.runs
                    or self.artifacts or self.jobs)


def check_delete_args(thread_id: object, tenant_id: object, now: object
                      ) -> tuple[str, str | None, datetime | None]:
    """``delete_thread``'s arguments, checked: a thread id, ``None`` or a tenant id, and
    ``None`` or the caller's aware ``now``.

    Raises:
        InvalidArgument: naming the argument and the fix.
    """
    thread = check_id(thread_id, "thread_id", "delete_thread")
    tenant = check_optional_id(tenant_id, "tenant_id", "delete_thread")
    moment = None if now is None else rules.utc_now(now, "delete_thread")
    return thread, tenant, moment


def check_deletable(
    thread_id: str,
    tenant_id: str | None,
    owner: tuple[str | None] | None,
    claim: rules.Claim | None,
    now: datetime | None,
    *,
    held: bool = False,
) -> None:
    """Whether ``tenant_id`` may delete ``thread_id`` now; raises when not.

    Args:
        owner: ``(tenant,)`` of the thread's latest checkpoint, ``None`` when it has none.
        claim: the thread's claim (``None`` when released or never taken).
        now: the caller's clock; a claim that expired by then does not hold the thread (its
            holder lost it). ``None``: every claim not released holds it.
        held: the thread is held otherwise (a queue job a worker holds).

    Raises:
        TenantMismatch: the thread belongs to another tenant (checked first, so another
            tenant learns nothing more, whether the thread is busy or not).
        ThreadBusy: a claim on the thread is live; the holder is named only for a thread
            whose tenant was checked (one with a checkpoint).
    """
    if owner is not None and owner[0] != tenant_id:
        raise TenantMismatch(thread_id, tenant_id)
    if claim is not None and (now is None or claim.live(now)):
        raise ThreadBusy(thread_id, claim.run_id if owner is not None else None)
    if held:
        raise ThreadBusy(thread_id, None)
