"""SPEC §1 patches and parallel merges (reducers, conflicts, write sets, unknown keys); nodes
get their own copy of the state and events carry copies (seed 001)."""

from __future__ import annotations

import operator
from itertools import permutations
from typing import Annotated, Any

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    ConflictingWrites,
    Graph,
    NodeContext,
    Reducer,
    UndeclaredWrite,
    UnknownKey,
    UpdateRejected,
)

from .conftest import SEEDS, S, Script, chain_graph, collect, of, run, runtime

pytestmark = pytest.mark.anyio


class M(BaseModel):
    items: Annotated[list[str], Reducer(operator.add)] = []
    x: int = 0
    y: int = 0
    plain: list[str] = []
    picky: Annotated[list[str], Reducer(lambda cur, new: _picky(cur, new))] = []


def _picky(current: list[str], update: list[str]) -> list[str]:
    if "bad" in update:
        raise ValueError("no bad items")
    return current + update


def batch_graph(writes: dict[str, Any], *, sleeps: dict[str, float] | None = None,
                write_sets: dict[str, set[str]] | None = None, graph_id: str = "batch") -> Any:
    """``START -> [nodes...] -> END``: the nodes (declared in ``writes`` order) are one batch;
    each returns its entry of ``writes`` after sleeping ``sleeps[node]``."""
    sleeps = sleeps or {}
    write_sets = write_sets or {}
    g = Graph(graph_id, M)

    def make(name: str) -> Any:
        async def node(state: M) -> Any:
            if sleeps.get(name):
                await anyio.sleep(sleeps[name])
            return writes[name]

        return node

    for name in writes:
        g.node(name, make(name), writes=write_sets.get(name))
    g.edge(START, list(writes))
    for name in writes:
        g.edge(name, END)
    return g.compile()


async def test_disjoint_writes_of_a_batch_merge() -> None:
    """SPEC §1 / seed 002: "Parallel branches are merged only when their writes are disjoint or
    use a registered reducer"."""
    _, result = await run(runtime(), batch_graph({"a": {"x": 1}, "b": {"y": 2}, "c": None}))
    assert result.status == "completed"
    assert result.data["x"] == 1
    assert result.data["y"] == 2


async def test_one_key_written_twice_in_a_batch_without_reducer_fails_the_run() -> None:
    """SPEC §1: "two nodes of a batch writing one key is an error unless the key has a
    Reducer" — ``ConflictingWrites`` ends the run (SPEC §6): an ``error`` event, ``run_end``
    ``failed``, a resumable checkpoint, ``GraphResult.error``."""
    rt = runtime()
    events, result = await run(rt, batch_graph({"a": {"x": 1}, "b": {"x": 2}, "c": {"y": 3}}))
    assert result.status == "failed"
    assert isinstance(result.error, ConflictingWrites)
    assert "'x'" in str(result.error)
    assert "a" in result.error.nodes
    assert "b" in result.error.nodes
    (error,) = of(events, "error")
    assert error.error_type == "ConflictingWrites"
    assert events[-1].type == "run_end"
    assert events[-1].status == "failed"
    cp = await rt.store.latest(result.run_id)
    assert cp is not None
    assert cp.status == "failed"
    assert cp.state["x"] == 0
    assert cp.state["y"] == 0
    assert result.data["x"] == 0


@pytest.mark.parametrize("sleeps", list(permutations([1, 2, 3])),
                         ids=lambda p: "-".join(map(str, p)))
@pytest.mark.parametrize("seed", SEEDS[:3])
async def test_reducer_merges_in_declared_order_not_by_name_or_schedule(
    seed: int, sleeps: tuple[int, int, int]
) -> None:
    """SPEC §1: "A parallel batch merges patches in declared node order"; SPEC §7: the seed
    decides the order tasks start and interleave, never the result."""
    names = ("zeta", "alpha", "mid")
    finished: list[str] = []
    g = Graph("order", M)
    for name, secs in zip(names, sleeps, strict=True):
        async def node(state: M, ctx: NodeContext, _secs: int = secs) -> dict[str, Any]:
            await anyio.sleep(_secs)
            finished.append(ctx.node)
            return {"items": [ctx.node]}

        g.node(name, node)
    g.edge(START, list(names)).edge(list(names), END)
    _, result = await run(runtime(seed=seed), g.compile())
    assert result.data["items"] == ["zeta", "alpha", "mid"]
    assert finished == [n for _, n in sorted(zip(sleeps, names, strict=True))]


async def test_a_reducer_that_raises_is_update_rejected() -> None:
    """SPEC §6 / seed 004 UpdateRejected: "A key's update function rejected an update." — the
    run fails; the error names the key and the node; the reducer's error is its cause."""
    rt = runtime()
    events, result = await run(rt, batch_graph({"a": {"picky": ["ok"]}, "b": {"picky": ["bad"]}}))
    assert result.status == "failed"
    assert isinstance(result.error, UpdateRejected)
    assert result.error.key == "picky"
    assert result.error.node == "b"
    assert isinstance(result.error.__cause__, ValueError)
    assert of(events, "error")[0].error_type == "UpdateRejected"
    cp = await rt.store.latest(result.run_id)
    assert cp is not None
    assert cp.state["picky"] == []


