"""Properties on LangGraph graphs: each passes on a sound graph and finds a planted bug."""

from __future__ import annotations

import asyncio
import json
import operator
import random
import re
import threading
from datetime import UTC, datetime
from typing import Annotated, Any, TypedDict

import pytest
from graphs import FanState, approval, fan_out, map_into_a_subgraph, refund_desk, two_reviews
from hypothesis import strategies as st
from langgraph.graph import END, START, StateGraph, add_messages
from langgraph.types import Send, interrupt

from pytest_graphflow import RealClock, VirtualClock
from pytest_graphflow.errors import InvalidArgument
from pytest_graphflow.langgraph import (
    LangGraphHarness,
    check_crash_recovery,
    check_determinism,
    check_interrupt_resume_equivalence,
    check_reducer_laws,
    drive,
    explore,
)


class Ledger(TypedDict, total=False):
    charged: int
    log: Annotated[list[str], operator.add]


def _payment(ledger: list[int], *, idempotent: bool) -> StateGraph:
    """charge -> receipt. The bad charge reads an outside ledger it also appends to."""

    def charge(state: Ledger) -> dict[str, Any]:
        if idempotent:
            return {"charged": 100}
        ledger.append(100)
        return {"charged": sum(ledger)}

    g = StateGraph(Ledger)
    g.add_node("charge", charge)
    g.add_node("receipt", lambda s: {"log": [f"charged {s['charged']}"]})
    g.add_edge(START, "charge")
    g.add_edge("charge", "receipt")
    g.add_edge("receipt", END)
    return g


def test_crash_at_every_saver_operation_then_recover_passes_on_an_idempotent_graph() -> None:
    assert check_crash_recovery(_payment([], idempotent=True), {"log": []}) == []


def test_crash_recovery_finds_a_planted_non_idempotent_node() -> None:
    ledger: list[int] = []
    found = check_crash_recovery(_payment(ledger, idempotent=False), {"log": []},
                                 phases=("after",))
    assert found
    assert {v.rule for v in found} == {"crash-recovery"}
    assert all("is it idempotent" in v.message for v in found)
    _, nth, phase = found[0].example
    assert phase == "after"
    assert isinstance(nth, int)


def test_crash_recovery_answers_interrupts() -> None:
    assert check_crash_recovery(approval(), {"log": []}, answers={"review": "ok"},
                                phases=("before",)) == []


def test_explore_covers_every_start_order_and_finds_no_divergence_on_a_pure_graph() -> None:
    report = explore(fan_out(), {"log": []})
    assert report.ok, str(report)
    ((name, (seen, total)),) = report.coverage.items()
    assert name.startswith("leg 1 step 1: ")  # the nodes, in task-id order
    assert sorted(name.removeprefix("leg 1 step 1: ").split(", ")) == ["a", "b", "c"]
    assert seen == total == 6


def _shared_list() -> StateGraph:
    """Three parallel nodes share one list and report what they saw: order-dependent."""
    shared: list[str] = []

    def make(name: str) -> Any:
        async def node(state: FanState) -> dict[str, Any]:
            if name == "a":
                shared.clear()
            shared.append(name)
            return {"log": [f"{name} saw {len(shared)}"]}
        return node

    g = StateGraph(FanState)
    for name in "abc":
        g.add_node(name, make(name))
        g.add_edge(START, name)
        g.add_edge(name, END)
    return g


def test_explore_finds_state_shared_between_parallel_tasks() -> None:
    report = explore(_shared_list(), {"log": []}, seeds=range(6), schedules=6)
    assert not report.ok
    assert report.divergences
    assert "state" in report.divergences[0].differs_in


def test_determinism_holds_for_the_same_seed() -> None:
    assert check_determinism(fan_out({"a": 1.0, "b": 0.5, "c": 0.0}), {"log": []}) == []


def test_determinism_finds_unseeded_randomness_in_a_node() -> None:
    rng = random.Random()

    def roll(state: FanState) -> dict[str, Any]:
        return {"log": [str(rng.random())]}

    g = StateGraph(FanState)
    g.add_node("roll", roll)
    g.add_edge(START, "roll")
    g.add_edge("roll", END)
    found = check_determinism(g, {"log": []})
    assert [v.rule for v in found] == ["determinism"]


