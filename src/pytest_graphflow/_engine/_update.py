"""State updates from outside a run: ``update_state`` and ``Resume(update=...)``.

An update is a patch written by the caller, merged into a checkpoint's state exactly as a
node's patch would be (reducers applied, the schema's validators run on the written keys).
With ``as_node`` it is written *as that node*: the node's ``writes=`` contract applies, and
the run continues as if the node had just completed with that patch — its edges are decided on
the new state and become the run's next tasks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from .._graph._builder import END, CompiledGraph
from .._graph._node import Visited
from .._records._checkpoint import Checkpoint, TaskRecord
from .._records._fast import make
from .._records._json import NotJSONError, to_json_value
from ..errors import (
    GraphflowError,
    InvalidArgument,
    UnknownKey,
    UpdateRejected,
)
from ._merge import merge_patches, normalize_patch
from ._outcome import Outcome
from ._task import decide_edges

__all__ = ["UPDATE", "apply_update", "updated_checkpoint"]

UPDATE = "<update>"
"""Who an update without ``as_node`` is blamed on in errors."""


def _patch(graph: CompiledGraph, values: Any, as_node: str | None) -> dict[str, Any]:
    if isinstance(values, BaseModel):
        values = {k: getattr(values, k) for k in values.model_fields_set}
    if not isinstance(values, Mapping):
        raise InvalidArgument(f"update values={values!r}: pass a dict of state keys to values")
    if as_node is not None:
        return normalize_patch(graph, as_node, values) or {}
    codec = graph.codec
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key not in graph.keys:
            raise UnknownKey(UPDATE, key, sorted(graph.keys))
        try:
            value = codec.canonical(key, to_json_value(value, exact=key not in codec.converted))
        except NotJSONError as exc:
            raise UpdateRejected(UPDATE, key, f"the value has no JSON form ({exc})") from None
        if codec.plain and key in codec.checked_on_write:  # as normalize_patch checks it
            value = codec.check_value(UPDATE, key, value)
        out[key] = value
    return out


def apply_update(
    graph: CompiledGraph, state: dict[str, Any], values: Any, as_node: str | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``state`` with ``values`` merged in (reducers applied, validated); and the patch.

    Raises:
        UnknownKey, UndeclaredWrite, UpdateRejected: naming the key (and ``as_node``).
    """
    patch = _patch(graph, values, as_node)
    blame = [(as_node or UPDATE, patch)]
    merged = merge_patches(graph, state, blame, parallel=False)
    new_state, _ = graph.codec.validate(merged, blame)
    return new_state, patch


async def updated_checkpoint(
    graph: CompiledGraph,
    cp: Checkpoint,
    values: Any,
    *,
    as_node: str | None,
    cid: str,
    task_hex: str,
    task_counter: int,
    now: Any,
) -> Checkpoint:
    """The checkpoint an update of ``cp`` writes (its parent is ``cp``).

    Without ``as_node`` only the state changes: a paused run stays paused at the same
    interrupts, a completed thread stays completed. With ``as_node`` the run's position moves
    to just after that node: its pending tasks, interrupts and recorded outputs are replaced
    by the node's targets (status ``running``; ``completed`` when there are none).

    Raises:
        InvalidArgument: for an ``as_node`` the graph does not have.
        the edge function's own exception, as a run raises it (C7).
    """
    if as_node is not None and as_node not in graph.nodes:
        raise InvalidArgument(f"update_state(as_node={as_node!r}): graph {graph.graph_id!r} has "
                              f"no such node; its nodes are {list(graph.nodes)}")
    new_state, patch = apply_update(graph, cp.state, values, as_node)
    changes: dict[str, Any] = {
        "id": cid, "parent_id": cp.id, "timestamp": now, "state": new_state,
        "metadata": {**cp.metadata, "updated_from": cp.id, "update_as_node": as_node},
    }
    if as_node is None:
        return cp.clone(**changes)
    spec = graph.nodes[as_node]
    record = make(TaskRecord, task_id=f"task-{task_hex}-update", node=as_node, item=None,
                  has_item=False, checkpoint_id_before=None, failure=None)
    out = Outcome(record, spec, kind="done", patch=patch)
    visited = Visited(list(cp.visited))
    await decide_edges(graph, spec, out, cp.state, visited, cp.next_step)
    if out.kind == "edge_error":
        assert out.error is not None
        raise out.error
    if out.kind == "error":
        assert isinstance(out.error, GraphflowError)
        raise out.error
    arrivals = {k: list(v) for k, v in cp.arrivals.items()}
    scheduled = [t for t in out.targets if t != END]
    for join in graph.joins_from.get(as_node, ()):
        got = arrivals.setdefault(join.key, [])
        if as_node not in got:
            got.append(as_node)
        if all(s in got for s in join.sources):
            del arrivals[join.key]
            if join.target != END:
                scheduled.append(join.target)
    order = graph.nodes
    tasks = []
    for n, name in enumerate(sorted(dict.fromkeys(scheduled), key=lambda x: order[x].index)):
        tasks.append(make(TaskRecord, task_id=f"task-{task_hex}-{task_counter + n + 1}",
                          node=name, item=None, has_item=False, checkpoint_id_before=None,
                          failure=None))
    changes["metadata"]["task_counter"] = task_counter + len(tasks)
    finished = not tasks and not arrivals
    changes.update(
        tasks=tasks, completed={}, interrupts=[], arrivals=arrivals, error=None,
        status="completed" if finished else "running", node_id=as_node, node_ids=[as_node],
        visited=(*cp.visited, as_node),
    )
    return cp.clone(**changes)
