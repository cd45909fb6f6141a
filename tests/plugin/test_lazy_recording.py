"""The testing runtime records ``invoke``/``resume`` runs lazily (issue 29): the events a
recording holds are built only when read, and read they are the very events the eager path
(``trace``, ``stream``) builds for the same graph, input and seed, byte for byte; a failing
test's report shows them the same way."""

from __future__ import annotations

import itertools
import operator
import re
from typing import Annotated, Any

import pytest
from graphflow_plugin_helpers import Run, dedent
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    CompiledGraph,
    FaultyStore,
    Graph,
    GraphRuntime,
    InMemoryCheckpointStore,
    InvalidArgument,
    Reducer,
    Resume,
    Retry,
    VirtualClock,
    emit,
    interrupt,
)
from pytest_graphflow.testing import make_graph_runtime


class State(BaseModel):
    n: int = 0
    log: Annotated[list[str], Reducer(operator.add)] = []


def approval() -> CompiledGraph:
    g = Graph("approval_lazy", State)
    g.node("draft", lambda s: {"n": s.n + 1, "log": ["draft"]})
    g.node("approve", lambda s: {"log": [str(interrupt({"draft": s.n}, id="ok"))]})
    g.node("publish", lambda s: {"n": s.n + 10})
    g.edge(START, "draft").edge("draft", "approve").edge("approve", "publish")
    g.edge("publish", END)
    return g.compile()


def busy() -> CompiledGraph:
    """Fan-out, a join, custom events, a retried node and an error routed to a handler."""
    attempts: dict[str, int] = {}

    def flaky(s: State) -> dict[str, Any]:
        attempts["n"] = attempts.get("n", 0) + 1
        if attempts["n"] % 2:
            raise ValueError("first try fails")
        return {"log": ["flaky"]}

    def chatty(s: State) -> dict[str, Any]:
        emit({"said": s.n}, channel="notes")
        return {"log": ["chatty"]}

    def broken(s: State) -> dict[str, Any]:
        raise RuntimeError("routed away")

    g = Graph("busy_lazy", State)
    g.node("plan", lambda s: {"log": ["plan"]})
    g.node("flaky", flaky, retry=Retry(attempts=2, backoff=0))
    g.node("chatty", chatty)
    g.node("broken", broken, on_error="handler")
    g.node("handler", lambda s: {"log": ["handled"]})
    g.node("join", lambda s: {"n": len(s.log)})
    g.edge(START, "plan").edge("plan", ["flaky", "chatty", "broken"])
    g.edge(["flaky", "chatty"], "join").edge("join", END).edge("handler", END)
    return g.compile(checkpoint_policy="every_step")


def looping(policy: Any = "on_halt") -> Any:
    """A chain the lean step takes: a node that writes, a node that writes nothing, a route
    back, an interrupt on the way out."""

    def make() -> CompiledGraph:
        def slow(s: State) -> dict[str, Any]:
            return {"n": s.n + 1}

        g = Graph(f"looping_{policy}", State)
        g.node("slow", slow)
        g.node("quiet", lambda s: None)
        g.node("ask", lambda s: {"log": [str(interrupt("more?", id="more"))]})
        g.edge(START, "slow").edge("slow", "quiet")
        g.branch("quiet", lambda s: "slow" if s.n < 3 else "ask", ["slow", "ask"])
        g.edge("ask", END)
        return g.compile(checkpoint_policy=policy)

    make.__name__ = f"looping_{policy}"
    return make


def asking() -> CompiledGraph:
    """A node that emits, fails once (retried), then asks: a lone asking task with events of
    its own before the interrupt (the recording pause builds them as ``halt`` does)."""
    tries: dict[str, int] = {}

    def ask(s: State) -> dict[str, Any]:
        emit({"try": tries.get("n", 0)}, channel="notes")
        tries["n"] = tries.get("n", 0) + 1
        if tries["n"] == 1:
            raise ValueError("first try fails")
        return {"log": [str(interrupt({"n": s.n}, id="go"))]}

    g = Graph("asking_lazy", State)
    g.node("start", lambda s: {"n": s.n + 1})
    g.node("ask", ask, retry=Retry(attempts=2, backoff=0))
    g.edge(START, "start").edge("start", "ask").edge("ask", END)
    return g.compile()


def _lines(legs: list[Any]) -> list[str]:
    return [e.model_dump_json() for leg in legs for e in leg.events]


@pytest.mark.parametrize("make", [approval, busy, asking, looping(), looping("every_step"),
                                  looping("never")])
