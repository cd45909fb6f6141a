"""Seed 000 / C6: "In a parallel batch, every other node of the batch runs to the end first,
none of the batch's events is yielded, and the error is the first in the order the nodes are
declared" (issues 13 and 23).

Where this runtime saves per node. Under a policy that saves every step, a batch saves one
checkpoint (plus, before an expansion, the checkpoint C7 asks for, saved first). Under
``on_halt`` or ``never``, each node of the batch with ``checkpoint=True`` gets the checkpoint
taken after it, labelled by it (``node_id``), saved in declared order once the whole batch ran:
when the store refuses several, the first declared is raised (before issue 23's fix the batch
saved one checkpoint labelled by its last node, so the last node's error was raised). The
other checkpoints a batch saves node by node are those of **subgraph nodes**: each runs a
child run that saves its own checkpoints (namespaced under the task) while the rest of the
batch runs. A child's refused save is C6 one level down: the batch runs to its end, no event
of it is yielded, and the parent's stream raises the store's own exception of the first
subgraph node in declared order — whatever order the children saved in, whatever the order of
the ``FaultyStore`` rules, whatever the seed.
"""

from __future__ import annotations

import itertools
import operator
from typing import Annotated, Any

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
    Reducer,
    Subgraph,
    VirtualClock,
)

from .conftest import RejectingStore, run, runtime

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


class ErrY(Exception):
    """The store's error for the checkpoint taken after ``y``."""


class ErrZ(Exception):
    """The store's error for the checkpoint taken after ``z``."""


class Fan(BaseModel):
    log: Annotated[list[str], Reducer(operator.add)] = []


def per_node_fan(ran: list[str], sleeps: dict[str, float]) -> Any:
    """Declared ``plan``, ``x``, ``y``, ``z``, ``join``; ``plan -> [x, y, z] -> join``; ``y``
    and ``z`` ask for a checkpoint of their own; the policy saves none."""

    def worker(name: str) -> Any:
        async def work(state: Fan) -> dict[str, Any]:
            await anyio.sleep(sleeps.get(name, 0))  # virtual time
            ran.append(name)
            return {"log": [name]}

        return work

    g = Graph("per-node-fan", Fan)
    g.node("plan", worker("plan"))
    g.node("x", worker("x"))
    g.node("y", worker("y"), checkpoint=True)
    g.node("z", worker("z"), checkpoint=True)
    g.node("join", worker("join"))
    g.edge(START, "plan").edge("plan", ["x", "y", "z"]).edge(["x", "y", "z"], "join")
    g.edge("join", END)
    return g.compile(checkpoint_policy="never")


SLEEPS = [{}, {"y": 5.0, "z": 1.0}, {"y": 1.0, "z": 5.0, "x": 3.0}]
PER_NODE_CASES = list(itertools.product([0, 1, 2, 3, 7, 11], range(len(SLEEPS)),
                                        [("z", "y"), ("y", "z")]))


@pytest.mark.parametrize(("seed", "sleeps", "rules"), PER_NODE_CASES,
                         ids=[f"seed{s}-sleeps{t}-{'+'.join(r)}-rule-first"
                              for s, t, r in PER_NODE_CASES])
async def test_two_refused_per_node_saves_of_one_batch_raise_the_first_declared(
    seed: int, sleeps: int, rules: tuple[str, ...]
) -> None:
    """Seed 000: "In a parallel batch, every other node of the batch runs to the end first,
    none of the batch's events is yielded, and the error is the first in the order the nodes
    are declared" — with "Checkpoints are saved according to both the graph-wide
    checkpointPolicy and per-node checkpoint settings": under ``checkpoint_policy="never"``,
    ``y`` and ``z`` (``checkpoint=True``) each get the checkpoint taken after them (its
    ``node_id`` names the node), and when the store refuses both, the stream raises ``y``'s
    error, whatever the seed, the order the nodes finish in or the order of the store's
    rules. Before, the batch saved one checkpoint labelled ``z`` and ``ErrZ`` was raised."""
    store = RejectingStore()
    errors = {"y": ErrY("refused y"), "z": ErrZ("refused z")}
    for name in rules:
        store.reject(errors[name], when=lambda cp, name=name: cp.node_id == name)
    ran: list[str] = []
    rt = runtime(seed, store)
    events: list[Any] = []

    async def consume() -> None:
        async for event in rt.stream(per_node_fan(ran, SLEEPS[sleeps])):
            events.append(event)

    with pytest.raises(ErrY) as info:
        await consume()
    assert info.value is errors["y"]  # the store's own exception, unwrapped
    assert sorted(ran) == ["plan", "x", "y", "z"]  # every node of the batch ran
    batch = [e for e in events if getattr(e, "node", None) in ("x", "y", "z")]
    assert batch == []  # no event of the batch was yielded
    assert rt.run_record(events[0].run_id).status == "failed"


async def test_per_node_checkpoints_of_one_batch_are_labelled_by_their_node() -> None:
    """The passing twin: with no refusal, ``y`` and ``z`` each have a checkpoint labelled by
    them, in declared order whatever order they finished in, ``x`` none of its own, and the
    run completes."""
    ran: list[str] = []
    rt = runtime(3)
    events, result = await run(rt, per_node_fan(ran, {"y": 5.0, "z": 1.0}))
    assert result.status == "completed"
    stored = await rt.store.list(result.run_id)
    labels = [cp.node_id for cp in stored if cp.step == 1]
    assert labels == ["y", "z"]
    assert [e.checkpoint_id for e in events if e.type == "checkpoint_saved"] == [
        cp.id for cp in stored]


async def test_a_resume_after_the_refusal_continues_from_the_last_saved_checkpoint() -> None:
    """Seed 000: "A resume by the runId of run_start continues from the last checkpoint the
    store saved." Only ``z``'s save is refused: ``y``'s, saved first, holds the batch's
    result, so the resume runs ``join`` alone."""
    store = RejectingStore()
    store.reject(ErrZ("refused z"), when=lambda cp: cp.node_id == "z")
    ran: list[str] = []
    rt = runtime(1, store)
    run_ids: list[str] = []

    async def consume() -> None:
        async for event in rt.stream(per_node_fan(ran, {"y": 5.0, "z": 1.0})):
            run_ids.append(event.run_id)

    with pytest.raises(ErrZ):
        await consume()
    assert [cp.node_id for cp in await store.list(run_ids[0])] == ["y"]
    store.clear()
    ran.clear()
    result = await rt.aresume(run_ids[0])
    assert result.status == "completed"
    assert ran == ["join"]
    assert sorted(result.data["log"]) == ["join", "plan", "x", "y", "z"]