def test_interrupt_resume_equivalence_holds() -> None:
    assert check_interrupt_resume_equivalence(approval(), {"log": []}, {"review": "ok"}) == []
    assert check_interrupt_resume_equivalence(
        two_reviews(), {"log": []}, lambda i: i.node.upper()) == []


def test_interrupt_resume_equivalence_finds_state_kept_in_the_process() -> None:
    seen: list[str] = []

    def remember(state: FanState) -> dict[str, Any]:
        seen.append("x")  # survives a resume in one process, not in a fresh one
        return {"log": [str(len(seen))]}

    g = approval()
    g.add_node("count", remember)
    g.add_edge("review", "count")
    # rebuild the end: review -> count -> END
    g.edges.discard(("review", END))
    g.add_edge("count", END)
    found = check_interrupt_resume_equivalence(g, {"log": []}, {"review": "ok"})
    assert [v.rule for v in found][:1] == ["equivalence"]


class Chat(TypedDict, total=False):
    messages: Annotated[list[Any], add_messages]
    total: Annotated[int, operator.add]
    tags: Annotated[list[str], lambda a, b: [*b, *a]]


def _chat() -> StateGraph:
    g = StateGraph(Chat)
    g.add_node("n", lambda s: {})
    g.add_edge(START, "n")
    return g


def test_reducer_laws_hold_for_add_messages_and_operator_add() -> None:
    found = check_reducer_laws(_chat(), {"total": st.integers()}, keys=["messages", "total"],
                               commutative=False, max_examples=25)
    assert found == []


def test_reducer_laws_find_an_order_dependent_reducer() -> None:
    found = check_reducer_laws(_chat(), {"tags": st.lists(st.text("ab", max_size=1),
                                                          max_size=2)},
                               keys=["tags"], commutative=True, max_examples=25)
    assert [v.rule for v in found] == ["reducer:order"]
    assert "'tags'" in found[0].message


class Basket(TypedDict, total=False):
    items: list[str]
    seen: int


def _appends_to_its_input() -> StateGraph:
    """One node appends to the list it was given (LangGraph passes the input's own list)."""

    def take(state: Basket) -> dict[str, Any]:
        state["items"].append("taken")
        return {"seen": len(state["items"])}

    g = StateGraph(Basket)
    g.add_node("take", take)
    g.add_edge(START, "take")
    g.add_edge("take", END)
    return g


def test_every_run_of_a_property_gets_a_fresh_copy_of_the_input() -> None:
    given: Basket = {"items": ["apple"]}
    report = explore(_appends_to_its_input(), given, seeds=range(3), schedules=3)
    assert report.ok, str(report)
    # the in-place append was never saved by LangGraph (no write to "items"): the result is
    # the saved state, which a resumed or recovered run continues from
    assert report.baseline.state == '{"items": ["apple"], "seen": 2}'
    assert check_determinism(_appends_to_its_input(), given, runs=3) == []
    assert check_interrupt_resume_equivalence(_appends_to_its_input(), given, None) == []
    assert given == {"items": ["apple"]}


def test_explore_counts_only_real_choice_points_under_a_subgraph() -> None:
    # classify; then refund (a subgraph: lookup, approve, pay) and notify in parallel. The
    # only choice the seed makes is the start order of refund and notify: the subgraph's
    # own one-task steps are no batch, nor part of the parent's step of the same number.
    report = explore(refund_desk(), {"amount": 5}, answers={"refund": "yes"},
                     seeds=range(4), max_runs=12)
    assert report.ok, str(report)
    assert report.coverage == {"leg 1 step 2: notify, refund": (2, 2)}
    assert report.runs < 12


def test_explore_covers_a_parallel_step_inside_a_subgraph_under_its_name() -> None:
    inner = fan_out()
    outer = StateGraph(FanState)
    outer.add_node("fan", inner.compile())
    outer.add_edge(START, "fan")
    outer.add_edge("fan", END)
    report = explore(outer, {"log": []}, max_runs=30)
    assert report.ok, str(report)
    ((name, (seen, total)),) = report.coverage.items()
    assert name.startswith("leg 1 fan step 1: ")  # the child's nodes, in task-id order
    assert sorted(name.removeprefix("leg 1 fan step 1: ").split(", ")) == ["a", "b", "c"]
    assert seen == total == 6