@pytest.mark.parametrize("seed", [0, 7])
def test_lazy_recordings_are_the_events_the_eager_path_builds(make: Any, seed: int) -> None:
    graph = make()
    lazy = make_graph_runtime(seed=seed)
    paused = lazy.invoke(graph, {"n": 1})
    if paused.status == "interrupted":
        lazy.resume(paused.run_id, Resume("yes"))
    eager = make_graph_runtime(seed=seed)
    trace = eager.trace(make(), {"n": 1})
    if trace.status == "interrupted":
        eager.resume_trace(trace.result.run_id, Resume("yes"))
    assert [leg.status for leg in lazy.recordings] == [leg.status for leg in eager.recordings]
    assert _lines(lazy.recordings) == _lines(eager.recordings)
    assert [leg.events for leg in lazy.recordings] == [leg.events for leg in eager.recordings]
    assert [leg.visited for leg in lazy.recordings] == [leg.visited
                                                        for leg in eager.recordings]
    # the store's call log reads the same whichever way the events were recorded
    assert lazy.store.calls == eager.store.calls  # type: ignore[attr-defined]


@pytest.mark.parametrize("nth", [1, 2, 3])
@pytest.mark.parametrize("kind", ["reject", "crash"])
def test_a_recording_pause_whose_save_fails_records_what_the_eager_path_does(
        nth: int, kind: str) -> None:
    """``invoke`` pausing on a recording runtime (``pause_one``, events unbuilt) and
    ``trace`` (``halt``, events built) when the store refuses a save, the pause's (3rd)
    included: the same error, recorded events, visited nodes and store calls."""
    seen = []
    for way in ("invoke", "trace"):
        runtime = make_graph_runtime(seed=2)
        faults = runtime.store_faults
        assert faults is not None
        if kind == "reject":
            faults.reject_save(nth=nth)
        else:
            faults.crash_at("save", nth=nth)
        try:
            getattr(runtime, way)(approval(), {"n": 1})
        except BaseException as exc:  # a StoreFault, a SimulatedCrash
            outcome = repr(exc)
        else:
            outcome = "returned"
        seen.append((outcome, _lines(runtime.recordings),
                     [(leg.visited, repr(leg.error)) for leg in runtime.recordings],
                     [str(call) for call in faults.calls]))
    assert seen[0] == seen[1]
    assert seen[0][0] != "returned"


class Plain(BaseModel):
    n: int = 0
    log: Annotated[list[str], Reducer(operator.add)] = []


def _chain(tail: str) -> CompiledGraph:
    """Four plain steps (a recording leg runs them in one piece), then ``tail``: a step
    that leaves the lean path (a reducer), an error no edge handles, or more plain steps."""
    def boom(s: Plain) -> dict[str, Any]:
        raise RuntimeError("boom")

    g = Graph(f"plain_chain_{tail}", Plain)
    names = ["a", "b", "c", "d"]
    for name in names:
        g.node(name, lambda s: {"n": s.n + 1})
    if tail == "reducer":
        g.node("e", lambda s: {"log": ["e"]}).node("f", lambda s: {"n": s.n * 2})
        names += ["e", "f"]
    elif tail == "raises":
        g.node("e", boom)
        names += ["e"]
    else:
        g.node("e", lambda s: {"n": s.n + 5})
        names += ["e"]
    g.edge(START, names[0])
    for src, dst in itertools.pairwise(names):
        g.edge(src, dst)
    return g.edge(names[-1], END).compile(checkpoint_policy="every_step")


FAULTS: dict[str, Any] = {
    "none": None,
    "reject_third_save": lambda store: store.reject_save(nth=3),
    "crash_third_save": lambda store: store.crash_at("save", nth=3),
    "crash_after_fourth_save": lambda store: store.crash_at("save", nth=4, phase="after"),
    "fail_release": lambda store: store.fail("release", nth=1),
}


@pytest.mark.parametrize("tail", ["reducer", "raises", "plain"])
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_plain_steps_recorded_in_one_piece_hold_the_events_of_their_pieces(
        tail: str, fault: str) -> None:
    """``invoke`` on a recording runtime runs a leg's plain steps in one piece, their events
    unbuilt: read, they are the events ``trace`` builds step by step — when a later step
    leaves the lean path, when a node or the store raises midway (the steps committed before
    it keep their events), and when the release at the end fails."""
    legs = []
    for way in ("invoke", "trace"):
        runtime = make_graph_runtime(seed=4)
        if FAULTS[fault] is not None:
            FAULTS[fault](runtime.store_faults)
        try:
            getattr(runtime, way)(_chain(tail), {"n": 1})
        except BaseException as exc:  # a StoreFault, a SimulatedCrash
            legs.append(("raised", repr(exc)))
        else:
            legs.append(("returned", ""))
        legs.append(runtime.recordings)
        legs.append(runtime.store.calls)  # type: ignore[attr-defined]
    lazy, eager = legs[:3], legs[3:]
    assert lazy[0] == eager[0]
    assert _lines(lazy[1]) == _lines(eager[1])
    assert [(leg.visited, repr(leg.error)) for leg in lazy[1]] == [
        (leg.visited, repr(leg.error)) for leg in eager[1]]
    assert [str(call) for call in lazy[2]] == [str(call) for call in eager[2]]
    if fault != "none" and tail == "plain":  # the fault hit after some steps committed
        assert sum(e.type == "checkpoint_saved" for e in lazy[1][0].events) > 0


