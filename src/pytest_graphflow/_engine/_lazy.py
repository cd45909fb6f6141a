"""The events of a lean step, left unbuilt for a recording leg (see ``_results.LazyEvent``).

A leg that only its ``on_leg`` recording reads (``invoke``, ``resume`` on the testing
runtime) takes the lean step like a bare ``invoke``; the step then hands the recording what
the general path's committer would have reported for it — ``node_start``, ``node_end``, an
``edge_transition`` per target, ``checkpoint_saved``, ``run_end`` — as :class:`LazyEvent`\\ s
with the same fields, numbers and time, built into events when the recording is read.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .._records._events import (
    CheckpointSaved,
    EdgeTransition,
    EventBase,
    NodeEnd,
    NodeStart,
    RunEnd,
)
from .._records._json import jcopy
from ._results import LazyEvent
from ._run_state import RunState

__all__ = ["lean_step_events"]


def _entry(cls: type[EventBase], fields: dict[str, Any]) -> LazyEvent:
    """An unbuilt event (the hot path below writes this out: a call per event cost more than
    the entry itself)."""
    entry = LazyEvent()
    entry.cls = cls
    entry.__dict__ = fields
    return entry


def lean_step_events(
    run: RunState, seq: int, step: int, node: str, task_id: str,
    patch: dict[str, Any] | None, started_at: datetime, finished_at: datetime | None,
    targets: Any, checkpoint_id: str | None, finished: bool, state: dict[str, Any],
) -> list[LazyEvent]:
    """The unbuilt events of one committed lean step, numbered from ``seq`` and stamped with
    the clock's time now (the general path stamps a step's events when it has saved)."""
    run_id = run.run_id
    now = run.clock.now()
    # LazyEvent() runs no Python code (no __init__): each entry is built in place.
    start = LazyEvent()
    start.cls = NodeStart
    start.__dict__ = {"node": node, "task_id": task_id, "seq": seq, "run_id": run_id,
                      "step": step, "time": now}
    end = LazyEvent()
    end.cls = NodeEnd
    end.__dict__ = {"node": node, "task_id": task_id,
                    "patch": jcopy(patch) if patch else patch, "replayed": False,
                    "attempt": 1, "started_at": started_at, "finished_at": finished_at,
                    "goto": None, "seq": seq + 1, "run_id": run_id, "step": step, "time": now}
    out = [start, end]
    seq += 2
    for target in targets:
        edge = LazyEvent()
        edge.cls = EdgeTransition
        edge.__dict__ = {"node": node, "task_id": task_id, "source": node, "target": target,
                         "seq": seq, "run_id": run_id, "step": step, "time": now}
        out.append(edge)
        seq += 1
    if checkpoint_id is not None:
        saved = LazyEvent()
        saved.cls = CheckpointSaved
        saved.__dict__ = {"checkpoint_id": checkpoint_id, "seq": seq, "run_id": run_id,
                          "step": step, "time": now}
        out.append(saved)
        seq += 1
    if finished:
        out.append(_entry(RunEnd, {"status": "completed", "state": jcopy(state), "seq": seq,
                                   "run_id": run_id, "step": step, "time": now}))
    return out
