"""What the store conformance machine draws and how it compares: the run, thread, node and
time pools, the strategies for states and every other checkpoint field, and the helpers that
dump and mutate checkpoints (SPEC §5, seed 003).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st
from pydantic_core import to_jsonable_python

from ..._records._checkpoint import Checkpoint, TaskOutput, TaskRecord
from ..._records._events import Interrupt
from ..._records._json import jcopy

__all__ = [
    "BASE_TIME",
    "LATEST_RULE",
    "NODES",
    "ORDER_RULE",
    "RUNS",
    "THREAD_OF_RUN",
    "TICKS",
    "shape",
]

RUNS = ("run-a", "run-b", "run-c")
"""The run ids saved checkpoints draw from: few, so runs hold several checkpoints."""

THREAD_OF_RUN = {"run-a": "thread-1", "run-b": "thread-1", "run-c": "thread-2"}
"""A run lives on one thread; two runs share ``thread-1`` so thread listings span runs."""

BASE_TIME = datetime(2025, 1, 1, tzinfo=UTC)
TICKS = 3
"""Timestamps are ``BASE_TIME + tick`` seconds, tick < 3: equal timestamps happen often."""

NODES = ("a", "b", "c")

LATEST_RULE = "latest = the latest timestamp; of equal timestamps, the one saved last"
ORDER_RULE = "list is ordered by timestamp, then save order"

_leaves = st.one_of(st.integers(-2, 2), st.booleans(), st.none(), st.sampled_from(["", "x"]))
_values = st.one_of(
    _leaves,
    st.lists(_leaves, max_size=2),
    st.dictionaries(st.sampled_from(["k", "v"]), _leaves, max_size=2),
)
_states = st.dictionaries(st.sampled_from(["count", "items", "meta"]), _values, max_size=3)
_node_ids = st.lists(st.sampled_from(NODES), max_size=2, unique=True)


_SHAPES: tuple[dict[str, Any], ...] = (
    {"parent_id": "cp-0", "status": "interrupted", "next_step": 2,
     "tasks": [TaskRecord(task_id="task-1", node="a", item={"k": 1}, has_item=True,
                          checkpoint_id_before="cp-0")],
     "completed": {"task-2": TaskOutput(task_id="task-2", node="b", patch={"items": [1]},
                                        goto=["c"], keep=True, started_at=BASE_TIME)},
     "interrupts": [Interrupt(key="task-1:q", id="q", node="a", task_id="task-1",
                              payload={"v": [True]})],
     "answers": {"task-1:q": "x"}, "arrivals": {"c": ["a"]}, "next_seq": 7,
     "error": {"type": "ValueError", "message": "boom"}, "tenant_id": "acme"},
    {},
    {"parent_id": "cp-1", "status": "failed", "next_step": 4,
     "tasks": [TaskRecord(task_id="task-2", node="c", failure={"node": "a", "error_type": "E",
                                                               "message": "m"})],
     "interrupts": [Interrupt(key="task-2:q", id="q", node="b", task_id="task-2", payload=None)],
     "next_seq": 3, "tenant_id": "globex"},
)
"""Every other field of a checkpoint, set by where it comes in a program (``shape(n)``), not
drawn: the n-th checkpoint built gets one of these, every field of the first at a value other
than its default. A store that loses or rewrites any of them fails the read-back checks.
Drawing them (eleven choices a save) made a failing program's shrink the most of a hunt."""


_PLAIN = tuple(to_jsonable_python(s) for s in _SHAPES)


def shape(n: int) -> dict[str, Any]:
    """The extra fields of the ``n``-th checkpoint a program builds (see ``_SHAPES``), in
    JSON form and fresh each time: nothing a store might change is shared between them."""
    return jcopy(_PLAIN[n % len(_PLAIN)])  # type: ignore[no-any-return]


def _dump(cp: Checkpoint) -> dict[str, Any]:
    return cp.model_dump(mode="json")


def _mutate(cp: Checkpoint) -> None:
    """Change a checkpoint object in place, at every depth a careless store might share."""
    for value in cp.state.values():
        if isinstance(value, list):
            value.append("mutated")
        elif isinstance(value, dict):
            value["mutated"] = True
    cp.state["mutated"] = True
    cp.node_ids.append("mutated")
    cp.metadata["mutated"] = True
    cp.step += 100


_FORK_KEEPS = (
    "graph_id", "revision", "node_id", "node_ids", "step", "timestamp", "state",
    "format_version", "status", "next_step", "tasks", "completed", "interrupts", "answers",
    "visited", "arrivals", "error", "tenant_id",
)
"""Checkpoint fields a fork copies from its source (``state`` with ``patch_state`` applied)."""
