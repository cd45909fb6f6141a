"""Issue 29: the lean loop sets ``ENTROPY`` once a loop, not once a step.

``ENTROPY`` held each step's own ``NodeContext``, set with ``CURRENT_TASK`` at every step (a
context variable's set is a new context mapping and a token: ~1.7 k machine instructions
of a ~40 k chain step). The loop now sets it once to a ``_StepEntropy`` whose stream is
the one of the task in ``CURRENT_TASK`` (set each step anyway); a step whose node has
routes still holds its own context there (its edge functions run with ``CURRENT_TASK``
unset). What node code draws must not move: its ``uuid``/``random`` draws in the node, in
its edge functions, in a context it copies and runs later (``loop.call_soon`` runs after
the loop's later steps), in a thread started with a copy of its context, and in a runtime
without a seed run inside it, are those of a traced run (the general path, which sets
``ENTROPY`` to each task's context).
"""

from __future__ import annotations

import asyncio
import contextvars
import random
import threading
import uuid
from typing import Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import END, START, CompiledGraph, Graph, GraphRuntime, VirtualClock
from pytest_graphflow._engine import _batch, _lean
from pytest_graphflow._time._entropy import ENTROPY

Seen = list[tuple[Any, ...]]


class S(BaseModel):
    n: int = 0


def _draws() -> tuple[Any, ...]:
    """What node code draws of the owned entropy, one of each kind."""
    return (str(uuid.uuid4()), str(uuid.uuid1()), random.random(), random.randint(0, 10**9),
            random.Random().random(), random.gauss(0.0, 1.0))


def _node(name: str, seen: Seen, later: Seen, writes: bool = True) -> Any:
    def node(s: S, ctx: Any) -> dict[str, Any]:
        seen.append((name, "node", *_draws()))
        # run after this node returns (the lean loop runs its later steps first)
        asyncio.get_running_loop().call_soon(lambda: later.append((name, "soon", *_draws())))
        copied = contextvars.copy_context()
        later.append((name, "copied-now", *copied.run(_draws)))
        out: list[Any] = []
        worker = threading.Thread(target=lambda: out.append(copied.run(_draws)))
        worker.start()
        worker.join()
        seen.append((name, "thread", *out[0]))
        return {"n": s.n + 1} if writes else {}
    return node


def _route(to: str, seen: Seen | None = None) -> Any:
    def route(s: S) -> str:
        if seen is not None:
            seen.append((to, "route", *_draws()))
        return to
    return route


def _graph(seen: Seen, later: Seen, routes: bool = False, steps: int = 6) -> CompiledGraph:
    """A chain of ``steps`` checkpointed steps; with ``routes`` every third node routes to
    the next through an edge function that draws too."""
    g = Graph("entropy_chain", S)
    prev = START
    for i in range(steps):
        name = f"n{i}"
        g.node(name, _node(name, seen, later))
        if prev != START and routes and (i - 1) % 3 == 0:
            g.branch(prev, _route(name, seen), [name])
        else:
            g.edge(prev, name)
        prev = name
    g.edge(prev, END)
    return g.compile(checkpoint_policy="every_step")


def _run(graph_of: Any, traced: bool) -> tuple[Any, Seen, Seen]:
    seen: Seen = []
    later: Seen = []
    runtime = GraphRuntime(clock=VirtualClock(), seed=5)
    graph = graph_of(seen, later)
    result = runtime.trace(graph, {}).result if traced else runtime.invoke(graph, {})
    return result.data, seen, sorted(later, key=repr)


@pytest.mark.parametrize("routes", [False, True])
def test_draws_in_nodes_routes_copies_and_threads_are_the_general_paths(routes: bool) -> None:
    lean = _run(lambda seen, later: _graph(seen, later, routes), traced=False)
    general = _run(lambda seen, later: _graph(seen, later, routes), traced=True)
    assert lean == general
    data, seen, later = lean
    assert data["n"] == 6
    assert len(later) == 12  # each node's call_soon ran, and its copy drew at once
    # every task its own stream: no two tasks drew the same uuid
    assert len({row[2] for row in seen if row[1] == "node"}) == 6
    # a copy run later draws on from where the task's stream was, as the copy run at once
    soon = {row[0]: row[2:] for row in later if row[1] == "soon"}
    now = {row[0]: row[2:] for row in later if row[1] == "copied-now"}
    assert soon.keys() == now.keys()
    assert all(soon[k] != now[k] for k in soon)
    if routes:
        assert [row[0] for row in seen if row[1] == "route"] == ["n1", "n4"]


def _fan(seen: Seen, later: Seen, width: int = 6, routes: bool = True) -> CompiledGraph:
    """``s`` then a batch of ``width`` sync nodes (every third routing to ``z``), then
    ``z``: the batch runs through the lean batch's plain tasks (``_plain_tasks``)."""
    g = Graph("entropy_fan", S)
    g.node("s", _node("s", seen, later)).node("z", _node("z", seen, later))
    names = [f"w{i}" for i in range(width)]
    g.edge(START, "s").edge("s", names)
    for i, name in enumerate(names):
        g.node(name, _node(name, seen, later, writes=False))
        if routes and i % 3 == 1:
            g.branch(name, _route("z", seen), ["z"])
        else:
            g.edge(name, "z")
    return g.edge("z", END).compile(checkpoint_policy="every_step")


