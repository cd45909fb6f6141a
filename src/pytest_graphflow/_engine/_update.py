"""State updates from outside a run: ``update_state`` and ``Resume(update=...)``.

An update is a patch written by the caller, merged into a checkpoint's state exactly as a
node's patch would be (reducers applied, the schema's validators run on the written keys).
With ``as_node`` it is written *as that node*: the node's ``writes=`` contract applies, and
the run continues as if the node had just completed with that patch — its edges are decided on
the new state and become the run's next tasks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from .._graph._builder import END, CompiledGraph
from .._graph._node import Visited
from .._records._checkpoint import Checkpoint, TaskRecord
from .._records._fast import make
from .._records._json import NotJSONError, to_json_value
from .._time._clock import VirtualClock
from ..errors import (
    GraphflowError,
    InvalidArgument,
    TenantMismatch,
    UnknownKey,
    UpdateRejected,
)
from ._claim import released_on_error
from ._merge import merge_patches, normalize_patch
from ._task import Outcome, decide_edges

if TYPE_CHECKING:
    from ._legs import Legs

__all__ = ["UPDATE", "apply_update", "resolve_target", "updated_checkpoint", "write_update"]

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


async def write_update(
    legs: Legs,
    run_or_thread_id: str,
    values: Mapping[str, Any] | BaseModel,
    *,
    as_node: str | None,
    graph: CompiledGraph | None,
) -> str:
    """``GraphRuntime.aupdate_state``: write ``values`` under the thread's claim; return the
    new checkpoint's id."""
    rt = legs.rt
    cp = await resolve_target(legs, run_or_thread_id)
    graph = legs.graph_for(cp, graph)
    if cp.tenant_id != rt.tenant_id:
        raise TenantMismatch(cp.thread_id, rt.tenant_id)
    claim = await legs.claim(cp.thread_id, cp.run_id, rt.tenant_id)
    try:
        latest = await rt.store.latest(cp.run_id)
        counters = [cp.metadata, latest.metadata if latest is not None else {}]
        cp_counter = max(int(m.get("cp_counter", 0)) for m in counters) + 1
        task_counter = max(int(m.get("task_counter", 0)) for m in counters)
        token = cp.run_id[4:] if cp.run_id.startswith("run-") else cp.run_id
        clock = rt.clock
        top = await legs.thread_latest(cp.thread_id)
        branch = top is not None and top.id != cp.id  # seed 004: a branch on purpose
        # A virtual clock goes on from the thread's latest: the update is the latest then.
        since = max(cp.timestamp, top.timestamp) if top is not None else cp.timestamp
        if isinstance(clock, VirtualClock) and clock.now() < since:
            clock.advance((since - clock.now()).total_seconds())
        new = await updated_checkpoint(
            graph, cp, values, as_node=as_node, cid=f"cp-{token}-{cp_counter}",
            task_hex=token, task_counter=task_counter, now=clock.now())
        new.metadata["cp_counter"] = cp_counter
        if latest is not None and latest.id != cp.id:
            # Written from an earlier checkpoint: the history forks here (a subgraph task
            # pending at it gets a fresh child run, see _subgraph).
            new.metadata["time_travel"] = True
        new.metadata.pop("branch", None)
        if branch:
            new.metadata["branch"] = True
        fence = claim.fence
        if fence is None:
            await rt.store.save(new)
        else:  # written under the claim: refused if another process took the thread
            await rt.store.save(new, fence=fence)  # type: ignore[call-arg]
    finally:
        await released_on_error(claim)
    return new.id


async def resolve_target(legs: Legs, ref: str) -> Checkpoint:
    """A run's last checkpoint, a checkpoint, or a thread's last checkpoint."""
    if isinstance(ref, str) and await legs.rt.store.latest(ref) is None \
            and await legs.rt.store.get(ref) is None:
        found = await legs.rt.store.list(thread_id=ref)
        if found:
            return await legs.resolve(found[-1].id, legs.rt.tenant_id)
    return await legs.resolve(ref, legs.rt.tenant_id)
