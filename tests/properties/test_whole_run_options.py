"""Issue 14: the whole-run tools on realistic state — ``ignore=``/``normalize=``, a graph
factory, concise diffs, one answer-key form, a pause that lasts, more determinism runs.

"check_crash_recovery reported 33 violations on a correct app: recovery moves the virtual
clock ~31 s (past the claim) and the app stamps ctx.now() into its audit log. explore()
reported 'state leaks between runs' because the app's fake services are built into the
graph ... Each violation prints the whole state twice, ~100 KB, and the one differing field
was cut off."
"""

from __future__ import annotations

import operator
from datetime import datetime
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Graph,
    GraphRuntime,
    InvalidArgument,
    Reducer,
    Resume,
    ResumeError,
    VirtualClock,
    explore,
    interrupt,
)
from pytest_graphflow.invariants import (
    check_crash_recovery,
    check_determinism,
    check_interrupt_resume_equivalence,
)


class S(BaseModel):
    audit: Annotated[list[dict[str, Any]], Reducer(operator.add)] = []
    blob: str = ""
    n: int = 0
    route: str = ""


def stamped_graph() -> Any:
    """An app stamping ctx.now() into an audit log, with a large state."""

    def work(state: S, ctx: Any) -> dict[str, Any]:
        return {"audit": [{"what": "work", "at": ctx.now().isoformat()}], "blob": "x" * 5000}

    def done(state: S, ctx: Any) -> dict[str, Any]:
        return {"audit": [{"what": "done", "at": ctx.now().isoformat()}]}

    g = Graph("stamped", S)
    g.node("work", work)
    g.node("done", done)
    g.edge(START, "work")
    g.edge("work", "done")
    g.edge("done", END)
    return g.compile()


def test_recovery_moves_time_so_timestamps_differ_in_a_concise_diff() -> None:
    found = check_crash_recovery(stamped_graph())

    assert found, "recovery waits out the claim: a stamped time differs"
    for v in found:
        assert "audit.1.at" in v.message or "audit.0.at" in v.message
        assert "x" * 100 not in v.message  # no state dumps
        assert len(v.message) < 600


@pytest.mark.parametrize("options", [
    {"ignore": ["audit.*.at"]},
    {"ignore": "audit.*.at"},
    {"normalize": lambda s: {**s, "audit": [e["what"] for e in s["audit"]]}},
], ids=["ignore-list", "ignore-str", "normalize"])
def test_ignore_or_normalize_lets_a_correct_app_pass_crash_recovery(options: Any) -> None:
    assert check_crash_recovery(stamped_graph(), **options) == []


@pytest.mark.parametrize(("options", "match"), [
    ({"ignore": [""]}, "dotted keys"),
    ({"ignore": ["a..b"]}, "dotted keys"),
    ({"ignore": [3]}, "dotted keys"),
    ({"normalize": "upper"}, "function state -> state"),
], ids=["empty", "empty-part", "not-str", "normalize-not-callable"])
def test_bad_compare_options_are_refused(options: Any, match: str) -> None:
    with pytest.raises(InvalidArgument, match=match):
        check_crash_recovery(stamped_graph(), **options)


# --------------------------------------------------------------------------- graph factory


class Payments:
    """A fake service built into the graph (the pattern of examples/)."""

    def __init__(self) -> None:
        self.charged: list[int] = []


def build(payments: Payments) -> Any:
    def charge(state: S) -> dict[str, Any]:
        payments.charged.append(1)
        return {"n": len(payments.charged)}

    g = Graph("pay", S)
    g.node("charge", charge, effect="external")
    g.edge(START, "charge")
    g.edge("charge", END)
    return g.compile()


def test_a_fake_built_into_one_graph_leaks_between_explore_runs() -> None:
    report = explore(build(Payments()), schedules=3)

    assert not report.ok  # every run sees the previous runs' charges


def test_a_graph_factory_gives_every_explore_run_a_fresh_fake() -> None:
    made: list[Payments] = []

    def factory() -> Any:
        made.append(Payments())
        return build(made[-1])

    report = explore(factory, schedules=3)

    assert report.ok, str(report)
    assert len(made) == 4  # three seeds and the reproducibility re-run
    assert all(p.charged == [1] for p in made)


@pytest.mark.parametrize("check", [check_determinism, check_interrupt_resume_equivalence],
                         ids=["determinism", "equivalence"])
def test_the_run_comparing_checkers_take_a_graph_factory(check: Any) -> None:
    assert check(build(Payments())) != []  # the shared fake makes runs differ
    assert check(lambda: build(Payments())) == []


def test_crash_recovery_builds_a_graph_per_crash_point() -> None:
    made: list[dict[str, int]] = []

    def factory() -> Any:
        charged: dict[str, int] = {}  # an idempotent fake: one charge per task
        made.append(charged)

        def charge(state: S, ctx: Any) -> dict[str, Any]:
            charged.setdefault(ctx.task_id, 1)
            return {"n": len(charged)}

        g = Graph("pay", S)
        g.node("charge", charge, effect="external")
        g.edge(START, "charge")
        g.edge("charge", END)
        return g.compile()

    assert check_crash_recovery(factory, points=[1, 2]) == []
    assert len(made) == 1 + 2 * 2  # the oracle, then each point in each phase
    assert all(len(m) == 1 for m in made)


