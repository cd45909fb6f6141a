"""Issue 23 (21): an ``UnknownRoute`` says the fix for the kind of route that picked the
target. A branch's targets are its target list (or its mapping's keys), so routing a branch to
an undeclared name points there — not at ``destinations=``, which is the fix only for a node
picking its own target (``Command.goto``, ``Expand``)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Command,
    Expand,
    Graph,
    GraphRuntime,
    UnknownRoute,
    VirtualClock,
)

pytestmark = pytest.mark.anyio


class S(BaseModel):
    n: int = 0


def noop(state: S) -> None:
    return None


def branch_list(g: Graph) -> None:
    g.node("a", noop).branch("a", lambda s: "ghost", ["b"])


def branch_mapping(g: Graph) -> None:
    g.node("a", noop).branch("a", lambda s: "maybe", {"yes": "b"})


def branch_expand(g: Graph) -> None:
    g.node("a", noop).branch("a", lambda s: Expand("ghost", [1]), ["b"])


def command_goto(g: Graph) -> None:
    g.node("a", lambda s: Command(goto="ghost"), destinations=["b"])


def node_expand(g: Graph) -> None:
    g.node("a", lambda s: Expand("ghost", [1]), destinations=["b"])


def command_graph(g: Graph) -> None:
    g.node("a", lambda s: Command(graph="elsewhere"), destinations=["b"])


CASES = [
    ("branch-list", branch_list, "add it to the targets of g.branch('a', ...)"),
    ("branch-mapping", branch_mapping, "add the key to the mapping of g.branch('a', ...)"),
    ("branch-expand", branch_expand, "add it to the targets of g.branch('a', ...)"),
    ("command-goto", command_goto, "g.node('a', ..., destinations=[...])"),
    ("node-expand", node_expand, "g.node('a', ..., destinations=[...])"),
    ("command-graph", command_graph, "graph=Command.PARENT"),
]


@pytest.mark.parametrize(("build", "fix"), [(b, f) for _, b, f in CASES],
                         ids=[name for name, _, _ in CASES])
async def test_an_unknown_route_names_the_fix_of_its_route_kind(build: Any, fix: str) -> None:
    g = Graph("routes", S)
    build(g)
    g.node("ghost", noop).node("b", noop)
    # "ghost" is declared and reachable, but not a target "a" may pick.
    g.edge(START, ["a", "ghost"]).edge("b", END).edge("ghost", END)
    result = await GraphRuntime(clock=VirtualClock(), seed=0).ainvoke(g.compile())
    assert result.status == "failed"
    error = result.error
    cause = error if isinstance(error, UnknownRoute) else error.__cause__  # type: ignore[union-attr]
    assert isinstance(cause, UnknownRoute), repr(error)
    assert fix in str(cause)
    if not build.__name__.startswith(("command", "node")):
        assert "destinations" not in str(cause)


START_CASES = [
    ("declared-node-not-a-target", lambda s: "ghost", ["a"], "targets of g.branch('__start__'"),
    ("undeclared-name", lambda s: "nowhere", ["a"], "targets of g.branch('__start__'"),
    ("key-not-in-mapping", lambda s: "nokey", {"k": "a"}, "mapping of g.branch('__start__'"),
]


@pytest.mark.parametrize(("route", "targets", "fix"), [(r, t, f) for _, r, t, f in START_CASES],
                         ids=[name for name, *_ in START_CASES])
async def test_a_branch_from_start_is_held_to_its_targets(route: Any, targets: Any, fix: str
                                                           ) -> None:
    """A branch from START picking what it may not: before, a declared node outside its
    targets ran silently and an unknown name or key raised a bare ``KeyError``. Now it is an
    ``UnknownRoute`` raised where the edge is evaluated, as a throwing route's error is (C7),
    and the run is recorded as failed."""
    g = Graph("entry", S)
    g.node("a", noop).node("ghost", noop)
    g.branch(START, route, targets)
    g.edge("a", "ghost").edge("ghost", END)
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    with pytest.raises(UnknownRoute) as info:
        await rt.ainvoke(g.compile())
    assert fix in str(info.value)
    assert "destinations" not in str(info.value)
    assert [r.status for r in rt.runs] == ["failed"]
