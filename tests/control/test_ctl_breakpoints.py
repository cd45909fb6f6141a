"""Breakpoints (seed 002: "A Run may complete, fail, be canceled, or pause for a breakpoint or
user input"): pause before or after chosen nodes, set at compile time or per run, resumed
with no answer."""

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
    GraphValidationError,
    InMemoryCheckpointStore,
    InvalidArgument,
    Reducer,
    Resume,
    ResumeError,
    VirtualClock,
)
from pytest_graphflow.invariants import assert_invariants

pytestmark = pytest.mark.anyio


class State(BaseModel):
    log: Annotated[list[str], Reducer(operator.add)] = []
    n: int = 0


def build(calls: list[str], **compile_kw: Any) -> Any:
    """plan -> [a, b, c] (one parallel batch) -> join -> END; plan is sync (the inline
    path), the others async."""

    def node(name: str) -> Any:
        def sync(state: State) -> dict[str, Any]:
            calls.append(name)
            return {"log": [name]}

        async def fn(state: State) -> dict[str, Any]:
            return sync(state)

        return sync if name == "plan" else fn

    g = Graph("bp", State)
    for name in ("plan", "a", "b", "c", "join"):
        g.node(name, node(name))
    g.edge(START, "plan").edge("plan", ["a", "b", "c"]).edge(["a", "b", "c"], "join")
    g.edge("join", END)
    return g.compile(**compile_kw)


def runtime() -> GraphRuntime:
    return GraphRuntime(store=InMemoryCheckpointStore(), clock=VirtualClock(), seed=3)


async def test_a_breakpoint_before_a_node_of_a_parallel_batch_pauses_before_the_batch() -> None:
    calls: list[str] = []
    graph = build(calls, interrupt_before=["b"])
    rt = runtime()
    first = await rt.atrace(graph)
    result = first.result
    assert result.status == "interrupted"
    assert result.breakpoint == Breakpoint(when="before", nodes=["b"])
    assert result.interrupts == {}
    assert calls == ["plan"]  # none of a, b, c ran
    assert result.data["log"] == ["plan"]
    end = first.events[-1]
    assert (end.type, end.status, end.breakpoint) == ("run_end", "interrupted",  # type: ignore[attr-defined]
                                                      result.breakpoint)
    assert first.events[-2].type == "checkpoint_saved"

    second = await rt.aresume_trace(result.run_id)  # no Resume: nothing to answer
    assert second.result.status == "completed"
    assert second.result.breakpoint is None
    assert sorted(calls) == sorted(["plan", "a", "b", "c", "join"])
    assert calls.count("b") == 1
    assert second.result.data["log"] == ["plan", "a", "b", "c", "join"]
    assert_invariants([*first.events, *second.events], graph=graph)


async def test_a_breakpoint_after_a_node_of_a_parallel_batch_pauses_once_it_committed() -> None:
    calls: list[str] = []
    graph = build(calls, interrupt_after=["b"])
    rt = runtime()
    first = await rt.atrace(graph)
    result = first.result
    assert result.status == "interrupted"
    assert result.breakpoint == Breakpoint(when="after", nodes=["b"])
    assert sorted(calls) == ["a", "b", "c", "plan"]
    assert result.data["log"] == ["plan", "a", "b", "c"]  # the batch is committed
    cp = await rt.store.latest(result.run_id)
    assert cp is not None
    assert (cp.status, [t.node for t in cp.tasks]) == ("interrupted", ["join"])

    second = await rt.aresume_trace(result.run_id)
    assert second.result.status == "completed"
    assert calls[4:] == ["join"]
    assert_invariants([*first.events, *second.events], graph=graph)


async def test_breakpoints_given_per_run_and_combined_with_the_graphs() -> None:
    calls: list[str] = []
    graph = build(calls, interrupt_after=["plan"])
    rt = runtime()
    r1 = await rt.ainvoke(graph, interrupt_before=["join"])
    assert r1.breakpoint == Breakpoint(when="after", nodes=["plan"])
    r2 = await rt.aresume(r1.run_id, interrupt_before=["join"])
    assert r2.breakpoint == Breakpoint(when="before", nodes=["join"])
    assert "join" not in calls
    r3 = await rt.aresume(r2.run_id)
    assert r3.status == "completed"
    assert calls.count("join") == 1
    # a run without per-run breakpoints stops only at the graph's
    calls.clear()
    r4 = await rt.ainvoke(graph)
    assert r4.breakpoint == Breakpoint(when="after", nodes=["plan"])
    assert (await rt.aresume(r4.run_id)).status == "completed"


async def test_a_breakpoint_pause_takes_no_answer_and_changes_nothing_when_given_one() -> None:
    rt = runtime()
    paused = await rt.ainvoke(build([], interrupt_before=["a"]))
    before = await rt.store.list(paused.run_id)
    with pytest.raises(ResumeError, match="paused for a breakpoint"):
        await rt.aresume(paused.run_id, Resume("yes"))
    assert await rt.store.list(paused.run_id) == before
    assert (await rt.aresume(paused.run_id)).status == "completed"


