"""Issue 29: a step of the default path (``invoke``, sync nodes, the in-memory store) costs
the same at any length and width, and takes the lean step without changing what it does.

``invoke`` wants no events, so its one-task supersteps run as lean steps (``_engine/_lean``):
no outcome object, no coroutine per step, the checkpoint's fields handed to the store. A
``trace`` of the same graph builds every event and takes the general path. Both must leave the
same result and the same checkpoints, field by field (ids, ``next_seq``, tasks, visited
nodes, timestamps), on graphs that leave the lean step at each of its exits: a route, a
mapping, a reducer, a join, a ``Command``, a failure and its route, an emitted event, an
expansion from a route, an interrupt, a per-node checkpoint.

The costs are counted, not timed: the Python calls a step makes (``cProfile``'s total, the
same on every run of the same graph and seed) and the objects the garbage collector tracks
per stored checkpoint, which every full collection of a long run walks.
"""

from __future__ import annotations

import cProfile
import gc
import operator
import pstats
import subprocess
import sys
import types
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Command,
    CompiledGraph,
    Expand,
    FaultyStore,
    Graph,
    GraphRuntime,
    InMemoryCheckpointStore,
    Reducer,
    SQLiteCheckpointStore,
    VirtualClock,
    emit,
    interrupt,
)
from pytest_graphflow._graph._node import NodeContext, Visited


class S(BaseModel):
    n: int = 0
    log: Annotated[list[int], Reducer(operator.add)] = []
    note: str = ""


def _chain(length: int, policy: str = "every_step") -> CompiledGraph:
    g = Graph("chain", S)
    prev = START
    for i in range(length):
        g.node(f"n{i}", lambda s: {"n": s.n + 1})
        g.edge(prev, f"n{i}")
        prev = f"n{i}"
    g.edge(prev, END)
    return g.compile(checkpoint_policy=policy)  # type: ignore[arg-type]


def _loop(steps: int) -> CompiledGraph:
    g = Graph("loop", S)
    g.node("step", lambda s: {"n": s.n + 1})
    g.edge(START, "step")
    g.branch("step", lambda s: "step" if s.n < steps else END, ["step", END])
    return g.compile()


def _wide(width: int) -> CompiledGraph:
    g = Graph("wide", S)
    g.node("plan", lambda s: Expand("work", list(range(width))), destinations=["work"])
    g.node("work", lambda s, ctx: {"log": [ctx.item]})
    g.node("join", lambda s: {"n": len(s.log)})
    g.edge(START, "plan").edge("work", "join").edge("join", END)
    return g.compile()


def _mapped() -> CompiledGraph:
    g = Graph("mapped", S)
    g.node("a", lambda s: {"n": s.n + 1})
    g.node("b", lambda s: {"note": "b"})
    g.edge(START, "a")
    g.branch("a", lambda s: s.n < 3, {True: "a", False: "b"})
    g.edge("b", END)
    return g.compile()


def _routed_reducer() -> CompiledGraph:
    """A route after a patch the lean step checks inline (``n``) and after one it leaves to
    the merge (``log`` has a reducer), then a mapping."""
    g = Graph("routed_reducer", S)
    g.node("a", lambda s: {"n": s.n + 1} if s.n % 2 else {"n": s.n + 1, "log": [s.n]})
    g.node("b", lambda s: {"note": str(len(s.log))})
    g.edge(START, "a")
    g.branch("a", lambda s: "a" if s.n < 5 else "b", ["a", "b"])
    g.branch("b", lambda s: len(s.log) > 2, {True: END, False: "a"})
    return g.compile()


def _reducing() -> CompiledGraph:
    g = Graph("reducing", S)
    g.node("a", lambda s: {"log": [1], "n": 1})
    g.node("b", lambda s: {"log": [s.n]})
    g.node("c", lambda s: None)
    g.edge(START, "a").edge("a", "b").edge("b", "c").edge("c", END)
    return g.compile()


def _joined() -> CompiledGraph:
    g = Graph("joined", S)
    g.node("split", lambda s: {"n": 1})
    g.node("x", lambda s: {"log": [1]})
    g.node("y", lambda s: {"note": "y"})
    g.node("y2", lambda s: {"n": s.n + 1})
    g.node("join", lambda s: {"n": s.n + len(s.log)})
    g.edge(START, "split").edge("split", ["x", "y"]).edge("y", "y2")
    g.edge(["x", "y2"], "join").edge("join", END)
    return g.compile()


def _commands() -> CompiledGraph:
    def fail(s: S) -> dict[str, Any]:
        raise ValueError("no")

    def chatty(s: S) -> dict[str, Any]:
        emit({"at": s.n})
        return {"n": s.n + 1}

    g = Graph("commands", S)
    g.node("a", lambda s: Command(update={"n": 5}, goto="c"), destinations=["b", "c"])
    g.node("b", lambda s: {"note": "b"})
    g.node("c", fail, on_error="d")
    g.node("d", chatty)
    g.node("e", lambda s: {"note": "e"}, checkpoint=True)
    g.node("w", lambda s, ctx: {"log": [ctx.item]})
    g.edge(START, "a").edge("b", END).edge("d", "e").edge("w", END)
    g.branch("e", lambda s: Expand("w", [1, 2]), ["w"])
    return g.compile(checkpoint_policy="on_halt")


