"""An async node alone in its batch resumes after a virtual sleep without a loop turn when
nothing else could run (issue 29): what else the loop has to do still runs first, and a
cancellation is still delivered where the sleep is."""

from __future__ import annotations

import anyio
import pytest
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


# ------------------------------------------- the cancellation check of a skipped turn


def _due_and_anyio(setup: str) -> tuple[bool, bool]:
    """In a task laid out as ``setup`` says: what ``_cancel_due`` answers, and whether
    anyio's own ``checkpoint_if_cancelled`` raises there."""
    import asyncio

    from pytest_graphflow._time._sched import _cancel_due, _checkpoint_if_cancelled

    async def probe() -> tuple[bool, bool]:
        due = _cancel_due(asyncio.get_running_loop())
        try:
            await _checkpoint_if_cancelled()
        except anyio.get_cancelled_exc_class():
            return due, True
        return due, False

    async def main() -> tuple[bool, bool]:
        out: list[tuple[bool, bool]] = []
        if setup == "unknown-task":  # a task anyio never saw: no scope to cancel
            return await asyncio.get_running_loop().create_task(probe())
        with anyio.CancelScope() as outer:
            if setup in ("outer-cancelled", "outer-cancelled-inner-shield"):
                outer.cancel()
            with anyio.CancelScope(shield=setup == "outer-cancelled-inner-shield") as inner:
                if setup == "own-cancelled":
                    inner.cancel()
                async with anyio.create_task_group() as tg:
                    async def child() -> None:
                        out.append(await probe())

                    if setup == "child-task":
                        tg.start_soon(child)
                    else:
                        out.append(await probe())
        return out[0]

    return anyio.run(main, backend="asyncio")  # type: ignore[no-any-return]


@pytest.mark.parametrize("setup", ["none", "own-cancelled", "outer-cancelled",
                                   "outer-cancelled-inner-shield", "child-task",
                                   "unknown-task"])
def test_a_skipped_turn_checks_cancellation_as_anyio_does(setup: str) -> None:
    due, raised = _due_and_anyio(setup)
    assert due is raised
    assert due is (setup in ("own-cancelled", "outer-cancelled"))


def test_a_lone_sleeps_turn_reads_the_scopes_in_place() -> None:
    # A turn skipped on a quiet loop checks the task's scopes without anyio's calls
    # (checkpoint_if_cancelled, its properties, two a scope, and the task's look-up).
    import cProfile
    import pstats

    from pytest_graphflow._time import _sched

    async def node(state: S) -> dict[str, list[str]]:
        for _ in range(20):
            await anyio.sleep(1)
        return {"seen": ["slept"]}

    _run(node)  # warm
    profile = cProfile.Profile()
    profile.enable()
    _run(node)
    profile.disable()
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    # anyio's check, once a turn before (21: the start and 20 sleeps)
    asked = sum(n for (path, _, name), (_, n, *_) in stats.items()
                if name == "checkpoint_if_cancelled" and "anyio" in path)
    assert asked == 0, asked
    assert _sched._scopes_known
