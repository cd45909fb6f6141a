"""Issue 3 — cancellation (seed 004 ``Cancelled``): ``RunHandle.cancel()`` and cancelling the
scope that consumes ``stream()``; finished tasks keep their results, resume does not re-run
them."""

from __future__ import annotations

import operator
from typing import Annotated, Any

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Cancelled,
    Graph,
    GraphflowError,
    GraphRuntime,
    Reducer,
    VirtualClock,
)

pytestmark = pytest.mark.anyio


class S(BaseModel):
    log: Annotated[list[str], Reducer(operator.add)] = []


class Parts:
    """A graph whose ``stuck`` task blocks on a gate the test opens; ``quick`` finishes."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.gate = anyio.Event()

        async def quick(s: S) -> dict[str, Any]:
            self.calls.append("quick")
            return {"log": ["quick"]}

        async def stuck(s: S) -> dict[str, Any]:
            self.calls.append("stuck")
            await anyio.sleep(1)  # lets quick run first, whatever the seed
            await self.gate.wait()
            return {"log": ["stuck"]}

        g = Graph("cancel", S)
        g.node("quick", quick)  # pure: C9 keeps it after a cancellation anyway
        g.node("stuck", stuck)
        g.edge(START, ["quick", "stuck"])
        g.edge("quick", END)
        g.edge("stuck", END)
        self.graph = g.compile()


async def assert_resume_keeps_finished(rt: GraphRuntime, parts: Parts, run_id: str) -> None:
    cp = await rt.store.latest(run_id)
    assert cp is not None
    assert cp.status == "cancelled"
    assert [o.node for o in cp.completed.values()] == ["quick"]
    assert [o.patch for o in cp.completed.values()] == [{"log": ["quick"]}]

    parts.gate.set()
    resumed = await rt.aresume_trace(run_id)

    assert resumed.result.status == "completed"
    assert resumed.result.data == {"log": ["quick", "stuck"]}
    assert parts.calls.count("quick") == 1  # not re-run
    assert parts.calls.count("stuck") == 2
    ends = {e.node: e.replayed for e in resumed.events if e.type == "node_end"}
    assert ends == {"quick": True, "stuck": False}
    assert rt.run_record(run_id).status == "completed"


@pytest.mark.parametrize("seed", [0, 1, 2])
async def test_run_handle_cancel(seed: int) -> None:
    parts = Parts()
    rt = GraphRuntime(clock=VirtualClock(), seed=seed)
    handle = await rt.start(parts.graph, {})
    assert handle.run_id.startswith("run-")
    results = []

    async with anyio.create_task_group() as tg:
        async def wait_result() -> None:
            results.append(await handle.result())

        tg.start_soon(wait_result)
        await anyio.wait_all_tasks_blocked()
        assert sorted(parts.calls) == ["quick", "stuck"]
        handle.cancel()

    (result,) = results
    assert result.status == "cancelled"
    assert isinstance(result.error, Cancelled)
    assert result.run_id == handle.run_id
    with pytest.raises(Cancelled):
        result.raise_for_status()
    record = rt.run_record(handle.run_id)
    assert record.status == "cancelled"
    assert record.error is not None
    assert record.error["error_type"] == "Cancelled"
    await assert_resume_keeps_finished(rt, parts, handle.run_id)


async def test_cancelling_the_consumer_scope_cancels_the_run() -> None:
    parts = Parts()
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    seen: list[Any] = []
    scope = anyio.CancelScope()

    async with anyio.create_task_group() as tg:
        async def consume() -> None:
            with scope:
                async for event in rt.stream(parts.graph, {}):
                    seen.append(event)

        tg.start_soon(consume)
        await anyio.wait_all_tasks_blocked()
        scope.cancel()

    assert scope.cancelled_caught
    run_id = seen[0].run_id
    assert seen[0].type == "run_start"
    assert rt.run_record(run_id).status == "cancelled"
    await assert_resume_keeps_finished(rt, parts, run_id)


async def test_cancel_before_any_superstep_runs_nothing() -> None:
    parts = Parts()
    parts.gate.set()
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    handle = await rt.start(parts.graph, {})
    handle.cancel()
    result = await handle.result()

    assert result.status == "cancelled"
    assert parts.calls == []
    resumed = await rt.aresume(handle.run_id)
    assert resumed.status == "completed"
    assert sorted(parts.calls) == ["quick", "stuck"]


async def test_cancelling_a_finished_run_is_an_error() -> None:
    parts = Parts()
    parts.gate.set()
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    handle = await rt.start(parts.graph, {})
    result = await handle.result()
    assert result.status == "completed"

    with pytest.raises(GraphflowError) as info:
        handle.cancel()
    assert handle.run_id in str(info.value)
    # nothing changed
    assert (await handle.result()).status == "completed"
    assert rt.run_record(handle.run_id).status == "completed"
