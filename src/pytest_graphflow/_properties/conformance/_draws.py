"""What the store conformance machine draws and how it compares: the run, thread, node and
time pools, the strategies for states and every other checkpoint field, and the helpers that
dump and mutate checkpoints (SPEC §5, seed 003).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st

from ..._records._checkpoint import Checkpoint, TaskOutput, TaskRecord
from ..._records._events import Interrupt

__all__ = [
    "BASE_TIME",
    "LATEST_RULE",
    "NODES",
    "ORDER_RULE",
    "RUNS",
    "THREAD_OF_RUN",
    "TICKS",
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


def _maybe(name: str, values: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """``{name: value}`` half the time, else ``{}`` (the field keeps its default)."""
    return st.one_of(st.just({}), values.map(lambda v: {name: v}))


_TASK_IDS = ("task-1", "task-2")
_times = st.integers(0, TICKS - 1).map(lambda t: BASE_TIME + timedelta(seconds=t))
_task_records = st.builds(
    TaskRecord, task_id=st.sampled_from(_TASK_IDS), node=st.sampled_from(NODES),
    item=_values, has_item=st.booleans(), checkpoint_id_before=st.none() | st.just("cp-0"),
    failure=st.none() | st.just({"node": "a", "error_type": "E", "message": "m"}))
_task_outputs = st.builds(
    TaskOutput, task_id=st.sampled_from(_TASK_IDS), node=st.sampled_from(NODES),
    patch=st.none() | _states, goto=st.none() | _node_ids, keep=st.booleans(),
    started_at=st.none() | _times, finished_at=st.none() | _times)
_interrupts = st.builds(
    Interrupt, key=st.sampled_from(["task-1:q", "task-2:q"]), id=st.just("q"),
    node=st.sampled_from(NODES), task_id=st.sampled_from(_TASK_IDS), payload=_values)
_extras: st.SearchStrategy[dict[str, Any]] = st.tuples(
    _maybe("parent_id", st.sampled_from(["cp-0", "cp-1"])),
    _maybe("status", st.sampled_from(["completed", "interrupted", "failed", "cancelled"])),
    _maybe("next_step", st.integers(1, 4)),
    _maybe("tasks", st.tuples(_task_records).map(list)),
    _maybe("completed", _task_outputs.map(lambda o: {o.task_id: o})),
    _maybe("interrupts", st.tuples(_interrupts).map(list)),
    _maybe("answers", st.tuples(st.sampled_from(["task-1:q", "task-2:q"]), _values).map(
        lambda kv: {kv[0]: kv[1]})),
    _maybe("arrivals", st.tuples(st.sampled_from(NODES), st.sampled_from(NODES)).map(
        lambda kv: {kv[0]: [kv[1]]})),
    _maybe("next_seq", st.integers(1, 50)),
    _maybe("error", st.just({"type": "ValueError", "message": "boom"})),
    _maybe("tenant_id", st.sampled_from(["acme", "globex"])),
).map(lambda parts: {k: v for part in parts for k, v in part.items()})
"""Every other field of a checkpoint, each either at its default or drawn: a store that
loses or rewrites any of them fails the read-back checks."""


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