def _asking() -> CompiledGraph:
    g = Graph("asking", S)
    g.node("a", lambda s: {"n": 1})
    g.node("ask", lambda s: {"note": str(interrupt("go?", id="go"))})
    g.node("z", lambda s: {"n": s.n + 1})
    g.edge(START, "a").edge("a", "ask").edge("ask", "z").edge("z", END)
    return g.compile()


GRAPHS = {"chain": lambda: _chain(5), "on_halt": lambda: _chain(4, "on_halt"),
          "loop": lambda: _loop(4), "wide": lambda: _wide(3), "mapped": _mapped,
          "reducing": _reducing, "routed_reducer": _routed_reducer, "joined": _joined,
          "commands": _commands, "asking": _asking}


def _dumps(store: InMemoryCheckpointStore, run_id: str) -> list[dict[str, Any]]:
    import anyio

    async def read() -> list[dict[str, Any]]:
        return [cp.model_dump() for cp in await store.list(run_id)]

    return anyio.run(read)


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_invoke_leaves_what_a_traced_run_leaves(name: str) -> None:
    graph = GRAPHS[name]()
    lean_store, full_store = InMemoryCheckpointStore(), InMemoryCheckpointStore()
    thread = "t" if name == "on_halt" else None  # a thread named: its last step saves
    lean = GraphRuntime(lean_store, clock=VirtualClock(), seed=3).invoke(graph, {},
                                                                         thread_id=thread)
    full = GraphRuntime(full_store, clock=VirtualClock(), seed=3).trace(
        graph, {}, thread_id=thread).result
    assert (lean.run_id, lean.status, lean.state) == (full.run_id, full.status, full.state)
    assert lean.checkpoint_id == full.checkpoint_id
    cps = _dumps(lean_store, lean.run_id)
    assert cps == _dumps(full_store, full.run_id)
    assert cps  # every graph here saves


def test_a_faulty_store_sees_every_lean_step_s_save() -> None:
    """The in-memory store's own save for lean steps is not taken through a ``FaultyStore``
    (which passes unknown attributes on to the store it wraps): its log shows a ``save`` a
    step, and the checkpoints are those a bare in-memory store keeps."""
    inner, bare = InMemoryCheckpointStore(), InMemoryCheckpointStore()
    faulty = FaultyStore(inner)
    ran = GraphRuntime(faulty, clock=VirtualClock(), seed=3).invoke(_loop(4), {})
    alone = GraphRuntime(bare, clock=VirtualClock(), seed=3).invoke(_loop(4), {})
    cps = _dumps(inner, ran.run_id)
    assert cps == _dumps(bare, alone.run_id)
    assert faulty.saves == [cp["id"] for cp in cps]
    assert [c.op for c in faulty.calls].count("save") == len(cps) == 5


def _calls(graph: CompiledGraph) -> int:
    """Python calls (functions and builtins) of one ``invoke`` of ``graph``; the garbage
    of earlier tests collected first and no collection during it (a finaliser it ran
    would count)."""
    GraphRuntime(clock=VirtualClock(), seed=0, max_supersteps=10_000).invoke(graph, {})
    gc.collect()
    gc.disable()
    try:
        profile = cProfile.Profile()
        profile.enable()
        GraphRuntime(clock=VirtualClock(), seed=0, max_supersteps=10_000).invoke(graph, {})
        profile.disable()
    finally:
        gc.enable()
    return pstats.Stats(profile).total_calls  # type: ignore[attr-defined, no-any-return]


def test_a_chain_step_makes_the_same_calls_at_any_length() -> None:
    """Nothing a step does grows with the run: the calls 100 more steps make are the same
    from 100 to 200 steps as from 200 to 300, on a chain and on a loop through a route. A
    lean chain step makes 7 on CPython 3.11 (a step of the general path made 86, the first
    lean step 46, the second 13 with its model built inline, 14 with the stores' sinks, 10
    with the model, the virtual clock's read and the log's append inline again, 8 with the
    numbering inline, 7 with ``ENTROPY`` set once a loop), a step through a route 13 (112,
    then 58, then 21, 22, 15, then 13; a routed step still sets ``ENTROPY`` to its own
    context): the node, its context (one context variable set), its model's and next
    task's ``object.__new__`` and the store's save (the numbering, ``Numbering.plain_step``
    and ``saved``, and the visited log inline); a route adds itself, its call, its view's
    ``object.__new__``, a context variable unset and a ``len``."""
    chain = [_calls(_chain(n)) for n in (100, 200, 300)]
    loop = [_calls(_loop(n)) for n in (100, 200, 300)]
    assert chain[2] - chain[1] == chain[1] - chain[0]
    assert loop[2] - loop[1] == loop[1] - loop[0]
    assert (chain[1] - chain[0]) / 100 <= 7
    assert (loop[1] - loop[0]) / 100 <= 13


