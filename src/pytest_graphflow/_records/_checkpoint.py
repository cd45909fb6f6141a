"""The checkpoint record: state plus everything a resume needs (SPEC §5)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ._events import Interrupt
from ._fast import make
from ._json import jcopy

__all__ = ["FORMAT_VERSION", "Checkpoint", "TaskOutput", "TaskRecord"]

FORMAT_VERSION = 1
"""The checkpoint format this build writes and reads."""

CheckpointStatus = Literal["running", "completed", "interrupted", "failed", "cancelled"]


class TaskRecord(BaseModel):
    """A scheduled task: which node, and what it is given.

    Attributes:
        task_id: the task's id (stable across resumes, so interrupt keys stay valid).
        node: the node to run.
        item: the expansion item (``ctx.item``) when ``has_item``.
        checkpoint_id_before: for expansion tasks, the checkpoint saved before the expansion.
        failure: for a failure-route target, the failure it handles (node, type, message).
    """

    model_config = ConfigDict(frozen=True)

    task_id: str
    node: str
    item: Any = None
    has_item: bool = False
    checkpoint_id_before: str | None = None
    failure: dict[str, Any] | None = None


class TaskOutput(BaseModel):
    """The recorded result of a completed task, replayed on resume where C9 says so.

    Attributes:
        patch: the state patch (JSON form) or ``None``.
        goto: targets the node picked itself (``Command.goto``), if any.
        expand: the expansion it asked for (``{"node": ..., "items": [...]}``), if any.
        keep: ``True`` when the result is kept whatever the node's effect class (timeouts,
            cancellation); otherwise only ``write``/``external``/``human`` results replay.
    """

    model_config = ConfigDict(frozen=True)

    task_id: str
    node: str
    patch: dict[str, Any] | None = None
    goto: list[str] | None = None
    expand: dict[str, Any] | None = None
    keep: bool = False
    started_at: datetime | None = None
    finished_at: datetime | None = None


class Checkpoint(BaseModel):
    """A resumable snapshot of a run.

    ``step`` is the superstep the checkpoint was taken after (or halted in); ``next_step`` is
    the superstep a resume runs, with ``tasks`` as its batch and ``completed`` the tasks of it
    that already finished. ``node_id`` is the node a per-node checkpoint was taken after; for a
    superstep's checkpoint, the last of ``node_ids``.
    """

    model_config = ConfigDict(frozen=False, validate_assignment=False)

    id: str
    run_id: str
    thread_id: str
    graph_id: str
    revision: str
    node_id: str | None = None
    node_ids: list[str] = Field(default_factory=list)
    step: int
    parent_id: str | None = None
    timestamp: datetime
    state: dict[str, Any]
    format_version: int = FORMAT_VERSION
    status: CheckpointStatus = "running"
    next_step: int = 0
    tasks: list[TaskRecord] = Field(default_factory=list)
    completed: dict[str, TaskOutput] = Field(default_factory=dict)
    interrupts: list[Interrupt] = Field(default_factory=list)
    answers: dict[str, Any] = Field(default_factory=dict)
    visited: tuple[str, ...] = ()
    arrivals: dict[str, list[str]] = Field(default_factory=dict)
    next_seq: int = 0
    error: dict[str, Any] | None = None
    tenant_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    def clone(self, **changes: Any) -> Checkpoint:
        """A deep copy (mutable JSON fields copied), with ``changes`` applied."""
        data = dict(self.__dict__)
        data["state"] = jcopy(self.state)
        data["node_ids"] = list(self.node_ids)
        data["tasks"] = list(self.tasks)
        data["completed"] = dict(self.completed)
        data["interrupts"] = list(self.interrupts)
        data["answers"] = jcopy(self.answers)
        data["arrivals"] = {k: list(v) for k, v in self.arrivals.items()}
        data["error"] = jcopy(self.error)
        data["metadata"] = jcopy(self.metadata)
        data.update(changes)
        return make(Checkpoint, **data)
