"""``check_upgrade``: will a paused run survive a change to its graph? The runtime's resume
applies the same rules (one function), so a check that passes means the resume works and a
check that refuses means the resume raises ``SnapshotMismatch`` listing the same problems."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from graphflow_replay_graph import Payments, build, record
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Checkpoint,
    Graph,
    GraphRuntime,
    History,
    Resume,
    SnapshotMismatch,
    VirtualClock,
    check_upgrade,
    interrupt,
)


@pytest.fixture(scope="module")
def paused() -> History:
    history = record(build(Payments()), answer=None)
    assert history.status == "interrupted"
    return history


CHANGES = [
    (None, []),
    ("refactor", []),
    ("route", []),  # decisions already taken are in the checkpoint; replay would diverge
    ("renamed", ["node_removed"]),
    ("key_type", ["key_type"]),
    ("key_removed", ["key_removed"]),
    ("key_added", ["key_added"]),
]


@pytest.mark.parametrize(("change", "kinds"), CHANGES, ids=[str(c[0]) for c in CHANGES])
def test_check_upgrade_lists_every_incompatibility(
    paused: History, change: str | None, kinds: list[str]
) -> None:
    report = check_upgrade(paused, build(Payments(), change))
    assert report.kinds == kinds
    assert report.compatible is (not kinds)
    assert bool(report) is (not kinds)


@pytest.mark.parametrize(("change", "kinds"), CHANGES, ids=[str(c[0]) for c in CHANGES])
def test_the_runtime_resumes_exactly_when_check_upgrade_allows(
    change: str | None, kinds: list[str]
) -> None:
    runtime = GraphRuntime(clock=VirtualClock(), seed=3)
    result = runtime.invoke(build(Payments()), {"amount": 120})
    cp = anyio.run(runtime.store.latest, result.run_id)
    assert isinstance(cp, Checkpoint)
    new = build(Payments(), change)
    report = check_upgrade(cp, new)
    if report.compatible:
        done = runtime.resume(result.run_id, Resume("yes"), graph=new)
        assert done.status == "completed"
        return
    with pytest.raises(SnapshotMismatch) as caught:
        runtime.resume(result.run_id, Resume("yes"), graph=new)
    text = str(caught.value)
    for problem in report.problems:
        assert problem.message in text
    assert list(caught.value.problems) == report.problems
    if new.revision != cp.revision:  # a type change alone keeps the structure's revision
        assert f"written under revision {cp.revision}; the graph is {new.revision}" in text
    # refused: nothing changed, the run still resumes under its own graph
    assert runtime.resume(result.run_id, Resume("yes"), graph=build(Payments())).status \
        == "completed"


def test_a_renamed_paused_node_is_named_with_the_fix(paused: History) -> None:
    report = check_upgrade(paused, build(Payments(), "renamed"))
    (problem,) = report.problems
    assert problem.subject == "review"
    assert "has a pending interrupt in node 'review'" in problem.message
    assert "which the graph no longer has (removed or renamed)" in problem.message
    assert "[node_removed]" in str(report)
    with pytest.raises(SnapshotMismatch, match="node 'review'"):
        report.raise_if_incompatible()


def test_a_pending_interrupts_node_that_changed_effect_class_is_refused(paused: History) -> None:
    # The history carries the recorded graph's effect classes; a bare checkpoint does not,
    # unless the old graph is given.
    report = check_upgrade(paused, build(Payments(), "effect"))
    assert report.kinds == ["effect_changed"]
    assert "node 'review' has a pending interrupt and changed effect class human -> external" \
        in report.problems[0].message
    cp = paused.last_checkpoint()
    assert cp is not None
    assert check_upgrade(cp, build(Payments(), "effect")).compatible
    assert check_upgrade(cp, build(Payments(), "effect"),
                         old_graph=build(Payments())).kinds == ["effect_changed"]


class N(BaseModel):
    n: int = 0


def _halted(*, external: bool, extra_source: bool, pure_now: bool = False) -> Any:
    """a -> [e, c1]; c1 -> c2 (asks); join [e, c2] -> d. The run pauses in c2 with e arrived at
    the join; with ``external`` the halted batch is [e, ask] instead (e completed, replayed)."""
    g = Graph("halts", N)
    g.node("a", lambda s: None)
    g.node("e", lambda s: {"n": 1}, effect="pure" if pure_now else "external")
    if external:
        g.node("ask", lambda s: {"n": interrupt("?", id="q")}, effect="human")
        g.node("d", lambda s: None)
        g.edge(START, "a")
        g.edge("a", ["e", "ask"])
        g.edge(["e", "ask"], "d")
    else:
        g.node("c1", lambda s: None)
        g.node("c2", lambda s: {"n": interrupt("?", id="q")}, effect="human")
        g.node("d", lambda s: None)
        if extra_source:
            g.node("x", lambda s: None)
            g.edge("a", "x")
        g.edge(START, "a")
        g.edge("a", ["e", "c1"])
        g.edge("c1", "c2")
        g.edge(["e", "c2", "x"] if extra_source else ["e", "c2"], "d")
    g.edge("d", END)
    return g.compile()


def _pause(graph: Any) -> Checkpoint:
    runtime = GraphRuntime(clock=VirtualClock(), seed=1)
    result = runtime.invoke(graph, {})
    assert result.status == "interrupted"
    cp = anyio.run(runtime.store.latest, result.run_id)
    assert cp is not None
    return cp


def test_a_join_the_run_waits_at_that_changed_its_inputs_is_refused() -> None:
    cp = _pause(_halted(external=False, extra_source=False))
    assert cp.arrivals == {"e+c2->d": ["e"]}
    report = check_upgrade(cp, _halted(external=False, extra_source=True))
    assert report.kinds == ["join_changed"]
    assert "waits at join e+c2->d (['e'] arrived); the join's inputs changed (the graph's " \
        "joins into 'd': ['e+c2+x->d'])" in report.problems[0].message


def test_a_replayed_node_that_became_pure_would_run_twice_and_is_refused() -> None:
    old = _halted(external=True, extra_source=False)
    cp = _pause(old)
    assert [o.node for o in cp.completed.values()] == ["e"]
    new = _halted(external=True, extra_source=False, pure_now=True)
    report = check_upgrade(cp, new, old_graph=old)
    assert report.kinds == ["effect_changed"]
    assert "completed in the halted step as external and is now pure" in \
        report.problems[0].message
    assert check_upgrade(cp, old, old_graph=old).compatible
