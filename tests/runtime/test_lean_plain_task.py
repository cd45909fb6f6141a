"""Issue 29: the lean loop holds the next step's task as a ``_PlainTask`` (its id and node),
not a ``TaskRecord``, while the in-memory store's sink saves its steps, and none of it leaves
the loop.

A chain step on the in-memory store made a pydantic ``TaskRecord`` for the next step's task
(a dict of its six fields and four slot writes, about a tenth of the step's machine
instructions) that nothing but the next step's context read: the store's sink takes the
tasks as ``(task_id, node)`` pairs. The loop now holds a plain object with the id and node,
read as the record is read. Wherever a task goes on to the general path (the node raised,
asked a question, returned a ``Command``, an awaitable or a patch the loop does not check,
emitted, attached, arrived at a join, its route raised or expanded), wherever the loop ends
(the last step, a batch next, a checkpoint the sink does not take, the superstep budget),
it is made the ``TaskRecord`` the loop would have made. Here each such exit, reached right
after a step that made a ``_PlainTask``, leaves what a traced run (the general path
throughout) leaves: the result, every checkpoint field by field, what each node's context
read of its task and its seeded draws; and every outcome the general path takes holds a
``TaskRecord``.
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Callable
from typing import Annotated, Any

import anyio
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
    Resume,
    VirtualClock,
    emit,
    interrupt,
)
from pytest_graphflow._engine import _lean
from pytest_graphflow._engine._outcome import Outcome
from pytest_graphflow._records._checkpoint import TaskRecord


class S(BaseModel):
    n: int = 0
    log: Annotated[list[int], Reducer(operator.add)] = []
    note: str = ""


Seen = list[tuple[Any, ...]]
Node = Callable[..., Any]


def _reads(seen: Seen, ctx: Any) -> None:
    """What a node reads of its task and its seeded streams."""
    seen.append((ctx.node, ctx.task_id, ctx.step, ctx.item, ctx.checkpoint_id_before,
                 ctx.failure, ctx.visited, ctx.random().random(), str(uuid.uuid4())))


def _plain(seen: Seen) -> Node:
    def node(s: S, ctx: Any) -> dict[str, Any]:
        _reads(seen, ctx)
        return {"n": s.n + 1}
    return node


def _logs(seen: Seen) -> Node:
    def node(s: S, ctx: Any) -> dict[str, Any]:
        _reads(seen, ctx)
        return {"log": [7]}
    return node


def _exit(seen: Seen, kind: str) -> Node:
    """Node ``x``: the step that leaves the lean loop as ``kind`` says."""
    def node(s: S, ctx: Any) -> Any:
        _reads(seen, ctx)
        if kind in ("raises", "raises_routed"):
            raise ValueError("no")
        if kind == "asks":
            return {"note": str(interrupt("go?", id="go"))}
        if kind == "command":
            return Command(update={"n": 9}, goto="z")
        if kind == "emits":
            emit({"at": s.n})
        if kind == "attaches":
            ctx.attach("out.txt", "x")
        if kind == "reducer":
            return {"log": [s.n]}
        if kind == "unknown_key":
            return {"nope": 1}
        if kind == "awaitable":
            async def later() -> dict[str, Any]:
                return {"n": 50}
            return later()
        return {"n": s.n + 1}
    return node


def _route(kind: str) -> Callable[[S], Any]:
    def route(s: S) -> Any:
        if kind == "route_raises":
            raise RuntimeError("no route")
        if kind == "route_expands":
            return Expand("w", [1, 2])
        return "z"
    return route


def _graph(kind: str, seen: Seen) -> CompiledGraph:
    """``a → b → x → z`` (``x`` the exit), each step checkpointed: ``b`` and ``x`` run
    with the task the step before made for them."""
    g = Graph(f"exit_{kind}", S)
    g.node("a", _plain(seen))
    g.node("b", _plain(seen))
    g.node("x", _exit(seen, kind),
           on_error="z" if kind == "raises_routed" else None,
           destinations=["z"] if kind == "command" else None)
    if kind == "held_next":  # the loop ends before z (async): its task is left a record
        plain = _plain(seen)

        async def held(s: S, ctx: Any) -> dict[str, Any]:
            return plain(s, ctx)  # type: ignore[no-any-return]

        g.node("z", held)
    else:
        g.node("z", _plain(seen))
    if kind == "joins":  # ``w`` arrives first, from a batch with ``a``
        g.node("s", _plain(seen))
        g.node("w", _logs(seen))
        g.edge(START, "s").edge("s", ["a", "w"]).edge(["w", "x"], "z")
    else:
        g.edge(START, "a")
    g.edge("a", "b").edge("b", "x").edge("z", END)
    if kind.startswith("route"):
        g.node("w", lambda s, ctx: {"log": [ctx.item]})
        g.edge("w", END)
        g.branch("x", _route(kind), ["z", "w"])
    elif kind not in ("joins", "command"):
        g.edge("x", "z")
    return g.compile(checkpoint_policy="every_step")


KINDS = ["plain", "held_next", "raises", "raises_routed", "asks", "command", "emits",
         "attaches", "reducer", "unknown_key", "awaitable", "joins", "route", "route_raises",
         "route_expands"]


def _dumps(store: InMemoryCheckpointStore, run_id: str) -> list[dict[str, Any]]:
    async def read() -> list[dict[str, Any]]:
        return [cp.model_dump() for cp in await store.list(run_id)]

    return anyio.run(read)


def _ends(result: Any) -> tuple[Any, ...]:
    return (result.run_id, result.status, result.data, result.checkpoint_id, result.step,
            sorted(result.interrupts), repr(result.error), type(result.error))


def _run(runtime: GraphRuntime, graph: CompiledGraph, traced: bool) -> tuple[Any, ...]:
    """How a run of ``graph`` ends (answered ``"yes"`` if it asks): its result, or the
    exception it raised."""
    try:
        result = runtime.trace(graph, {}).result if traced else runtime.invoke(graph, {})
        if result.status == "interrupted":
            result = (runtime.resume_trace(result.run_id, Resume("yes")).result if traced
                      else runtime.resume(result.run_id, Resume("yes")))
    except Exception as exc:  # an edge function's exception ends the run with it (C7)
        return (None, "raised", repr(exc), type(exc))
    return _ends(result)


def _runs(store: InMemoryCheckpointStore) -> list[str]:
    """The runs the store holds checkpoints of, in the order of their first."""
    async def read() -> list[str]:
        return list(dict.fromkeys(cp.run_id for cp in await store.list()))

    return anyio.run(read)


def _records(monkeypatch: pytest.MonkeyPatch) -> list[type]:
    """The type of the record of every outcome made from now on."""
    kinds: list[type] = []
    init = Outcome.__init__

    def counted(self: Outcome, record: Any, *args: Any, **kwargs: Any) -> None:
        kinds.append(type(record))
        init(self, record, *args, **kwargs)

    monkeypatch.setattr(Outcome, "__init__", counted)
    return kinds


@pytest.mark.parametrize("kind", KINDS)
def test_an_exit_after_a_lean_step_leaves_what_a_traced_run_leaves(
        kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[Any] = []
    new_task = _lean._new

    def counting(cls: type) -> Any:  # the loop's _PlainTasks, counted
        obj = new_task(cls)
        if cls is _lean._PlainTask:
            made.append(obj)
        return obj

    monkeypatch.setattr(_lean, "_new", counting)
    records = _records(monkeypatch)
    ends, reads, dumps = [], [], []
    for traced in (False, True):
        seen: Seen = []
        store = InMemoryCheckpointStore()
        runtime = GraphRuntime(store, clock=VirtualClock(), seed=3)
        ends.append(_run(runtime, _graph(kind, seen), traced))
        reads.append(seen)
        dumps.append([cp for run in _runs(store) for cp in _dumps(store, run)])
    assert ends[0] == ends[1]
    assert reads[0] == reads[1]
    assert dumps[0] == dumps[1]
    assert "x" in [task.node for task in made]  # x's task was a _PlainTask under invoke
    assert records
    assert set(records) == {TaskRecord}
    assert ends[0][1] == ("failed" if kind in ("raises", "unknown_key") else
                          "raised" if kind == "route_raises" else "completed")


def test_each_exit_ends_as_its_name_says() -> None:
    """The graphs above reach the exits they are named for."""
    data = {}
    for kind in KINDS:
        if kind == "route_raises":
            with pytest.raises(RuntimeError, match="no route"):
                GraphRuntime(clock=VirtualClock(), seed=0).invoke(_graph(kind, []), {})
            continue
        runtime = GraphRuntime(clock=VirtualClock(), seed=0)
        result = runtime.invoke(_graph(kind, []), {})
        if kind == "asks":
            assert result.status == "interrupted"
            result = runtime.resume(result.run_id, Resume("yes"))
        data[kind] = result.data
    assert data["plain"]["n"] == data["emits"]["n"] == data["attaches"]["n"] == 4
    assert data["held_next"]["n"] == 4
    assert data["raises_routed"]["n"] == data["reducer"]["n"] == 3
    assert data["reducer"]["log"] == [2]
    assert data["asks"]["note"] == "yes"
    assert data["command"]["n"] == 10
    assert data["awaitable"]["n"] == 51
    assert data["joins"]["n"] == 5
    assert data["route"]["n"] == 4
    assert data["route_expands"]["log"] == [1, 2]


def test_a_save_the_sink_declines_gets_records() -> None:
    """A ``FaultyStore`` given a rule on saves during a run declines its sink's next save:
    the step's task, made a ``_PlainTask`` for the sink, goes to the writer as a record, and
    the run leaves what a traced run leaves (every checkpoint saved, the later ones
    delayed on the virtual clock)."""
    def chain(faulty: FaultyStore) -> CompiledGraph:
        def ruling(s: S) -> dict[str, Any]:
            if s.n == 2:
                faulty.delay("save", 0.5)  # a rule on saves: the sink declines from now
            return {"n": s.n + 1}

        g = Graph("ruled", S)
        prev = START
        for i in range(6):
            g.node(f"n{i}", ruling)
            g.edge(prev, f"n{i}")
            prev = f"n{i}"
        return g.edge(prev, END).compile(checkpoint_policy="every_step")

    ends = []
    for traced in (False, True):
        inner = InMemoryCheckpointStore()
        faulty = FaultyStore(inner)
        runtime = GraphRuntime(faulty, clock=VirtualClock(), seed=3)
        graph = chain(faulty)
        result = runtime.trace(graph, {}).result if traced else runtime.invoke(graph, {})
        ends.append((_ends(result), _dumps(inner, result.run_id), faulty.saves))
    assert ends[0] == ends[1]
    assert ends[0][0][1] == "completed"
    assert len(ends[0][2]) == 7
    stamps = [cp["timestamp"] for cp in ends[0][1]]
    assert stamps[-1] > stamps[0]  # the rule delayed the saves after it