def test_a_factory_returning_something_else_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="must return a CompiledGraph"):
        check_determinism(lambda: Graph("g", S))


# --------------------------------------------------------------------------- answer keys


class A(BaseModel):
    answer: str = ""


def ask(state: A) -> dict[str, Any]:
    return {"answer": str(interrupt("refund?", id="approval"))}


def ask_graph() -> Any:
    g = Graph("ask", A)
    g.node("approve", ask)
    g.edge(START, "approve")
    g.edge("approve", END)
    return g.compile()


KEYS = ["approve:approval", "approval", "approve"]


@pytest.mark.parametrize("key", KEYS, ids=["node:id", "interrupt-id", "node"])
def test_resume_accepts_every_answer_key_form(key: str) -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    paused = rt.invoke(ask_graph())
    (task_key,) = paused.interrupts

    done = rt.resume(paused.run_id, Resume(answers={key: "yes"}))

    assert done.data == {"answer": "yes"}
    assert task_key.endswith(":approval")


def test_resume_by_task_key_still_works_and_wins_over_the_node_name() -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    paused = rt.invoke(ask_graph())
    (task_key,) = paused.interrupts

    done = rt.resume(paused.run_id, Resume(answers={task_key: "exact", "approve": "node"}))

    assert done.data == {"answer": "exact"}


@pytest.mark.parametrize(("answers", "match"), [
    ({"nobody": 1}, "not pending: \\['nobody'\\]"),
    ({"approval": 1, "other:q": 2}, "not pending: \\['other:q'\\]"),
], ids=["unknown-only", "unknown-extra"])
def test_resume_refuses_keys_that_match_no_pending_interrupt(answers: Any, match: str) -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    paused = rt.invoke(ask_graph())

    with pytest.raises(ResumeError, match=match):
        rt.resume(paused.run_id, Resume(answers=answers))
    assert rt.invoke(ask_graph()).status == "interrupted"


@pytest.mark.parametrize("key", KEYS, ids=["node:id", "interrupt-id", "node"])
def test_the_checkers_and_explore_accept_the_same_keys(key: str) -> None:
    answers = {key: "yes"}
    assert check_interrupt_resume_equivalence(ask_graph(), answers=answers) == []
    report = explore(ask_graph(), answers=answers, schedules=1)
    assert '"answer": "yes"' in report.baseline.state


# --------------------------------------------------------------------------- pause


class R(BaseModel):
    answer: str = ""
    route: str = ""
    asked_at: str = ""


def clock_route_graph() -> Any:
    """A node that asks, then decides from the clock (decided again on resume)."""

    def ask_(state: R, ctx: Any) -> dict[str, Any]:
        return {"asked_at": ctx.now().isoformat()}

    def decide(state: R, ctx: Any) -> dict[str, Any]:
        answer = interrupt("ok?", id="q")
        waited = ctx.now() - datetime.fromisoformat(state.asked_at)
        return {"answer": str(answer),
                "route": "expired" if waited.total_seconds() > 60 else "approved"}

    g = Graph("clock", R)
    g.node("ask", ask_)
    g.node("decide", decide)
    g.edge(START, "ask")
    g.edge("ask", "decide")
    g.edge("decide", END)
    return g.compile()


def test_a_pause_that_lasts_finds_a_decision_read_from_the_clock() -> None:
    assert check_interrupt_resume_equivalence(clock_route_graph(), answers={"q": "ok"}) == []

    found = check_interrupt_resume_equivalence(clock_route_graph(), answers={"q": "ok"},
                                               pause=3600)

    assert found
    assert "route" in found[0].message
    assert "3600s (1:00:00) each pause" in found[0].message


@pytest.mark.parametrize("pause", [-1, "1h", True], ids=["negative", "str", "bool"])
def test_a_bad_pause_is_refused(pause: Any) -> None:
    with pytest.raises(InvalidArgument, match="pause"):
        check_interrupt_resume_equivalence(clock_route_graph(), pause=pause)


# --------------------------------------------------------------------------- determinism


def sometimes_graph() -> Any:
    """A decision that differs in one run of three (a non-deterministic coin, made
    reproducible for the test by counting runs)."""
    runs = [0]

    def coin(state: R) -> dict[str, Any]:
        runs[0] += 1
        return {"route": "b" if runs[0] % 3 == 0 else "a"}

    g = Graph("coin", R)
    g.node("coin", coin)
    g.edge(START, "coin")
    g.edge("coin", END)
    return g.compile()


def test_determinism_compares_more_than_two_runs_by_default() -> None:
    assert check_determinism(sometimes_graph(), runs=2) == []  # two runs agree: missed

    found = check_determinism(sometimes_graph())

    assert len(found) == 1
    assert "1 of 4 repeated runs" in found[0].message
    assert "route" in found[0].message


def test_determinism_needs_two_runs_at_least() -> None:
    with pytest.raises(InvalidArgument, match="at least 2"):
        check_determinism(sometimes_graph(), runs=1)
