"""An async node alone in its batch resumes after a virtual sleep without a loop turn when
nothing else could run (issue 29): what else the loop has to do still runs first, and a
cancellation is still delivered where the sleep is."""

from __future__ import annotations

import anyio
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, GraphRuntime, VirtualClock


class S(BaseModel):
    seen: list[str] = []


def _run(fn: object) -> list[str]:
    g = Graph("lone", S)
    g.node("a", fn)  # type: ignore[arg-type]
    g.edge(START, "a").edge("a", END)
    result = GraphRuntime(clock=VirtualClock(), seed=0).invoke(g.compile(), {})
    assert result.status == "completed"
    return list(result.data["seen"])


def test_a_task_the_node_started_runs_before_the_node_resumes() -> None:
    async def node(state: S) -> dict[str, list[str]]:
        seen: list[str] = []

        async def child() -> None:
            seen.append("child started")

        async with anyio.create_task_group() as tg:
            tg.start_soon(child)
            await anyio.sleep(1)  # the child is ready on the loop: it gets its turn
            seen.append("node resumed")
        return {"seen": seen}

    assert _run(node) == ["child started", "node resumed"]


def test_a_sleep_in_a_cancelled_scope_is_cancelled() -> None:
    async def node(state: S) -> dict[str, list[str]]:
        seen: list[str] = []
        with anyio.CancelScope() as scope:
            scope.cancel()
            await anyio.sleep(1)
            seen.append("not cancelled")  # never reached
        seen.append("after the scope")
        return {"seen": seen}

    assert _run(node) == ["after the scope"]


def test_a_lone_node_sleeps_in_virtual_time() -> None:
    async def node(state: S) -> dict[str, list[str]]:
        before = anyio.current_time()
        await anyio.sleep(30)
        await anyio.sleep(0)
        return {"seen": [f"{anyio.current_time() - before:.0f}s"]}

    assert _run(node) == ["30s"]
