"""Seed 000 / C6: "when per-node checkpoints of two nodes of one batch are both refused ... the
error is the first in the order the nodes are declared" (issue 13).

Where this runtime saves per node. The parent run saves one checkpoint per superstep (plus,
before an expansion, the checkpoint C7 asks for, saved first), so at most one save of a batch
is refused in the parent itself: the first refusal ends the run, and a per-node
``checkpoint=True`` or the graph's policy only decides *whether* the batch's checkpoint is
saved (``test_one_refused_save_per_batch_in_the_parent`` pins that). The checkpoints a batch
does save node by node, in the order its nodes get to them, are those of **subgraph nodes**:
each runs a child run that saves its own checkpoints (namespaced under the task) while the
rest of the batch runs. Before issue 13's fix, a child's refused save failed the subgraph
node with ``NodeFailed`` wrapping the store's error; the run then saved a failed checkpoint
and yielded the batch's events. Now it is C6 one level down: the batch runs to its end, no
event of it is yielded, and the parent's stream raises the store's own exception of the
first subgraph node in declared order — whatever order the children saved in, whatever the
order of the ``FaultyStore`` rules, whatever the seed.
"""

from __future__ import annotations

import itertools
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    FaultyStore,
    Graph,
    GraphRuntime,
    InMemoryCheckpointStore,
    Subgraph,
    VirtualClock,
)

pytestmark = pytest.mark.anyio


class Child(BaseModel):
    done: str = ""


class Parent(BaseModel):
    first: str = ""
    second: str = ""
    log: list[str] = []


class Refused(Exception):
    """The store's own error for one child's save."""


def child(name: str, delay: float) -> Any:
    async def work(state: Child) -> dict[str, Any]:
        await anyio.sleep(delay)  # virtual time
        return {"done": name}

    c = Graph(f"child-{name}", Child)
    c.node("work", work).edge(START, "work").edge("work", END)
    return c.compile()


def parent() -> Any:
    p = Graph("two-children", Parent)
    # Declared first, but its child sleeps longer: "second" can save before it.
    p.node("first", Subgraph(child("first", 5), output=lambda s: {"first": s.done}))
    p.node("second", Subgraph(child("second", 1), output=lambda s: {"second": s.done}))
    p.node("after", lambda s: {"log": ["after"]})
    p.edge(START, ["first", "second"]).edge(["first", "second"], "after").edge("after", END)
    return p.compile()


def refusing(store: FaultyStore, order: tuple[str, ...], when: str) -> dict[str, Refused]:
    """Rules refusing each child's saves (``when``: its first save, or its completing one)."""
    errors = {name: Refused(f"refused {name}'s checkpoint") for name in order}
    for name in order:
        def match(cp: Any, name: str = name) -> bool:
            return cp.graph_id == f"child-{name}" and (
                when == "first" or cp.status == "completed")
        store.reject_save(when=match, error=errors[name])
    return errors


CASES = list(itertools.product([0, 1, 2, 3, 5, 8], [("first", "second"), ("second", "first")],
                               ["first", "completed"]))


@pytest.mark.parametrize(("seed", "rules", "when"), CASES,
                         ids=[f"seed{s}-{'+'.join(r)}-{w}" for s, r, w in CASES])
async def test_two_refused_child_saves_raise_the_first_declared(
    seed: int, rules: tuple[str, ...], when: str
) -> None:
    store = FaultyStore(InMemoryCheckpointStore())
    errors = refusing(store, rules, when)
    rt = GraphRuntime(store=store, clock=VirtualClock(), seed=seed)
    events: list[Any] = []

    async def consume() -> None:
        async for event in rt.stream(parent()):
            events.append(event)

    with pytest.raises(Refused) as info:
        await consume()
    # C6: the store's own exception, unwrapped, of the node declared first.
    assert info.value is errors["first"]
    # Every other node of the batch ran to its end first: both children's saves were refused.
    refused = [c.error for c in store.calls if c.outcome == "rejected"]
    assert sorted(refused) == sorted(repr(e) for e in errors.values())
    # ... and no event of the batch was yielded.
    assert [e.type for e in events] == ["run_start", "checkpoint_saved"]
    assert rt.run_record(events[0].run_id).status == "failed"


async def test_the_cases_cover_both_save_orders() -> None:
    """The table above is not vacuous: in some cases "second" is refused first in time."""
    firsts = set()
    for seed, rules, when in CASES:
        store = FaultyStore(InMemoryCheckpointStore())
        errors = refusing(store, rules, when)
        with pytest.raises(Refused):
            await GraphRuntime(store=store, clock=VirtualClock(), seed=seed).ainvoke(parent())
        first = next(c.error for c in store.calls if c.outcome == "rejected")
        firsts.add(next(n for n, e in errors.items() if repr(e) == first))
    assert firsts == {"first", "second"}


async def test_a_resume_continues_from_the_last_saved_checkpoint_and_both_children() -> None:
    """C8 after the refusal: resuming by run id continues the children where they stood."""
    store = FaultyStore(InMemoryCheckpointStore())
    refusing(store, ("first", "second"), "completed")
    rt = GraphRuntime(store=store, clock=VirtualClock(), seed=1)
    run_ids: list[str] = []

    async def consume() -> None:
        async for event in rt.stream(parent()):
            run_ids.append(event.run_id)

    with pytest.raises(Refused):
        await consume()
    store.clear_rules()
    result = await rt.aresume(run_ids[0])
    assert result.status == "completed"
    assert result.data == {"first": "first", "second": "second", "log": ["after"]}


class Flat(BaseModel):
    a: int = 0
    b: int = 0


@pytest.mark.parametrize("rules", [("a", "b"), ("b", "a")], ids=["a-rule-first", "b-rule-first"])
async def test_one_refused_save_per_batch_in_the_parent(rules: tuple[str, ...]) -> None:
    """Per-node ``checkpoint=True`` on two nodes of one batch (policy ``never``): the batch
    saves one checkpoint, listing both nodes, so exactly one save is refused and the run ends
    with that save's error — which error is the store's choice (here its first matching
    rule), not a per-node order the runtime could pick."""

    async def a(state: Flat) -> dict[str, Any]:
        await anyio.sleep(5)
        return {"a": 1}

    async def b(state: Flat) -> dict[str, Any]:
        await anyio.sleep(1)
        return {"b": 1}

    g = Graph("flat", Flat)
    g.node("a", a, checkpoint=True).node("b", b, checkpoint=True)
    g.edge(START, ["a", "b"]).edge("a", END).edge("b", END)
    store = FaultyStore(InMemoryCheckpointStore())
    errors = {n: Refused(n) for n in rules}
    for n in rules:
        store.reject_save(when=lambda cp, n=n: n in cp.node_ids, error=errors[n])
    with pytest.raises(Refused) as info:
        await GraphRuntime(store=store, clock=VirtualClock(), seed=2).ainvoke(
            g.compile(checkpoint_policy="never"))
    assert [c.op for c in store.calls if c.outcome == "rejected"] == ["save"]  # the batch's
    # one checkpoint, covering a and b
    assert info.value is errors[rules[0]]
