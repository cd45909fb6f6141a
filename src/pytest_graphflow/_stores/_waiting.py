"""``store.waiting(...)``: the runs waiting for answers, with their questions and deadlines.

Every store answers the same way: a thread is waiting when its latest checkpoint is
``interrupted`` (paused at interrupts, or at a breakpoint: then ``interrupts`` is empty).
Rows come in thread-id order, a page at a time (``limit``; the next page starts ``after``
the last thread of this one), and only the caller's tenant's threads are listed. The
deadlines live in the checkpoint (``Interrupt.deadline``), so no store needs a table of its
own for them, and a store file written before deadlines existed lists its runs unchanged.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from .._records._checkpoint import Checkpoint
from .._records._checks import check_id, check_optional_id
from .._records._events import Interrupt
from ..errors import InvalidArgument

__all__ = ["Waiting", "WaitingPage", "check_waiting", "waiting_row"]


class Waiting(BaseModel):
    """A run waiting for answers (one a thread), as ``waiting()`` lists it.

    Attributes:
        thread_id: the thread (rows come in thread-id order).
        run_id: the paused run; answer it with ``aresume(run_id, Resume(...))``.
        graph_id: the run's graph.
        checkpoint_id: the checkpoint it paused at.
        tenant_id: the thread's tenant.
        since: when it paused (the checkpoint's timestamp).
        interrupts: the questions it waits on, each with its ``deadline`` (or ``None``);
            empty for a run paused at a breakpoint (resume it without a ``Resume``).
        deadline: the earliest deadline of its questions, or ``None``.
    """

    model_config = ConfigDict(frozen=True)

    thread_id: str
    run_id: str
    graph_id: str
    checkpoint_id: str
    tenant_id: str | None = None
    since: datetime
    interrupts: list[Interrupt]
    deadline: datetime | None = None


def check_waiting(
    where: str, tenant_id: Any, limit: Any, after: Any, any_tenant: Any
) -> tuple[str | None, int | None, str | None, bool]:
    """``waiting()``'s arguments, checked.

    Raises:
        InvalidArgument: a ``limit`` that is not an int >= 1, or ``any_tenant`` not a bool.
        TypeError, ValueError: a malformed ``tenant_id`` or ``after`` (as for other ids).
    """
    check_optional_id(tenant_id, "tenant_id", "waiting")
    if after is not None:
        check_id(after, "after", "waiting")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                              or limit < 1):
        raise InvalidArgument(f"{where}.waiting(limit={limit!r}): give an int >= 1, or None "
                              "for every waiting run")
    if not isinstance(any_tenant, bool):
        raise InvalidArgument(f"{where}.waiting(any_tenant={any_tenant!r}): True or False")
    return tenant_id, limit, after, any_tenant


def waiting_row(cp: Checkpoint) -> Waiting:
    """The :class:`Waiting` row of a thread whose latest checkpoint is ``cp`` (interrupted)."""
    deadlines = [i.deadline for i in cp.interrupts if i.deadline is not None]
    return Waiting(thread_id=cp.thread_id, run_id=cp.run_id, graph_id=cp.graph_id,
                   checkpoint_id=cp.id, tenant_id=cp.tenant_id, since=cp.timestamp,
                   interrupts=list(cp.interrupts), deadline=min(deadlines, default=None))


WaitingPage = list[Waiting]
"""What ``waiting()`` returns (a name stores can use where ``list`` is their own method)."""