def _racy() -> StateGraph:
    """reset, then a, b, c in parallel append to one shared list and report its length: the
    log hangs on their start order only (reset empties the list in every run)."""
    shared: list[str] = []

    def make(name: str) -> Any:
        async def node(state: FanState) -> dict[str, Any]:
            shared.append(name)
            return {"log": [f"{name} saw {len(shared)}"]}
        return node

    g = StateGraph(FanState)
    g.add_node("reset", lambda s: shared.clear() or {})
    g.add_edge(START, "reset")
    for name in "abc":
        g.add_node(name, make(name))
        g.add_edge("reset", name)
        g.add_edge(name, END)
    return g


def test_explore_names_the_harness_call_that_reproduces_a_divergence() -> None:
    report = explore(_racy(), {"log": []}, seeds=range(6), schedules=6)
    (first, *_), *_ = report.distinct
    call = report.reproduction(first.seed)
    assert call == (f"LangGraphHarness(graph, seed={first.seed}, thread_id='explore')"
                    ".trace(input)")
    assert f"(reproduce: {call})" in str(report)
    trace = eval(call, {"LangGraphHarness": LangGraphHarness, "graph": _racy(),
                        "input": {"log": []}})
    assert json.dumps(trace.result.data, sort_keys=True) == first.outcome.state
    assert first.outcome.state != report.baseline.state


def test_the_reproduction_names_answers_and_the_harness_options_used() -> None:
    report = explore(approval(), {"log": []}, answers={"review": "ok"}, seeds=[3],
                     durability="sync")
    assert report.reproduction(3) == (
        "drive(LangGraphHarness(graph, seed=3, thread_id='explore', durability='sync'), "
        "input, answers)")


def test_explore_runs_each_seed_on_a_fresh_clock_from_the_instant_given() -> None:
    def stamp(state: FanState) -> dict[str, Any]:
        return {"log": [datetime.now(UTC).isoformat()]}

    g = StateGraph(FanState)
    g.add_node("stamp", stamp)
    g.add_edge(START, "stamp")
    g.add_edge("stamp", END)
    start = datetime(2025, 6, 1, 9, tzinfo=UTC)
    report = explore(g, {"log": []}, seeds=range(3), schedules=3,
                     clock=VirtualClock(start=start))
    assert report.ok, str(report)
    assert report.baseline.state == '{"log": ["2025-06-01T09:00:00+00:00"]}'
    call = report.reproduction(2)
    assert call == ("LangGraphHarness(graph, seed=2, thread_id='explore', clock=VirtualClock("
                    f"start={start!r})).trace(input)")
    trace = eval(call, {"LangGraphHarness": LangGraphHarness, "VirtualClock": VirtualClock,
                        "datetime": __import__("datetime"), "graph": g, "input": {"log": []}})
    assert json.dumps(trace.result.data, sort_keys=True) == report.baseline.state


def test_the_reproduction_names_the_clock_start_a_freeze_time_gave() -> None:
    import freezegun

    with freezegun.freeze_time("2030-05-05 10:00:00"):
        report = explore(approval(), {"log": []}, answers={"review": "ok"}, seeds=[1])
    start = datetime(2030, 5, 5, 10, tzinfo=UTC)
    assert report.reproduction(1) == (
        "drive(LangGraphHarness(graph, seed=1, thread_id='explore', "
        f"clock=VirtualClock(start={start!r})), input, answers)")


class Job(TypedDict, total=False):
    n: int
    out: Annotated[list[str], operator.add]


class JobOut(TypedDict, total=False):
    out: Annotated[list[str], operator.add]