def _slots(obj: object) -> dict[str, Any]:
    """Every slot of ``obj`` (a slotted object) and its value."""
    names = {name for klass in type(obj).__mro__ for name in getattr(klass, "__slots__", ())}
    return {name: getattr(obj, name) for name in sorted(names)}


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_the_lean_step_builds_a_context_and_a_path_as_their_classes_do(
        store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lean loop builds each node's ``NodeContext`` and the run's ``Visited`` path
    without their ``__init__`` (no frame a step): each holds what its class would have put
    in it, slot for slot, and the loop made every step's context itself."""
    seen: list[tuple[NodeContext, dict[str, Any], dict[str, Any]]] = []

    def node(s: S, ctx: NodeContext) -> dict[str, Any]:
        # (before anything reads them: reading the path fills its cache)
        seen.append((ctx, _slots(ctx), _slots(ctx._visited)))
        return {"n": s.n + 1}

    g = Graph("ctx", S)
    prev = START
    for i in range(6):
        g.node(f"n{i}", node)
        g.edge(prev, f"n{i}")
        prev = f"n{i}"
    graph = g.edge(prev, END).compile(checkpoint_policy="every_step")
    made = []
    init = NodeContext.__init__

    def counted(self: NodeContext, *args: Any) -> None:
        made.append(args)
        init(self, *args)

    monkeypatch.setattr(NodeContext, "__init__", counted)
    with SQLiteCheckpointStore(tmp_path / "ctx.db") if store == "sqlite" \
            else InMemoryCheckpointStore() as kept:
        result = GraphRuntime(kept, clock=VirtualClock(), seed=0).invoke(graph, {})
    assert result.state.n == 6
    assert made == []  # every context the lean loop's own
    monkeypatch.setattr(NodeContext, "__init__", init)
    for step, (ctx, slots, path) in enumerate(seen):
        assert type(ctx) is NodeContext
        assert ctx.step == step
        assert slots == _slots(NodeContext(slots["_leg"], slots["_record"], slots["step"],
                                           slots["_visited"]))
        assert path == _slots(Visited(path["_log"], path["_n"]))
        assert path["_n"] == step
    assert [c.visited for c, _, _ in seen] == [tuple(f"n{i}" for i in range(k))
                                               for k in range(6)]


def test_a_batch_task_makes_the_same_calls_at_any_width() -> None:
    """A task of an ``Expand`` batch makes the same calls at any width (its join, merge and
    checkpoint included)."""
    wide = [_calls(_wide(n)) for n in (100, 200, 300)]
    assert wide[2] - wide[1] == wide[1] - wide[0]


def _tracked_in(root: object) -> int:
    """Objects the garbage collector tracks that ``root`` holds, directly or not (not
    walking into classes, modules or functions: what the store itself keeps)."""
    stop = (type, types.ModuleType, types.FunctionType, types.MethodType,
            types.BuiltinFunctionType)
    seen: set[int] = set()
    stack: list[object] = [root]
    count = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        count += gc.is_tracked(obj)
        if not isinstance(obj, stop):
            stack.extend(gc.get_referents(obj))
    return count


def _tracked_per_step(steps: int) -> float:
    """Objects the garbage collector tracks, per step, that a run of ``steps`` steps leaves
    in its store (counted from the store, so other tests' leftovers in the process do not
    count)."""
    graph = _loop(steps)
    store = InMemoryCheckpointStore()
    runtime = GraphRuntime(store, clock=VirtualClock(), seed=0, max_supersteps=10_000)
    runtime.invoke(_loop(2), {})
    gc.collect()
    before = _tracked_in(store)
    result = runtime.invoke(graph, {})
    gc.collect()
    after = _tracked_in(store)
    assert result.status == "completed"
    return (after - before) / steps


@pytest.mark.parametrize("collector", [
    pytest.param("", id="default-thresholds"),
    pytest.param("gc.disable(); ", id="no-automatic-collection"),
    pytest.param("gc.set_threshold(10_000); ", id="rare-collections"),
])
def test_a_stored_checkpoint_is_two_objects_for_the_collector(collector: str) -> None:
    """The in-memory store keeps every checkpoint; a lean step's is one tuple and the state
    (a dict holding a list): two tracked objects, whatever the run's length (the model, its
    lists and its tasks would be six).

    Whatever the collector did during the run, too: a CI worker whose earlier tests left
    the collector off or its thresholds high measured 3.0 here. The stored tasks were a
    tuple of ``(task_id, node)`` pairs, and a full collection untracks such a tuple only if
    it met the pair first: when the run's objects were all still young (no automatic
    collection since they were made), it met them parent first and the outer tuple stayed
    tracked, one object a step more for every later collection to walk. The tasks are one
    flat tuple of strings now, untracked by any collection."""
    # In a fresh interpreter, with the collector set as named.
    code = (f"import gc, test_lean_step as t; {collector}"
            "print(t._tracked_per_step(500), t._tracked_per_step(1_500))")
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parent,
                         capture_output=True, text=True, check=True).stdout
    short, long = map(float, out.split())
    assert short < 2.1
    assert long < 2.1
