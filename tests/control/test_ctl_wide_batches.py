"""Issue 29 — a 10,000-wide batch behaves as a narrow one.

A batch's cost per task no longer grows with its width: a join checks its arrivals in a set,
a reducer over a list or a dict folds the batch's writes into one value it extends, the
scheduler no longer scans its ready tasks per turn. What a user relies on is unchanged,
and these tests hold it at a width where the old code was quadratic:

- seed 000: "The events of a parallel batch are yielded once every node of it has run, in
  the order the nodes are declared";
- seed 002: "Parallel branches are merged only when their writes are disjoint or use a
  registered reducer with stable merge semantics" (folded in declared order, item order for
  an expansion: docs/graphs.md);
- a join runs once, when all its sources arrived, and its arrivals survive a pause in the
  order they came (C8);
- the state a batch started from, the run's input and the nodes' own returned values are
  not changed by the fold.
"""

from __future__ import annotations

import functools
import operator
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from graphflow_schedule_reference import sync_order
from pytest_graphflow import (
    END,
    START,
    Expand,
    Graph,
    GraphRuntime,
    InMemoryCheckpointStore,
    Reducer,
    VirtualClock,
)

pytestmark = pytest.mark.anyio

WIDE = 10_000


class S(BaseModel):
    log: Annotated[list[str], Reducer(operator.add)] = []
    seen: Annotated[dict[str, int], Reducer(operator.or_)] = {}
    n: int = 0


def source(name: str, started: list[str]) -> Any:
    def fn(s: S) -> dict[str, Any]:
        started.append(name)
        return {"log": [name]}

    return fn


def joined(s: S) -> dict[str, Any]:
    return {"n": len(s.log)}


async def test_a_10000_wide_join_runs_once_after_every_source_in_the_seeded_order() -> None:
    started: list[str] = []
    names = [f"w{i}" for i in range(WIDE)]
    g = Graph("wide", S)
    for name in names:
        g.node(name, source(name, started))
    g.node("join", joined)
    g.edge(START, names).edge(names, "join").edge("join", END)
    trace = await GraphRuntime(clock=VirtualClock(), seed=7).atrace(g.compile(), {})

    assert trace.result.status == "completed"
    assert trace.result.data["n"] == WIDE
    assert trace.result.data["log"] == names  # folded in declared order
    step = next(e.step for e in trace.events if e.type == "node_start")
    assert started == sync_order(7, trace.result.run_id, step, names)
    kinds = [(e.type, e.node) for e in trace.events if e.type in ("node_start", "node_end")]
    # The batch's events in declared order, the join's after all of them, once.
    assert kinds[: 2 * WIDE : 2] == [("node_start", n) for n in names]
    assert kinds[2 * WIDE :] == [("node_start", "join"), ("node_end", "join")]
    edges = [e.source for e in trace.events if e.type == "edge_transition" and e.target == "join"]
    assert edges == names


async def test_arrivals_of_a_wide_join_survive_a_pause_in_the_order_they_came() -> None:
    # Even sources run in the first batch, odd ones after "gate": the join has half its
    # arrivals when the run pauses after that first batch.
    started: list[str] = []
    names = [f"w{i}" for i in range(WIDE)]
    g = Graph("halves", S)
    for name in names:
        g.node(name, source(name, started))
    g.node("gate", lambda s: None)
    g.node("join", joined)
    g.edge(START, ["gate", *names[::2]]).edge("gate", names[1::2])
    g.edge(names, "join").edge("join", END)
    graph = g.compile(interrupt_after=["gate"])
    store = InMemoryCheckpointStore()
    runtime = GraphRuntime(store, clock=VirtualClock(), seed=1)

    paused = await runtime.ainvoke(graph, {})
    assert paused.status == "interrupted"
    latest = await store.latest(paused.run_id)
    assert latest is not None
    assert list(latest.arrivals.values()) == [names[::2]]

    done = await runtime.aresume(paused.run_id)
    assert done.status == "completed"
    assert done.data["n"] == WIDE
    assert done.data["log"] == names[::2] + names[1::2]
    assert started.count("w0") == 1
    assert len(started) == WIDE


async def test_a_10000_item_expansion_folds_lists_and_dicts_without_touching_what_it_read(
) -> None:
    given = ["before"]
    returned: list[tuple[int, dict[str, Any]]] = []

    def work(s: S, ctx: Any) -> dict[str, Any]:
        patch = {"log": [f"i{ctx.item}"], "seen": {f"k{ctx.item % 100}": ctx.item}}
        returned.append((ctx.item, patch))
        return patch

    g = Graph("expand", S)
    g.node("plan", lambda s: Expand("work", list(range(WIDE))), destinations=["work"])
    g.node("work", work)
    g.edge(START, "plan").edge("work", END)
    store = InMemoryCheckpointStore()
    result = await GraphRuntime(store, clock=VirtualClock(), seed=3).ainvoke(
        g.compile(checkpoint_policy="every_step"), {"log": given})

    assert result.data["log"] == ["before"] + [f"i{k}" for k in range(WIDE)]
    # The reference fold: the reducer applied write after write, in item order.
    assert result.data["seen"] == functools.reduce(
        operator.or_, [{f"k{k % 100}": k} for k in range(WIDE)], {})
    assert list(result.data["seen"]) == [f"k{k}" for k in range(100)]
    assert given == ["before"]
    assert len(returned) == WIDE
    assert all(p == {"log": [f"i{k}"], "seen": {f"k{k % 100}": k}} for k, p in returned)
    history = await GraphRuntime(store, clock=VirtualClock(), seed=3).history(result.run_id)
    # Every checkpoint saved before the wide batch ran (the input's, the one C7 saves before
    # the expansion, the one the batch starts from) still holds the state it was saved with.
    before = [cp for cp in history if cp.next_step <= 1]
    assert [(cp.step, cp.next_step) for cp in before] == [(-1, 0), (0, 0), (0, 1)]
    assert all(cp.state["log"] == ["before"] and cp.state["seen"] == {} for cp in before)