def test_a_batchs_draws_are_the_general_paths() -> None:
    """The tasks of a batch of sync nodes: the same draws as a traced run's, in the nodes,
    their routes, their copied contexts (run after the batch) and their threads."""
    lean = _run(_fan, traced=False)
    general = _run(_fan, traced=True)
    assert lean == general
    data, seen, later = lean
    assert data["n"] == 2
    assert len({row[2] for row in seen if row[1] == "node"}) == 8
    assert len([row for row in later if row[1] == "soon"]) == 8
    assert len([row for row in seen if row[1] == "route"]) == 2


def test_a_run_without_a_seed_inside_a_node_draws_from_the_nodes_stream() -> None:
    """A runtime that does not own entropy, run inside a node of one that does: its tasks
    (another leg's contexts in CURRENT_TASK) draw from the outer task's stream."""
    inner_seen: list[str] = []

    def inner_node(s: S) -> dict[str, Any]:
        inner_seen.append(str(uuid.uuid4()))
        return {"n": s.n + 1}

    inner = Graph("inner", S)
    inner.node("i", inner_node).edge(START, "i").edge("i", END)
    inner_graph = inner.compile()

    def outer_graph(seen: Seen, later: Seen) -> CompiledGraph:
        def outer(s: S) -> dict[str, Any]:
            before = str(uuid.uuid4())
            out: list[Any] = []

            def nested() -> None:  # a fresh loop in a thread, the copied context's
                out.append(GraphRuntime(clock=VirtualClock()).invoke(inner_graph, {}))

            worker = threading.Thread(target=contextvars.copy_context().run, args=(nested,))
            worker.start()
            worker.join()
            seen.append(("o", before, inner_seen[-1], str(uuid.uuid4())))
            return {"n": s.n + out[0].data["n"]}

        g = Graph("outer", S)
        g.node("a", lambda s: {"n": s.n + 1}).node("o", outer)
        g.edge(START, "a").edge("a", "o").edge("o", END)
        return g.compile(checkpoint_policy="every_step")

    lean = _run(outer_graph, traced=False)
    general = _run(outer_graph, traced=True)
    assert lean == general
    assert lean[0]["n"] == 2
    (row,) = lean[1]
    assert len(set(row[1:])) == 3  # the inner task drew the outer stream's next value


class _CountingVar:
    """``ENTROPY`` as the lean loop sees it, its sets counted."""

    def __init__(self) -> None:
        self.sets = 0

    def set(self, value: Any) -> Any:
        self.sets += 1
        return ENTROPY.set(value)

    def reset(self, token: Any) -> None:
        ENTROPY.reset(token)

    def get(self) -> Any:
        return ENTROPY.get()


@pytest.mark.parametrize(("routes", "sets"), [(False, 1), (True, 15)])
def test_entropy_is_set_once_a_loop(routes: bool, sets: int,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A 24-step chain sets ``ENTROPY`` once (24 times before this pass); with a route
    into every third node (7 steps whose node routes), twice more for each such step (its
    own context, then the loop's source again for the step after): 1 + 2 × 7."""
    counting = _CountingVar()
    monkeypatch.setattr(_lean, "ENTROPY", counting)

    def plain_graph(seen: Seen, later: Seen) -> CompiledGraph:
        g = Graph("plain_entropy_chain", S)
        prev = START
        for i in range(24):
            name = f"n{i}"
            g.node(name, lambda s: {"n": s.n + 1})
            if routes and prev != START and i % 3 == 0:
                g.branch(prev, _route(name), [name])
            else:
                g.edge(prev, name)
            prev = name
        return g.edge(prev, END).compile(checkpoint_policy="every_step")

    data, _, _ = _run(plain_graph, traced=False)
    assert data["n"] == 24
    assert counting.sets == sets


def test_entropy_is_set_once_a_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch of 30 plain sync tasks sets ``ENTROPY`` once (30 times before this pass),
    plus once for each of the two steps around it (``s``, then ``z``: a lean loop each)."""
    counting = _CountingVar()
    monkeypatch.setattr(_lean, "ENTROPY", counting)
    monkeypatch.setattr(_batch, "ENTROPY", counting)

    def plain(s: S) -> dict[str, Any]:
        return {}

    def fan_graph(seen: Seen, later: Seen) -> CompiledGraph:
        g = Graph("plain_entropy_fan", S)
        names = [f"w{i}" for i in range(30)]
        g.node("s", plain).node("z", lambda s: {"n": 1})
        g.edge(START, "s").edge("s", names)
        for name in names:
            g.node(name, plain)
        g.edge(names, "z")
        return g.edge("z", END).compile(checkpoint_policy="every_step")

    data, _, _ = _run(fan_graph, traced=False)
    assert data["n"] == 1
    assert counting.sets == 3
