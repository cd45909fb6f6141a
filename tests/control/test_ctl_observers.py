"""``GraphRuntime(on_leg=...)`` and ``GraphRuntime(checkpoint_policy=...)``: observing every
leg of every run (what the pytest plugin's failure report is built on), and running graphs
under another checkpoint policy."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    FaultyStore,
    Graph,
    GraphRuntime,
    InMemoryCheckpointStore,
    InvalidArgument,
    Resume,
    RunLeg,
    StoreFault,
    VirtualClock,
    interrupt,
)


class S(BaseModel):
    n: int = 0
    answer: str = ""


def ask(state: S) -> dict[str, object]:
    return {"answer": interrupt("ok?", id="q")}


def graph() -> object:
    g = Graph("observed", S)
    g.node("inc", lambda s: {"n": s.n + 1})
    g.node("ask", ask, effect="human")
    g.edge(START, "inc")
    g.edge("inc", "ask")
    g.edge("ask", END)
    return g.compile()


def test_every_leg_is_observed_with_its_events_also_for_invoke() -> None:
    legs: list[RunLeg] = []
    runtime = GraphRuntime(clock=VirtualClock(), seed=1, on_leg=legs.append)
    g = graph()

    paused = runtime.invoke(g, {})
    done = runtime.resume(paused.run_id, Resume("yes"))

    assert [(leg.run_id, leg.resumed, leg.status) for leg in legs] == [
        (paused.run_id, False, "interrupted"), (done.run_id, True, "completed")]
    assert [e.type for e in legs[0].events][-3:] == ["interrupt", "checkpoint_saved", "run_end"]
    assert legs[1].events[0].type == "run_start"
    assert legs[1].visited == ["inc", "ask"]
    assert legs[0].path_text() == "START -> inc -> ask"  # paused before ask's edges
    assert legs[1].path_text() == "ask -> END"  # the resumed leg's own path


def test_a_leg_that_raises_keeps_the_error() -> None:
    legs: list[RunLeg] = []
    store = FaultyStore(InMemoryCheckpointStore()).reject_save(nth=2, error=StoreFault("full"))
    runtime = GraphRuntime(store, clock=VirtualClock(), seed=1, on_leg=legs.append)

    with pytest.raises(StoreFault, match="full"):
        runtime.invoke(graph(), {})

    assert isinstance(legs[0].error, StoreFault)
    assert legs[0].status == "raised"


def test_checkpoint_policy_overrides_the_graphs_own() -> None:
    g = graph()
    quiet = GraphRuntime(clock=VirtualClock(), seed=1, checkpoint_policy="on_halt")
    noisy = GraphRuntime(clock=VirtualClock(), seed=1)

    saved_quiet = quiet.trace(g, {}).events.of_type("checkpoint_saved")
    saved_noisy = noisy.trace(g, {}).events.of_type("checkpoint_saved")

    assert len(saved_quiet) == 1  # only the halt's checkpoint
    assert len(saved_noisy) == 3  # input, after `inc`, and the halt's
    assert g.checkpoint_policy == "every_step"  # the graph itself is unchanged


def test_an_unknown_checkpoint_policy_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="checkpoint_policy"):
        GraphRuntime(checkpoint_policy="sometimes")  # type: ignore[arg-type]
