"""The scheduler's baton on asyncio (``_sched._Baton``) against anyio's ``Event``.

A batch's tasks take turns by waiting on an event each; on asyncio the scheduler uses a
``_Baton`` (one waiting task, a future of the loop) instead of ``anyio.Event`` (an
``asyncio.Event`` behind a wrapper). The two must give the same turns: these graphs (many
sleeps, a zero sleep, a child task of a node, a node's own ``move_on_after``, a run
timeout, a claim renewal, a batch that can never wake, sync nodes beside async ones) run
with each, and must yield the same events, byte for byte, and end alike.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from typing import Annotated, Any

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, GraphRuntime, VirtualClock
from pytest_graphflow._time import _sched


class S(BaseModel):
    log: Annotated[list[str], operator.add] = []


def _sleeper(name: str, *delays: float) -> Callable[..., Any]:
    async def node(state: S) -> dict[str, Any]:
        out = []
        for d in delays:
            await anyio.sleep(d)
            out.append(f"{name}@{d}")
        return {"log": out}

    return node


async def _with_child(state: S) -> dict[str, Any]:
    seen: list[str] = []

    async def child() -> None:
        await anyio.sleep(0.5)
        seen.append("child")

    async with anyio.create_task_group() as tg:
        tg.start_soon(child)
        await anyio.sleep(1.0)
        seen.append("parent")
    return {"log": seen}


async def _counts_turns(state: S) -> dict[str, Any]:
    # A child task counts the loop's turns while the node sleeps: the turns each wait of
    # the node takes show in what it writes.
    turns = [0]
    seen: list[str] = []

    async def count() -> None:
        while True:
            turns[0] += 1
            await anyio.sleep(0)

    async with anyio.create_task_group() as tg:
        tg.start_soon(count)
        for d in (0.0, 1.0, 0.0, 0.5):
            await anyio.sleep(d)
            seen.append(f"{d}:{turns[0]}")
        tg.cancel_scope.cancel()
    return {"log": seen}


async def _moves_on(state: S) -> dict[str, Any]:
    with anyio.move_on_after(1.5):
        await anyio.sleep(10.0)
    return {"log": ["moved on"]}


async def _forever(state: S) -> dict[str, Any]:
    await anyio.Event().wait()
    return {}


def _graph(name: str, nodes: dict[str, Callable[..., Any]]) -> Any:
    g = Graph(name, S)
    for n, fn in nodes.items():
        g.node(n, fn)
    g.node("join", lambda s: {"log": ["join"]})
    g.edge(START, list(nodes))
    g.edge(list(nodes) if len(nodes) > 1 else next(iter(nodes)), "join")
    g.edge("join", END)
    return g.compile()


GRAPHS: dict[str, tuple[Any, dict[str, Any]]] = {
    "lone": (_graph("lone", {"a": _sleeper("a", 1.0, 0.0, 2.0)}), {}),
    "three": (_graph("three", {"a": _sleeper("a", 1.0, 1.0), "b": _sleeper("b", 0.0, 2.0),
                               "c": _sleeper("c", 1.0, 0.5, 0.5)}), {}),
    "with-sync": (_graph("with-sync", {"a": _sleeper("a", 1.0), "s": lambda s: {"log": ["s"]},
                                       "t": lambda s: {"log": ["t"]}}), {}),
    "child-task": (_graph("child-task", {"a": _with_child, "b": _sleeper("b", 0.75)}), {}),
    "turns": (_graph("turns", {"a": _counts_turns, "b": _sleeper("b", 0.0, 0.5, 1.0)}), {}),
    "move-on": (_graph("move-on", {"a": _moves_on, "b": _sleeper("b", 1.0, 1.0)}), {}),
    "timeout": (_graph("timeout", {"a": _sleeper("a", 5.0), "b": _sleeper("b", 1.0)}),
                {"timeout": 2.0}),
    "renewal": (_graph("renewal", {"a": _sleeper("a", 100.0), "b": _sleeper("b", 30.0)}), {}),
    "stall": (_graph("stall", {"a": _forever, "b": _sleeper("b", 1.0)}), {}),
}


async def _reference_take_turn(ev: Any) -> None:
    """``_take_turn`` as it was over ``anyio.Event``."""
    if ev.is_set():
        import asyncio

        loop: Any = asyncio.get_running_loop()
        if not loop._ready and (not loop._scheduled or loop._scheduled[0]._when > loop.time()):
            await _sched._checkpoint_if_cancelled()
            return
    await ev.wait()


@pytest.fixture
def anyio_events() -> Iterator[None]:
    """The scheduler on asyncio with ``anyio.Event`` batons, as before ``_Baton``."""
    _run("lone", 0)  # the asyncio backend's makers found
    kinds = _sched._BACKENDS["asyncio"]
    _sched._BACKENDS["asyncio"] = kinds._replace(event=type(anyio.Event()),
                                                 take_turn=_reference_take_turn)
    try:
        yield
    finally:
        _sched._BACKENDS["asyncio"] = kinds


def _run(name: str, seed: int) -> tuple[list[str], str, Any]:
    graph, opts = GRAPHS[name]
    rt = GraphRuntime(clock=VirtualClock(), seed=seed, **opts)
    traced = rt.trace(graph, {})
    return ([e.model_dump_json() for e in traced.events], traced.result.status,
            traced.result.data)


@pytest.mark.parametrize("seed", [0, 1, 7])
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_the_baton_takes_the_turns_anyio_events_took(name: str, seed: int,
                                                     request: pytest.FixtureRequest) -> None:
    lean = _run(name, seed)
    assert _sched._BACKENDS["asyncio"].event is _sched._Baton
    request.getfixturevalue("anyio_events")
    assert _sched._BACKENDS["asyncio"].event is not _sched._Baton
    assert _run(name, seed) == lean
    if name == "timeout":
        assert lean[1] == "failed"
    elif name == "stall":
        assert lean[1] == "failed"
        assert "wait forever" in "".join(lean[0])
    else:
        assert lean[1] == "completed"