def test_a_recording_read_mid_run_then_later_holds_every_event() -> None:
    runtime = make_graph_runtime(seed=3)
    paused = runtime.invoke(approval(), {"n": 2})
    first = runtime.last_recording
    assert first is not None
    assert [e.type for e in first.events][-2:] == ["checkpoint_saved", "run_end"]
    runtime.resume(paused.run_id, Resume("ok"))
    second = runtime.last_recording
    assert second is not None
    assert second is not first
    assert second.events[0].type == "run_start"
    assert second.events[-1].status == "completed"
    assert second.visited == ["draft", "approve", "publish"]
    assert "unbuilt" not in repr(second)


def test_a_plain_runtime_with_an_observer_records_lazily_too() -> None:
    """``GraphRuntime(on_leg=...)``: ``invoke`` builds no events until the leg is read."""
    legs: list[Any] = []
    runtime = GraphRuntime(clock=VirtualClock(), seed=5, on_leg=legs.append)
    runtime.invoke(busy(), {"n": 1})
    eager: list[Any] = []
    GraphRuntime(clock=VirtualClock(), seed=5, on_leg=eager.append).trace(busy(), {"n": 1})
    assert any(e.type == "custom" for e in legs[0].events)
    assert _lines(legs) == _lines(eager)


def test_a_checked_faulty_store_class_still_refuses_an_incomplete_instance() -> None:
    """``check_store`` keeps its verdict per inner store class, not for an instance that
    hides a method its features need."""
    clock = VirtualClock()
    GraphRuntime(FaultyStore(InMemoryCheckpointStore(), clock=clock), clock=clock)
    broken = InMemoryCheckpointStore()
    broken.claim = None  # type: ignore[assignment,method-assign]
    with pytest.raises(InvalidArgument, match="has no claim"):
        GraphRuntime(FaultyStore(broken, clock=clock), clock=clock)


REPORTED = dedent("""
    import pytest
    from gf_graphs import fan
    from pytest_graphflow import Resume

    @pytest.mark.graphflow(seed=11)
    def test_invoked(graph_runtime):
        graph_runtime.invoke(fan(), {"n": 1})
        assert False, "look at the report"

    @pytest.mark.graphflow(seed=11)
    def test_streamed(graph_runtime):
        graph_runtime.trace(fan(), {"n": 1})
        assert False, "look at the report"
""")

SECTION = re.compile(r"^-+ graphflow -+$", re.MULTILINE)


def _sections(text: str) -> list[list[str]]:
    lines = text.splitlines()
    found = []
    for start, line in enumerate(lines):
        if SECTION.match(line):
            end = next((i for i in range(start + 1, len(lines))
                        if lines[i].startswith(("___", "===", "---"))), len(lines))
            found.append([x for x in lines[start + 1:end]
                          if not x.startswith("reproduce:")])
    return found


def test_a_failing_test_that_invoked_reports_the_events_a_trace_would(
        graph_project: pytest.Pytester, run: Run) -> None:
    graph_project.makepyfile(test_lazy_report=REPORTED)
    result = run("--graphflow-report=full", "test_lazy_report.py")
    result.assert_outcomes(failed=2)
    invoked, streamed = _sections(result.stdout.str())
    assert any("node_end" in line for line in invoked)
    assert any("run_end completed" in line for line in invoked)
    assert invoked == streamed


def test_cancel_at_on_a_recording_leg_stops_after_the_step_that_matched() -> None:
    """``cancel_at`` tests a piece's events before the next step starts: a recording leg's
    plain steps stay one a piece under it, and the leg stops where ``trace``'s does."""
    ran = []
    for way in ("invoke", "trace"):
        runtime = make_graph_runtime(seed=2)
        out = getattr(runtime, way)(_chain("plain"), {"n": 1},
                                    cancel_at={"type": "node_end", "node": "b"})
        status = out.status if way == "invoke" else out.result.status
        ran.append((status, runtime.recordings[0].visited, _lines(runtime.recordings)))
    assert ran[0] == ran[1]
    assert ran[0][:2] == ("cancelled", ["a", "b"])
