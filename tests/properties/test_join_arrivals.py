"""Issue 14: "a store that loses arrivals ... passes, and a resumed generated run that then ends
with JoinStarved is not flagged by check_invariants."

A join's arrivals are part of the run's position (SPEC C8: "resume by run id continues from the
last checkpoint the store saved"; §5: a checkpoint holds "what resuming needs"). A resume that
loses them ends in ``JoinStarved`` naming a source the log shows arriving: ``check_invariants``
now reports it (C8). Twins: the same run on a correct store, and a run that starves
legitimately (the source never arrives), report nothing.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Graph,
    GraphRuntime,
    InMemoryCheckpointStore,
    Resume,
    VirtualClock,
    interrupt,
)
from pytest_graphflow._properties.runs._drive import drive
from pytest_graphflow._records._checkpoint import Checkpoint
from pytest_graphflow.invariants import check_invariants
from pytest_graphflow.strategies import GraphSpec, JoinSpec, SpecNode


class LosesArrivals(InMemoryCheckpointStore):
    """Saves every field of a checkpoint but ``arrivals`` (the runtime's commits too)."""

    def _adopt(self, checkpoint: Any) -> None:
        if isinstance(checkpoint, Checkpoint):
            checkpoint = checkpoint.model_copy(update={"arrivals": {}})
        else:  # the runtime's draft: its fields
            checkpoint.fields["arrivals"] = {}
        super()._adopt(checkpoint)


class S(BaseModel):
    n: int = 0


def _join_after_a_pause() -> Any:
    """a arrives at join d in step 0; c asks, then goes to d (answer True) or ends (False)."""

    def ask(state: S) -> Any:
        return {"n": 2} if interrupt("go on?", id="q") else {"n": 3}

    g = Graph("join", S)
    g.node("a", lambda s: {"n": 1})
    g.node("b", lambda s: None)
    g.node("c", ask)
    g.node("x", lambda s: None)
    g.node("d", lambda s: None)
    g.edge(START, ["a", "b"])
    g.edge("b", "c")
    g.branch("c", lambda s: "x" if s.n == 2 else "end", {"x": "x", "end": END})
    g.edge(["a", "x"], "d")
    g.edge("d", END)
    return g.compile()


def _paused_and_resumed(store: InMemoryCheckpointStore, answer: bool) -> tuple[Any, list[Any]]:
    rt = GraphRuntime(store=store, clock=VirtualClock(patch_wall_clock=False), seed=0)
    graph = _join_after_a_pause()
    first = rt.trace(graph, {})
    assert first.result.status == "interrupted"
    second = rt.resume_trace(first.result.run_id, Resume(answer))
    return second.result, [*first.events, *second.events]


def test_a_resume_that_lost_the_joins_arrivals_is_flagged() -> None:
    result, events = _paused_and_resumed(LosesArrivals(), True)
    assert type(result.error).__name__ == "JoinStarved"
    violations = check_invariants(events, graph=_join_after_a_pause())
    assert [v.rule for v in violations] == ["C8"], violations
    message = violations[0].message
    assert "join 'd' waits for 'a', but a arrived at #" in message
    assert "(edge_transition a -> d) in leg 1" in message
    assert "the resume lost the join's arrivals" in message
    assert events[violations[0].index].type == "error"


def test_the_same_run_on_a_correct_store_completes_and_passes() -> None:
    result, events = _paused_and_resumed(InMemoryCheckpointStore(), True)
    assert result.status == "completed"
    assert check_invariants(events, graph=_join_after_a_pause()) == []


def test_a_join_that_starves_legitimately_after_a_resume_is_not_flagged() -> None:
    """c routes to END, so x never arrives: JoinStarved names x, which the log never shows
    arriving (a's arrival, kept by the store, is not missing)."""
    result, events = _paused_and_resumed(InMemoryCheckpointStore(), False)
    assert type(result.error).__name__ == "JoinStarved"
    assert result.error.missing == ["x"]
    assert check_invariants(events, graph=_join_after_a_pause()) == []


def test_a_completed_run_that_skipped_a_join_whose_sources_arrived_is_flagged() -> None:
    """With the graph, a completed run must have run every join its sources reached: the
    correct run's log without the join's events (what a runtime that lost every arrival,
    and so never noticed the join, would log)."""
    graph = _join_after_a_pause()
    _, events = _paused_and_resumed(InMemoryCheckpointStore(), True)
    skipped = [e for e in events if e.node != "d"]
    violations = check_invariants(skipped, graph=graph)
    assert [v.rule for v in violations] == ["C8"], violations
    assert "the run completed, but join 'd' never ran after its sources arrived (a at #4, " \
        "x at #" in violations[0].message
    assert skipped[violations[0].index].type == "run_end"
    assert check_invariants(skipped) == []  # which edges are joins needs the graph


def _drive_on(store: InMemoryCheckpointStore, spec: GraphSpec) -> Any:
    async def main() -> Any:
        rt = GraphRuntime(store=store, clock=VirtualClock(patch_wall_clock=False), seed=0)
        return await drive(rt, spec.compile(), {"x": 0}, {})

    return anyio.run(main)


JOIN_AFTER_PAUSE = GraphSpec(
    nodes=(SpecNode("n0", writes=True), SpecNode("n1", children=("n2",)),
           SpecNode("n2", interrupts=("q0",), writes=True), SpecNode("n3", writes=True)),
    entry=("n0", "n1"),
    joins=(JoinSpec(("n0", "n2"), "n3"),),
)
"""A generated graph's shape: n0 arrives at the join in step 0, n2 pauses in step 1."""


@pytest.mark.parametrize("policy", ["every_step", "on_halt", "never"])
def test_a_resumed_generated_run_that_ends_in_join_starved_is_flagged(policy: str) -> None:
    """The issue's case: a generated graph, paused and resumed by run id over a store that
    loses ``arrivals``, ends in JoinStarved; ``check_invariants`` says why."""
    spec = replace(JOIN_AFTER_PAUSE, checkpoint_policy=policy)
    lost = _drive_on(LosesArrivals(), spec)
    assert lost.legs == 2
    assert type(lost.result.error).__name__ == "JoinStarved"
    violations = check_invariants(lost.events, graph=spec.compile())
    assert [v.rule for v in violations] == ["C8"], violations
    assert "join 'n3' waits for 'n0', but n0 arrived at #" in violations[0].message
    kept = _drive_on(InMemoryCheckpointStore(), spec)
    assert kept.result.status == "completed"
    assert check_invariants(kept.events, graph=spec.compile()) == []