async def test_a_breakpoint_after_the_last_node_does_not_pause_a_finished_run() -> None:
    result = await runtime().ainvoke(build([], interrupt_after=["join"]))
    assert result.status == "completed"
    assert result.breakpoint is None


def test_breakpoints_on_unknown_nodes_are_refused() -> None:
    with pytest.raises(GraphValidationError) as info:
        build([], interrupt_before=["nope"], interrupt_after=["b", "gone"])
    assert info.value.problems == ["compile(interrupt_before=...): unknown node 'nope'",
                                   "compile(interrupt_after=...): unknown node 'gone'"]
    graph = build([])
    rt = runtime()
    with pytest.raises(InvalidArgument, match="has no node 'zzz'"):
        rt.invoke(graph, interrupt_before=["zzz"])
    with pytest.raises(InvalidArgument, match="list of node names"):
        rt.invoke(graph, interrupt_after=[1])


def test_refused_breakpoints_leave_no_wall_clock_patch_and_no_claim() -> None:
    from pytest_graphflow._time import _wallclock

    graph = build([])
    rt = runtime()
    for bad in ({"interrupt_before": ["zzz"]}, {"interrupt_after": 5}):
        with pytest.raises(InvalidArgument):
            rt.invoke(graph, thread_id="t-1", **bad)
        assert not _wallclock.active()
    assert rt.invoke(graph, thread_id="t-1").status == "completed"  # the thread is free


async def test_a_breakpoint_pause_resumes_in_another_process_over_sqlite(tmp_path: Any) -> None:
    from pytest_graphflow import SQLiteCheckpointStore

    calls: list[str] = []
    graph = build(calls, interrupt_before=["b"])
    path = tmp_path / "runs.db"
    first = GraphRuntime(store=SQLiteCheckpointStore(path), clock=VirtualClock(), seed=3)
    paused = await first.ainvoke(graph)
    assert paused.breakpoint == Breakpoint(when="before", nodes=["b"])
    fresh = GraphRuntime(store=SQLiteCheckpointStore(path), clock=VirtualClock(), seed=3)
    done = await fresh.aresume(paused.run_id, graph=graph)
    assert done.status == "completed"  # the task passed its breakpoint: it does not stop again
    assert calls.count("b") == 1


class Names(BaseModel):
    log: Annotated[list[str], Reducer(operator.add)] = []


def names_graph(**compile_kw: Any) -> Any:
    """START -> ab -> a -> b -> END: a node whose name is also two other nodes' letters."""
    g = Graph("names", Names)
    for name in ("ab", "a", "b"):
        g.node(name, lambda s, ctx: {"log": [ctx.node]})
    g.edge(START, "ab").edge("ab", "a").edge("a", "b").edge("b", END)
    return g.compile(**compile_kw)


SINGLE = [(where, when) for where in ("compile", "run") for when in ("before", "after")]


@pytest.mark.parametrize(("where", "when"), SINGLE, ids=[f"{w}-{n}" for w, n in SINGLE])
async def test_a_single_breakpoint_name_is_one_node_in_both_places(where: str, when: str
                                                                   ) -> None:
    """Issue 23 (7): ``interrupt_before="ab"`` is the node ``ab`` — at compile time it was
    split into the letters ``a`` and ``b``, and per run it was refused."""
    option = {f"interrupt_{when}": "ab"}
    graph = names_graph(**option) if where == "compile" else names_graph()
    rt = runtime()
    paused = await rt.ainvoke(graph, **({} if where == "compile" else option))
    assert paused.status == "interrupted"
    assert paused.breakpoint == Breakpoint(when=when, nodes=["ab"])  # type: ignore[arg-type]
    assert paused.data["log"] == ([] if when == "before" else ["ab"])
    done = await rt.aresume(paused.run_id)
    assert done.status == "completed"  # no pause at "a" or "b"
    assert done.data["log"] == ["ab", "a", "b"]


BAD_NAMES = [("int", 5), ("list-of-int", [1]), ("none-inside", ["a", None]), ("bytes", b"ab")]


@pytest.mark.parametrize("where", ["compile", "run"])
@pytest.mark.parametrize("bad", [b for _, b in BAD_NAMES], ids=[n for n, _ in BAD_NAMES])
def test_breakpoints_that_are_not_node_names_are_refused_alike(where: str, bad: Any) -> None:
    rt = runtime()

    def call() -> Any:
        if where == "compile":
            return names_graph(interrupt_before=bad)
        return rt.invoke(names_graph(), interrupt_before=bad)

    with pytest.raises(InvalidArgument, match=r"interrupt_before=.*a node name or a list of"):
        call()
    assert rt.runs == []


