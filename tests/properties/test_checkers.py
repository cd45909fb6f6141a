"""The invariant checkers on a real two-leg log and on mutations of it, one rule broken each.

The clean log (and its store call log) must pass every checker; each mutation must be
reported under the rule it breaks.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from datetime import timedelta
from typing import Annotated, Any

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Expand,
    FaultyStore,
    Graph,
    GraphRuntime,
    InMemoryCheckpointStore,
    Reducer,
    Resume,
    VirtualClock,
    interrupt,
)
from pytest_graphflow.invariants import (
    Mark,
    Violation,
    assert_invariants,
    check_c1,
    check_invariants,
    format_violations,
    record_run,
)

Events = list[Any]


class S(BaseModel):
    items: Annotated[list[str], Reducer(operator.add)] = []
    answer: str = ""


def plan(state: S) -> Expand:
    return Expand("work", ["x", "y"])


async def work(state: S, ctx: Any) -> dict[str, Any]:
    await anyio.sleep(1.0)
    return {"items": [ctx.item]}


def ask(state: S) -> dict[str, Any]:
    return {"answer": str(interrupt("ok?", id="q"))}


def build() -> Any:
    g = Graph("checked", S)
    g.node("plan", plan, destinations=["work"])
    g.node("work", work)
    g.node("a", lambda s: {"items": ["a"]})
    g.node("c", lambda s: {"items": ["c"]}, effect="external")
    g.node("ask", ask, effect="human")
    g.node("fin", lambda s: None)
    g.edge(START, "plan")
    g.edge("work", ["a", "c", "ask"])
    g.edge(["a", "c", "ask"], "fin")
    g.edge("fin", END)
    return g.compile()


GRAPH = build()


def _log() -> tuple[Events, list[Any]]:
    async def main() -> tuple[Events, list[Any]]:
        store = FaultyStore(InMemoryCheckpointStore())
        rt = GraphRuntime(store=store, clock=VirtualClock(patch_wall_clock=False), seed=3)
        first = await rt.atrace(GRAPH, {})
        assert first.result.status == "interrupted"
        second = await rt.aresume_trace(first.result.run_id, Resume("yes"))
        assert second.result.status == "completed"
        return [*first.events, *second.events], store.calls

    return anyio.run(main)


EVENTS, STORE_LOG = _log()


def find(events: Events, type_: str, node: str | None = None, leg: int | None = None,
         nth: int = 0) -> int:
    legs = [i for i, e in enumerate(events) if e.type == "run_start"]
    lo = 0 if leg is None else legs[leg]
    hi = len(events) if leg is None or leg + 1 >= len(legs) else legs[leg + 1]
    hits = [i for i in range(lo, hi) if events[i].type == type_
            and (node is None or events[i].node == node)]
    return hits[nth]


def set_(i: int, **changes: Any) -> Callable[[Events], Events]:
    def mutate(events: Events) -> Events:
        out = list(events)
        out[i] = out[i].model_copy(update=changes)
        return out

    return mutate


def move(i: int, to: int) -> Callable[[Events], Events]:
    def mutate(events: Events) -> Events:
        out = list(events)
        out.insert(to, out.pop(i))
        return out

    return mutate


def drop(*indexes: int) -> Callable[[Events], Events]:
    def mutate(events: Events) -> Events:
        return [e for i, e in enumerate(events) if i not in indexes]

    return mutate


def duplicate(events: Events, i: int) -> Events:
    return [*events[:i + 1], events[i], *events[i + 1:]]


E = EVENTS
LEG2 = find(E, "run_start", leg=1)
HALT_CP = find(E, "checkpoint_saved", leg=0, nth=-1)
STEP0_CPS = [i for i, e in enumerate(E) if e.type == "checkpoint_saved" and e.step == 0]
FIN_EDGES = [i for i, e in enumerate(E) if e.type == "edge_transition" and e.target == "fin"]

MUTATIONS: list[tuple[str, Callable[[Events], Events], str]] = [
    ("c1-missing-run-end", drop(LEG2 - 1), "C1"),
    ("c1-event-after-run-end", lambda ev: [*ev, ev[-2]], "C1"),
    ("c2-node-without-result", drop(find(E, "node_end", "plan")), "C2"),
    ("c2-two-results", lambda ev: duplicate(ev, find(ev, "node_end", "plan")), "C2"),
    ("c3-edge-before-its-source-result",
     move(find(E, "edge_transition", "work"), find(E, "node_start", "work")), "C3"),
    ("c3-start-without-an-edge", drop(*FIN_EDGES), "C3"),
    ("c4-tasks-interleaved", move(find(E, "node_start", "c", leg=0),
                                   find(E, "node_start", "a", leg=0) + 1), "C4"),
    ("c4-halting-task-first", move(find(E, "interrupt", "ask"), find(E, "node_start", "a", 0)),
     "C4"),
    ("c4-against-declared-order",
     lambda ev: move(find(ev, "node_end", "c", leg=1), find(ev, "node_start", "a", leg=1))(
         move(find(ev, "node_start", "c", leg=1), find(ev, "node_start", "a", leg=1))(ev)),
     "C4"),
    ("c4-yielded-before-the-batch-ran",
     set_(find(E, "node_end", "work"), time=E[find(E, "node_start", "work")].time
          - timedelta(seconds=1)), "C4"),
    ("c5-checkpoint-saved-before-the-interrupt", move(HALT_CP, find(E, "interrupt", "ask")),
     "C5"),
    ("c7-no-checkpoint-before-the-expansion", drop(*STEP0_CPS), "C7"),
    ("c8-resumed-from-an-older-checkpoint",
     set_(LEG2, resumed_from=E[STEP0_CPS[0]].checkpoint_id), "C8"),
    ("c9-pure-node-replayed", set_(find(E, "node_end", "a", leg=1), replayed=True), "C9"),
    ("c9-external-node-re-ran", set_(find(E, "node_end", "c", leg=1), replayed=False), "C9"),
    ("c9-replayed-patch-differs",
     set_(find(E, "node_end", "c", leg=1), patch={"items": ["other"]}), "C9"),
    ("c10-seq-repeats", set_(5, seq=E[4].seq), "C10"),
    ("c10-time-goes-back", set_(len(E) - 1, time=E[0].time - timedelta(seconds=1)), "C10"),
]


def test_the_clean_log_keeps_every_invariant() -> None:
    assert [e.type for e in E].count("run_start") == 2
    found = check_invariants(E, graph=GRAPH, store_log=STORE_LOG)
    assert found == [], format_violations(found, E)
    assert_invariants(E, STORE_LOG, graph=GRAPH)


@pytest.mark.parametrize(("mutate", "rule"), [pytest.param(m, r, id=i) for i, m, r in MUTATIONS])
def test_a_broken_rule_is_reported(mutate: Callable[[Events], Events], rule: str) -> None:
    events = mutate(E)
    found = check_invariants(events, graph=GRAPH)
    assert rule in {v.rule for v in found}, format_violations(found, events)
    with pytest.raises(AssertionError, match=rule):
        assert_invariants(events, graph=GRAPH)


def test_a_checkpoint_the_store_rejected_is_reported() -> None:
    halt_id = E[HALT_CP].checkpoint_id
    log = [dataclasses.replace(c, outcome="rejected") if c.op == "save" and halt_id in c.args
           else c for c in STORE_LOG]
    rules = {v.rule for v in check_invariants(E, graph=GRAPH, store_log=log)}
    assert {"C5", "C6"} <= rules


def test_wire_form_events_are_checked_too() -> None:
    wire = [e.model_dump(mode="json") for e in E]
    assert check_invariants(wire, graph=GRAPH) == []
    assert check_invariants([e.model_dump_json() for e in E]) == []


def test_a_stream_that_raised_may_end_without_run_end() -> None:
    partial = E[:5]
    assert check_c1(partial, stream_raised=True) == []
    assert [v.rule for v in check_c1(partial)] == ["C1"]
    assert [v.rule for v in check_c1([])] == ["C1"]


def test_a_recording_reports_events_yielded_after_a_rejected_save() -> None:
    async def main() -> Any:
        store = FaultyStore(InMemoryCheckpointStore()).reject_save(nth=2)
        rt = GraphRuntime(store=store, clock=VirtualClock(patch_wall_clock=False), seed=3)
        return await record_run(rt, GRAPH, {})

    rec = anyio.run(main)
    assert rec.error is not None
    assert rec.result is None
    assert_invariants(rec)
    # Forge a yielded event after the failed save: C6.
    rec.timeline.append(Mark("event", index=len(rec.events)))
    rec.events.append(rec.events[-1])
    with pytest.raises(AssertionError, match="C6"):
        assert_invariants(rec)


def test_violations_read_well() -> None:
    v = Violation("C4", 7, "step 1: b comes after c, against declared order")
    assert str(v) == "C4 at event #7: step 1: b comes after c, against declared order"
    assert str(Violation("C6", None, "x")) == "C6: x"
    text = format_violations([v], E)
    assert "> #7" in text
    assert "#5" in text
    assert "#9" in text


def test_a_retry_error_without_a_node_start_is_reported_not_raised() -> None:
    # A malformed log: a task's first event is a retry error (no node_start), and the leg
    # ends without its result. The checkers report, never raise: C2 names the retry error.
    from pytest_graphflow._records._events import ErrorEvent

    i = find(E, "node_start", "plan")
    retry = ErrorEvent(run_id=E[i].run_id, seq=E[i].seq, step=E[i].step, time=E[i].time,
                       node="plan", task_id=E[i].task_id, error_type="Boom", message="boom",
                       attempt=1, will_retry=True)
    events = [*E[:i], retry, *[e for e in E[i + 1:find(E, "run_start", leg=1)]
                               if e.task_id != E[i].task_id]]
    found = [v for v in check_invariants(events, graph=GRAPH) if v.rule == "C2"]
    assert [v.index for v in found] == [i, i], format_violations(found, events)
    assert "without a running attempt" in found[0].message
    assert "reported no node_end" in found[1].message


def test_a_log_given_as_an_iterator_is_checked_like_the_list() -> None:
    mutated = move(find(E, "node_start", "c", leg=0), find(E, "node_start", "a", leg=0) + 1)(E)
    assert check_invariants(iter(mutated), graph=GRAPH) == check_invariants(mutated,
                                                                              graph=GRAPH)
    assert check_invariants(iter(E), graph=GRAPH) == []
