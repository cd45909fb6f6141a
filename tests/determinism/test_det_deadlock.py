"""Issue 4: "When every task waits and no timer is pending, the run fails at once with an
error naming the waiting nodes instead of hanging." — on a loop the runtime owns (sync API),
also for waits that are not sleeps: an event, a lock or a queue nothing will feed.
"""

from __future__ import annotations

import time

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, GraphRuntime, VirtualClock, VirtualDeadlock


class S(BaseModel):
    x: int = 0


def _graph(*nodes: tuple[str, object]) -> object:
    g = Graph("deadlock", S)
    for name, fn in nodes:
        g.node(name, fn)  # type: ignore[arg-type]
        g.edge(name, END)
    g.edge(START, [name for name, _ in nodes])
    return g.compile()


async def waits_for_nothing(state: S) -> dict[str, int]:
    await anyio.Event().wait()
    return {"x": 1}


async def sleeps_a_second(state: S) -> None:
    await anyio.sleep(1)


async def reads_an_empty_stream(state: S) -> None:
    send, receive = anyio.create_memory_object_stream[int](1)
    async with send, receive:
        await receive.receive()


async def waits_for_a_thread(state: S) -> dict[str, int]:
    await anyio.to_thread.run_sync(time.sleep, 0.3)
    return {"x": 2}


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("node", [waits_for_nothing, reads_an_empty_stream],
                         ids=["event", "stream"])
def test_a_wait_nothing_can_end_fails_the_run_with_virtual_deadlock(backend, node):
    graph = _graph(("stuck", node), ("sibling", sleeps_a_second))
    runtime = GraphRuntime(clock=VirtualClock(), seed=0, backend=backend)

    started = time.perf_counter()
    result = runtime.invoke(graph, {})
    took = time.perf_counter() - started

    assert result.status == "failed"
    assert isinstance(result.error, VirtualDeadlock)
    assert "stuck" in str(result.error)
    assert took < 5  # a bounded grace, not a hang


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_worker_thread_is_waited_for_not_called_a_deadlock(backend):
    graph = _graph(("thread", waits_for_a_thread), ("sibling", sleeps_a_second))
    runtime = GraphRuntime(clock=VirtualClock(), seed=0, backend=backend)

    result = runtime.invoke(graph, {})

    assert result.status == "completed"
    assert result.data == {"x": 2}
    assert runtime.clock.elapsed == 1.0  # the thread moved no virtual time