def chain(calls: list[str], *, ask: bool = False) -> Any:
    """START -> a -> b -> c -> END, uncompiled; with ``ask``, ``b`` asks for an answer."""
    from pytest_graphflow import interrupt

    def node(name: str) -> Any:
        def fn(state: State) -> dict[str, Any]:
            calls.append(name)
            if ask and name == "b":
                interrupt({"ask": name}, id="q")
            return {"log": [name]}

        return fn

    g = Graph("twice", State)
    for name in ("a", "b", "c"):
        g.node(name, node(name))
    g.edge(START, "a").edge("a", "b").edge("b", "c").edge("c", END)
    return g


async def test_a_resume_without_graph_keeps_the_run_s_own_compile_time_breakpoints() -> None:
    """Issue 23 (6): one builder compiled twice, plain and with breakpoints. A runtime that
    ran the plain one first resumed every later run of that graph id under it, so a run
    started with breakpoints silently lost them on resume. Now each run resumes under the
    compiled graph it started with."""
    calls: list[str] = []
    g = chain(calls)
    plain = g.compile()
    stops = g.compile(interrupt_after=["a", "b"])
    rt = runtime()
    assert (await rt.ainvoke(plain)).status == "completed"
    first = await rt.ainvoke(stops)
    assert first.breakpoint == Breakpoint(when="after", nodes=["a"])
    second = await rt.aresume(first.run_id)
    assert second.status == "interrupted"  # it pauses again, as LangGraph's does
    assert second.breakpoint == Breakpoint(when="after", nodes=["b"])
    done = await rt.aresume(first.run_id)
    assert done.status == "completed"
    assert done.data["log"] == ["a", "b", "c"]


async def test_a_resume_without_graph_does_not_add_another_compile_s_breakpoints() -> None:
    """The mirror: the breakpoint variant ran first; a plain run paused at an interrupt
    resumes to its end without stopping at the other variant's breakpoints."""
    calls: list[str] = []
    g = chain(calls, ask=True)
    stops = g.compile(interrupt_after=["a", "b"])
    plain = g.compile()
    rt = runtime()
    assert (await rt.ainvoke(stops)).status == "interrupted"
    asked = await rt.ainvoke(plain)
    assert asked.status == "interrupted"
    assert asked.breakpoint is None  # paused at its interrupt, not a breakpoint
    done = await rt.aresume(asked.run_id, Resume("yes"))
    assert done.status == "completed"
    assert done.data["log"] == ["a", "b", "c"]


async def test_a_runtime_that_cannot_tell_which_compile_a_run_used_refuses(tmp_path: Any
                                                                          ) -> None:
    """A runtime that knows two differing compiles of the run's graph id but not the run
    (another runtime started it) refuses to guess and names graph=; given graph=, it
    resumes, and later resumes of that run keep using it."""
    from pytest_graphflow import GraphExecutionError, SQLiteCheckpointStore

    calls: list[str] = []
    g = chain(calls)
    plain, stops = g.compile(), g.compile(interrupt_after=["a", "b"])
    path = tmp_path / "runs.db"
    started = await GraphRuntime(store=SQLiteCheckpointStore(path), clock=VirtualClock(),
                                 seed=3).ainvoke(stops)
    assert started.status == "interrupted"
    other = GraphRuntime(store=SQLiteCheckpointStore(path), clock=VirtualClock(), seed=3)
    assert (await other.ainvoke(plain)).status == "completed"
    assert (await other.ainvoke(stops)).status == "interrupted"
    with pytest.raises(GraphExecutionError, match=r"'twice'.*interrupt_after.*pass graph="):
        await other.aresume(started.run_id)
    again = await other.aresume(started.run_id, graph=stops)
    assert again.breakpoint == Breakpoint(when="after", nodes=["b"])
    assert (await other.aresume(started.run_id)).status == "completed"


async def test_a_runtime_that_knows_one_compile_resumes_runs_it_did_not_start(tmp_path: Any
                                                                             ) -> None:
    """The passing twin: a runtime that ran only one compile of the graph id resumes a run
    another runtime started under it, without graph=."""
    from pytest_graphflow import SQLiteCheckpointStore

    calls: list[str] = []
    stops = chain(calls).compile(interrupt_after=["a", "b"])
    path = tmp_path / "runs.db"
    started = await GraphRuntime(store=SQLiteCheckpointStore(path), clock=VirtualClock(),
                                 seed=3).ainvoke(stops)
    other = GraphRuntime(store=SQLiteCheckpointStore(path), clock=VirtualClock(), seed=3)
    assert (await other.ainvoke(stops)).status == "interrupted"
    resumed = await other.aresume(started.run_id)
    assert resumed.breakpoint == Breakpoint(when="after", nodes=["b"])
