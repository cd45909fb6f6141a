"""``check_interrupt_resume_equivalence`` resumes in fresh runtimes only a run that paused.

A run that ends in one leg has nothing to resume: its fresh-runtime run would repeat the
same-runtime run as it was, so it is not run, and a difference from answering at once is
reported once, for what actually ran. A run that pauses is still resumed both ways.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, interrupt
from pytest_graphflow.invariants import check_interrupt_resume_equivalence


class S(BaseModel):
    v: int = 0


def _graph(asks: bool, calls: list[int]) -> Any:
    def node(state: S) -> dict[str, Any]:
        calls.append(1)
        answer = interrupt("go?", id="q") if asks else 0
        return {"v": len(calls) if answer == "count" else 1}

    g = Graph("legs", S)
    g.node("node", node)
    g.edge(START, "node").edge("node", END)
    return g.compile()


def test_a_run_that_pauses_is_resumed_by_the_same_and_by_fresh_runtimes() -> None:
    calls: list[int] = []
    assert check_interrupt_resume_equivalence(_graph(True, calls), {}, {"node:q": True}) == []
    # Answered at once by the hook (1); paused, then run again from the top when resumed by
    # the same runtime (2); the same, resumed by a fresh runtime (2).
    assert len(calls) == 5


def test_a_run_that_never_pauses_is_not_run_a_third_time() -> None:
    calls: list[int] = []
    assert check_interrupt_resume_equivalence(_graph(False, calls), {}) == []
    assert len(calls) == 2


def test_a_difference_without_a_pause_is_reported_once_for_the_run_that_made_it() -> None:
    calls: list[int] = []

    def counting(state: S) -> dict[str, Any]:
        calls.append(1)
        return {"v": len(calls)}  # not a function of the state: differs from run to run

    g = Graph("counting", S)
    g.node("counting", counting)
    g.edge(START, "counting").edge("counting", END)
    broken = check_interrupt_resume_equivalence(g.compile(), {})
    assert [v.rule for v in broken] == ["equivalence"]
    assert "same-runtime resumes, 1 legs" in broken[0].message
    assert "fresh" not in broken[0].message


def test_a_generated_graph_that_pauses_more_than_fifty_times_is_resumed_to_its_end() -> None:
    # Nested loops of interrupting nodes (a graph Hypothesis' mutator draws from graphs()):
    # the paused runs take more than 50 legs. Cut short at 50 they would "end" interrupted,
    # unlike answering at once; a GraphSpec's runs always end, so they are driven to the end.
    from pytest_graphflow.strategies import GraphSpec, SpecNode

    def looping(name: str, nxt: str | None, **kw: Any) -> SpecNode:
        return SpecNode(name, route="loop", loop_to="n0", loop_bound=2,
                        children=(nxt,) if nxt else (), **kw)

    asks = {"interrupts": ("q0", "q1")}
    spec = GraphSpec(nodes=(looping("n0", "n1", **asks), looping("n1", "n2"),
                            looping("n2", "n3", **asks), looping("n3", "n4", **asks),
                            looping("n4", None, effect="human", reads=("x",), sleep=1.0,
                                    **asks)),
                     entry=("n0",))
    answers = {"n0:q0": 1, "n0:q1": 3}
    assert check_interrupt_resume_equivalence(spec, {"x": 0}, answers) == []
    capped = check_interrupt_resume_equivalence(spec, {"x": 0}, answers, max_legs=50)
    assert "50 legs" in capped[0].message  # the run needs more legs than that