async def test_a_write_outside_the_declared_write_set_is_undeclared_write() -> None:
    """SPEC §1 ``writes=`` / seed 004 UndeclaredWrite: "A node emitted an update for a key
    outside its declared write set." """
    graph = batch_graph({"a": {"x": 1, "y": 2}, "b": {"items": ["b"]}},
                        write_sets={"a": {"x"}}, graph_id="writes")
    events, result = await run(runtime(), graph)
    assert result.status == "failed"
    assert isinstance(result.error, UndeclaredWrite)
    assert (result.error.node, result.error.key) == ("a", "y")
    (error,) = of(events, "error")
    assert error.node == "a"
    assert error.error_type == "UndeclaredWrite"
    assert result.data["x"] == 0
    assert result.data["items"] == []


async def test_a_write_to_a_key_the_schema_lacks_is_unknown_key() -> None:
    """Seed 004 UnknownKey: "A key was read or written that the graph did not register"."""
    events, result = await run(runtime(), batch_graph({"a": {"nope": 1}}, graph_id="unknown"))
    assert result.status == "failed"
    assert isinstance(result.error, UnknownKey)
    assert (result.error.node, result.error.key) == ("a", "nope")
    assert of(events, "error")[0].error_type == "UnknownKey"


async def test_sequential_patches_apply_in_order() -> None:
    """SPEC §1: "Sequential patches apply in order." """
    g = Graph("seq", M)
    g.node("one", lambda s: {"x": s.x * 10 + 1, "plain": [*s.plain, "one"]})
    g.node("two", lambda s: {"x": s.x * 10 + 2, "plain": [*s.plain, "two"]})
    g.node("three", lambda s: {"x": s.x * 10 + 3})
    g.edge(START, "one").edge("one", "two").edge("two", "three").edge("three", END)
    _, result = await run(runtime(), g.compile())
    assert result.data["x"] == 123
    assert result.data["plain"] == ["one", "two"]


# -- copies ------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS[:3])
async def test_nodes_get_their_own_copy_of_the_state(seed: int) -> None:
    """SPEC §1 (state is JSON, checkpoints are copies): a node that mutates its state object
    in place changes nothing in the run — neither for its batch peers nor later nodes."""
    seen: dict[str, dict[str, Any]] = {}

    async def vandal(state: M) -> None:
        state.items.append("evil")
        state.plain.append("evil")
        state.x = 99

    async def peer(state: M, ctx: NodeContext) -> dict[str, Any]:
        await anyio.sleep(1)  # runs after the vandal whatever the seed
        seen[ctx.node] = state.model_dump()
        return {"y": 1}

    async def later(state: M) -> None:
        seen["later"] = state.model_dump()

    g = Graph("copies", M)
    g.node("vandal", vandal).node("peer", peer).node("later", later)
    g.edge(START, ["vandal", "peer"]).edge(["vandal", "peer"], "later").edge("later", END)
    rt = runtime(seed=seed)
    _, result = await run(rt, g.compile(), {"items": ["x"]})
    clean = {"items": ["x"], "x": 0, "y": 0, "plain": [], "picky": []}
    assert seen["peer"] == clean
    assert seen["later"] == {**clean, "y": 1}
    assert result.data == {**clean, "y": 1}
    for cp in await rt.store.list(result.run_id):
        assert "evil" not in str(cp.state)


async def test_a_returned_patch_is_copied_when_the_node_returns() -> None:
    """A node that keeps its returned dict and mutates it later changes nothing in the run."""
    kept: dict[str, Any] = {}

    def first(state: M) -> dict[str, Any]:
        kept["patch"] = {"plain": ["first"], "x": 1}
        return kept["patch"]

    def second(state: M) -> None:
        kept["patch"]["plain"].append("smuggled")
        kept["patch"]["x"] = 666

    g = Graph("kept", M)
    g.node("first", first).node("second", second)
    g.edge(START, "first").edge("first", "second").edge("second", END)
    _, result = await run(runtime(), g.compile())
    assert result.data["plain"] == ["first"]
    assert result.data["x"] == 1


async def test_events_carry_copies() -> None:
    """Seed 001 StreamEvent: "Events carry copies: changing them does not change the run." —
    mutating a ``node_end`` patch or a ``run_end``/``values`` state as it streams."""
    rt = runtime()
    graph = chain_graph(Script())

    def vandalise(event: Any) -> None:
        if event.type == "node_end":
            event.patch["log"].append("hacked")
        if event.type == "run_end":
            event.state["log"].append("hacked")

    stream = rt.stream(graph, {"n": 1})
    events = await collect(stream, vandalise)
    result = stream.result()
    assert result.data["log"] == ["one", "two", "three"]
    for cp in await rt.store.list(result.run_id):
        assert "hacked" not in cp.state["log"]

    values = rt.stream(graph, mode="values")
    states = []
    async for item in values:
        if item.mode == "values":
            item.data["log"].append("hacked")
            states.append(item.data)
    assert values.result().data["log"] == ["one", "two", "three"]
    assert len(events) > 0
    assert len(states) == 3


async def test_a_state_model_input_is_accepted() -> None:
    """SPEC §2: ``invoke(graph, input)`` takes a dict or the state model."""
    _, result = await run(runtime(), chain_graph(Script()), S(n=7))
    assert result.data["n"] == 7
