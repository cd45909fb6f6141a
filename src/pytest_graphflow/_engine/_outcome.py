"""What one task came to: the :class:`Outcome` the batch runner collects and the committer,
the halt handler and the hooks read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .._graph._builder import NodeSpec
from .._records._checkpoint import TaskRecord
from .._records._events import Breakpoint, Interrupt

__all__ = ["Outcome"]


@dataclass(slots=True)
class Outcome:
    """What one task came to (internal).

    ``kind`` is ``done``, ``interrupt``, ``error`` (the node or its result failed),
    ``edge_error`` (an edge function raised: C7; or a subgraph's child run raised its store's
    or edge function's own exception, C6/C7 one level down) or ``cancelled``.
    """

    record: TaskRecord
    spec: NodeSpec
    kind: str = "cancelled"
    patch: dict[str, Any] | None = None
    goto: list[str] | None = None
    expand: dict[str, Any] | None = None
    # The sequences default to one shared empty tuple and are replaced, never changed in
    # place: a wide batch keeps an outcome per task alive until it commits, and each list
    # was one more object for every garbage collection of the batch to walk.
    targets: Sequence[str] = ()
    interrupt: Interrupt | None = None
    more: Sequence[Interrupt] = ()
    """Further interrupts of the task (a subgraph node surfaces all its child's at once)."""
    breakpoint: Breakpoint | None = None
    """Where a subgraph node's child paused for a breakpoint (``kind`` is ``interrupt``)."""
    error: BaseException | None = None
    failed_attempts: Sequence[tuple[datetime, datetime, BaseException]] = ()
    started_at: datetime | None = None
    finished_at: datetime | None = None
    custom: Sequence[tuple[str, Any]] = ()
    artifacts: Sequence[tuple[str, bytes, str]] = ()
    replayed: bool = False
    routed_to: str | None = None
    attempt: int = 1
    user_error: bool = False
    route_expand: bool = False
    """``expand`` came from an edge function: the node's static edges and joins still apply,
    and a replay decides it again (it is not recorded)."""
    fatal: bool = False
    """The failure ends the run whatever the node's ``on_error`` route, and the halt keeps
    every task of the batch that finished (a middleware hook threw: ``MiddlewareFailed``)."""
    merged: dict[str, Any] | None = None
    """The state with this task's own patch applied, when its branches needed it (checked
    against the schema); a one-task batch commits it instead of merging again."""
