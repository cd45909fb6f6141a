"""Running a graph one superstep at a time: ``CompiledGraph.step`` / ``GraphRuntime.step``
(seed 004 names ``CompiledGraph.step``)."""

from __future__ import annotations

import operator
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Breakpoint,
    Graph,
    GraphRuntime,
    InvalidArgument,
    Reducer,
    Resume,
    VirtualClock,
    interrupt,
)


class S(BaseModel):
    log: Annotated[list[str], Reducer(operator.add)] = []


def build() -> Any:
    g = Graph("steps", S)
    g.node("plan", lambda s: {"log": ["plan"]})
    g.node("a", lambda s: {"log": ["a"]}).node("b", lambda s: {"log": ["b"]})
    g.node("ask", lambda s: {"log": [interrupt("ok?", id="ok")]}, effect="human")
    g.edge(START, "plan").edge("plan", ["a", "b"]).edge(["a", "b"], "ask").edge("ask", END)
    return g.compile()


def test_each_call_runs_one_superstep() -> None:
    graph = build()
    rt = GraphRuntime(clock=VirtualClock(), seed=2)
    seen = []
    result = graph.step(rt, {})
    while result.breakpoint is not None:
        seen.append((result.step, result.breakpoint, list(result.data["log"])))
        result = graph.step(rt, run_id=result.run_id)
    assert seen == [
        (0, Breakpoint(when="after", nodes=["plan"]), ["plan"]),
        (1, Breakpoint(when="after", nodes=["a", "b"]), ["plan", "a", "b"]),
    ]
    # the third superstep pauses at the interrupt: answer it through step
    assert result.status == "interrupted"
    assert result.interrupts
    done = graph.step(rt, run_id=result.run_id, resume=Resume("yes"))
    assert done.status == "completed"
    assert done.data["log"] == ["plan", "a", "b", "yes"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"resume": Resume("x")}, "needs the run_id"),
        ({"run_id": "run-x", "input": {"log": []}}, "pass no input"),
    ],
    ids=["resume-without-run", "input-with-run"],
)
def test_step_arguments_are_checked(kwargs: dict[str, Any], match: str) -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=2)
    with pytest.raises(InvalidArgument, match=match):
        rt.step(build(), **kwargs)
