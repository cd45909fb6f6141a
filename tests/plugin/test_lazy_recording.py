"""The testing runtime records ``invoke``/``resume`` runs lazily (issue 29): the events a
recording holds are built only when read, and read they are the very events the eager path
(``trace``, ``stream``) builds for the same graph, input and seed, byte for byte; a failing
test's report shows them the same way."""

from __future__ import annotations

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


def _lines(legs: list[Any]) -> list[str]:
    return [e.model_dump_json() for leg in legs for e in leg.events]


@pytest.mark.parametrize("make", [approval, busy, looping(), looping("every_step"),
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