def test_explore_leaves_out_tasks_of_one_step_that_never_wait_together() -> None:
    # Two Sends into a subgraph: their `wait` tasks may start together (a choice), but
    # the first `work` runs at 0 s and the second at 1 s, alone each time: no choice.
    worker = StateGraph(Job, output_schema=JobOut)

    async def wait(state: Job) -> dict[str, Any]:
        await asyncio.sleep(state["n"])
        return {"out": [f"waited {state['n']}"]}

    worker.add_node("wait", wait)
    worker.add_node("work", lambda s: {"out": [f"work {s['n']}"]})
    worker.add_edge(START, "wait")
    worker.add_edge("wait", "work")
    worker.add_edge("work", END)
    g = StateGraph(Job)
    g.add_node("plan", lambda s: {})
    g.add_node("worker", worker.compile())
    g.add_edge(START, "plan")
    g.add_conditional_edges("plan", lambda s: [Send("worker", {"n": k}) for k in (0, 1)],
                            ["worker"])
    g.add_edge("worker", END)
    report = explore(g, {"out": []}, seeds=range(4), schedules=4)
    assert report.ok, str(report)
    assert sorted(report.coverage) == ["leg 1 step 2: worker, worker",
                                       "leg 1 worker step 0: __start__, __start__",
                                       "leg 1 worker step 1: wait, wait"]


def test_explore_finds_no_divergence_in_parallel_subgraphs_drawing_ids() -> None:
    # Three Sends into a subgraph whose node draws a uuid4: each subgraph's checkpoint ids,
    # and so its task ids and its node's draws, are its own, whatever order they ran in.
    report = explore(map_into_a_subgraph(), {"n": 4, "out": []}, seeds=range(8))
    assert report.ok, str(report)
    assert report.coverage["leg 1 worker step 1: work, work, work"] == (6, 6)
    assert len({o.state for o in report.outcomes}) == 1


@pytest.mark.parametrize(("call", "message"), [
    pytest.param(lambda: explore(approval(), {"log": [], "lock": threading.Lock()},
                                 answers={"review": "ok"}, seeds=[0]),
                 "the input dict cannot be deep-copied", id="explore-uncopyable-input"),
    pytest.param(lambda: check_determinism(approval(), {"log": [threading.Lock()]},
                                           answers={"review": "ok"}),
                 "the input dict cannot be deep-copied", id="determinism-uncopyable-input"),
    pytest.param(lambda: explore(approval(), {"log": []}, answers={"review": "ok"},
                                 clock=RealClock()),
                 "explore(clock=", id="explore-real-clock"),
])
def test_bad_property_input_is_refused_with_the_fix(call: Any, message: str) -> None:
    with pytest.raises(InvalidArgument, match=re.escape(message)):
        call()


def _race_into_a_subgraph() -> StateGraph:
    """reset, then a subgraph's `look` (which asks for approval after) and the parent's
    `note` append to one shared list: what `look` saw hangs on their order (planted)."""
    shared: list[str] = []

    async def look(state: FanState) -> dict[str, Any]:
        shared.append("look")
        return {"log": [f"look saw {len(shared)}"]}

    async def note(state: FanState) -> dict[str, Any]:
        shared.append("note")
        return {"log": [f"note saw {len(shared)}"]}

    child = StateGraph(FanState)
    child.add_node("look", look)
    child.add_node("ask", lambda s: {"answer": str(interrupt("ok?"))})
    child.add_edge(START, "look")
    child.add_edge("look", "ask")
    child.add_edge("ask", END)
    g = StateGraph(FanState)
    g.add_node("reset", lambda s: shared.clear() or {})
    g.add_node("sub", child.compile())
    g.add_node("note", note)
    g.add_edge(START, "reset")
    g.add_edge("reset", "sub")
    g.add_edge("reset", "note")
    return g


def test_explore_finds_a_race_into_a_subgraph_and_its_reproduction_reproduces_it() -> None:
    report = explore(_race_into_a_subgraph(), {"log": []}, answers={"sub": "yes"},
                     seeds=range(8))
    assert not report.ok
    (first, *_), *_ = report.distinct
    call = report.reproduction(first.seed)
    assert call.startswith(f"drive(LangGraphHarness(graph, seed={first.seed}, ")
    h_events = eval(call, {"LangGraphHarness": LangGraphHarness, "drive": drive,
                           "graph": _race_into_a_subgraph(), "input": {"log": []},
                           "answers": {"sub": "yes"}})
    (end,) = [e for e in h_events if e.type == "run_end" and e.status == "completed"]
    assert json.dumps(end.state, sort_keys=True) == first.outcome.state
    assert first.outcome.state != report.baseline.state
