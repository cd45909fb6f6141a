"""``GraphRuntime.aupdate_state``: an update written into a thread from outside a run, under
the thread's claim (the checkpoint it makes is ``_update.updated_checkpoint``'s)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from .._graph._builder import CompiledGraph
from .._records._checkpoint import Checkpoint
from .._time._clock import VirtualClock
from ..errors import TenantMismatch
from ._claim import released_on_error
from ._legs import Legs
from ._update import updated_checkpoint

__all__ = ["resolve_target", "write_update"]


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
    rt = legs.host
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
    if isinstance(ref, str) and await legs.host.store.latest(ref) is None \
            and await legs.host.store.get(ref) is None:
        found = await legs.host.store.list(thread_id=ref)
        if found:
            return await legs.resolve(found[-1].id, legs.host.tenant_id)
    return await legs.resolve(ref, legs.host.tenant_id)
