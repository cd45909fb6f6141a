"""Running a graph one superstep at a time: ``CompiledGraph.step`` / ``GraphRuntime.step``
(seed 004 names ``CompiledGraph.step``)."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Breakpoint,
    Cancelled,
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


# -- seed 004: a cancelled step ----------------------------------------------------------------
# "interrupting the thread driving CompiledGraph.step ... Every task was interrupted and
# joined. ... A step keeps nothing from the cancelled superstep, and returns this with the
# interrupt flag set."


class Gated:
    """``plan``, then a batch where ``quick`` (a write) finishes and ``stuck`` waits on a gate."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.gate = anyio.Event()

        async def quick(s: S) -> dict[str, Any]:
            self.calls.append("quick")
            return {"log": ["quick"]}

        async def stuck(s: S) -> dict[str, Any]:
            self.calls.append("stuck")
            await anyio.sleep(1)  # quick finishes first, whatever the seed
            await self.gate.wait()
            return {"log": ["stuck"]}

        g = Graph("gated", S)
        g.node("plan", lambda s: {"log": ["plan"]})
        g.node("quick", quick, effect="write").node("stuck", stuck)
        g.edge(START, "plan").edge("plan", ["quick", "stuck"]).edge(["quick", "stuck"], END)
        self.graph = g.compile()


async def assert_step_kept_nothing(rt: GraphRuntime, parts: Gated, run_id: str) -> None:
    cp = await rt.store.latest(run_id)
    assert cp is not None
    assert cp.status == "cancelled"
    assert [t.node for t in cp.tasks] == ["quick", "stuck"]
    assert cp.completed == {}  # quick finished, and is not kept
    assert cp.state["log"] == ["plan"]
    record = rt.run_record(run_id)
    assert record.status == "cancelled"
    assert record.error is not None
    assert record.error["error_type"] == "Cancelled"
    # the next step runs the whole superstep again
    parts.gate.set()
    again = await rt.astep(parts.graph, run_id=run_id)
    assert again.status == "completed"  # that superstep was the last
    assert again.data["log"] == ["plan", "quick", "stuck"]
    assert parts.calls.count("quick") == 2


@pytest.mark.anyio
@pytest.mark.parametrize("seed", [0, 1, 2])
async def test_a_cancelled_step_returns_cancelled_with_the_cancellation_still_requested(
    seed: int,
) -> None:
    parts = Gated()
    rt = GraphRuntime(clock=VirtualClock(), seed=seed)
    first = await rt.astep(parts.graph, {})
    results: list[Any] = []
    after: list[str] = []
    scope = anyio.CancelScope()

    async def drive() -> None:
        with scope:
            results.append(await rt.astep(parts.graph, run_id=first.run_id))
            await anyio.sleep(0)  # the "interrupt flag": the caller's next await is cancelled
            after.append("not reached")

    async with anyio.create_task_group() as tg:
        tg.start_soon(drive)
        await anyio.wait_all_tasks_blocked()
        assert sorted(parts.calls) == ["quick", "stuck"]
        scope.cancel()

    (result,) = results
    assert result.status == "cancelled"
    assert isinstance(result.error, Cancelled)
    assert result.run_id == first.run_id
    assert after == []
    assert scope.cancelled_caught
    await assert_step_kept_nothing(rt, parts, first.run_id)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_step_cancelled_by_task_cancel_returns_and_its_task_stays_cancelled() -> None:
    parts = Gated()
    rt = GraphRuntime(clock=VirtualClock(), seed=1)
    first = await rt.astep(parts.graph, {})
    results: list[Any] = []
    after: list[str] = []

    async def drive() -> None:
        results.append(await rt.astep(parts.graph, run_id=first.run_id))
        assert asyncio.current_task().cancelling() == 1  # type: ignore[union-attr]
        await asyncio.sleep(0)
        after.append("not reached")

    task = asyncio.ensure_future(drive())
    await anyio.wait_all_tasks_blocked()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (result,) = results
    assert result.status == "cancelled"
    assert after == []
    await assert_step_kept_nothing(rt, parts, first.run_id)


def test_ctrl_c_during_a_sync_step_cancels_the_superstep_and_goes_on() -> None:
    """The sync ``step``: a ``KeyboardInterrupt`` while a node of the superstep runs (what
    Ctrl-C raises in the thread driving it) cancels the superstep, keeping nothing, and goes
    on to the caller."""
    calls: list[str] = []
    interrupted = [False]

    def quick(s: S) -> dict[str, Any]:
        calls.append("quick")
        return {"log": ["quick"]}

    def slow(s: S) -> dict[str, Any]:
        calls.append("slow")
        if not interrupted[0]:
            interrupted[0] = True
            raise KeyboardInterrupt
        return {"log": ["slow"]}

    g = Graph("ctrl-c", S)
    g.node("plan", lambda s: {"log": ["plan"]})
    g.node("quick", quick, effect="write").node("slow", slow)
    g.edge(START, "plan").edge("plan", ["quick", "slow"]).edge(["quick", "slow"], END)
    graph = g.compile()
    rt = GraphRuntime(clock=VirtualClock(), seed=4)
    first = graph.step(rt, {})
    with pytest.raises(KeyboardInterrupt):
        graph.step(rt, run_id=first.run_id)
    record = rt.run_record(first.run_id)
    assert record.status == "cancelled"
    assert record.error is not None
    assert record.error["error_type"] == "Cancelled"
    cp = anyio.run(rt.store.latest, first.run_id)
    assert cp is not None
    assert cp.status == "cancelled"
    assert cp.completed == {}
    ran_before = calls.count("quick")
    again = graph.step(rt, run_id=first.run_id)
    assert again.data["log"] == ["plan", "quick", "slow"]
    assert calls.count("quick") == ran_before + 1  # run again: nothing was kept
