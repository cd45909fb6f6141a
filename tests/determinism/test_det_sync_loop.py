"""Issue 10 — the sync API reuses one virtual event loop per thread, closed deterministically.

``invoke``/``resume``/``trace`` under a ``VirtualClock`` on asyncio run on the calling thread's
loop, pointed at each call's clock; what a call leaves behind is cancelled before it returns;
the loop is closed when its thread ends or the interpreter exits, with no ``ResourceWarning``.
"""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
import threading
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest
import sniffio
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, GraphRuntime, Resume, VirtualClock, interrupt


class S(BaseModel):
    seen: list[Any] = []


loops: list[asyncio.AbstractEventLoop] = []


async def records_loop(s: S) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    loops.append(loop)
    started = anyio.current_time()
    with anyio.move_on_after(5):
        await anyio.sleep(3600)
    return {"seen": [*s.seen, round(anyio.current_time() - started)]}


def loop_graph() -> Any:
    g = Graph("loop", S)
    g.node("a", records_loop).edge(START, "a").edge("a", END)
    return g.compile()


def test_calls_in_a_thread_share_one_loop_reading_each_calls_clock() -> None:
    loops.clear()
    first = GraphRuntime(clock=VirtualClock(), seed=0)
    second = GraphRuntime(clock=VirtualClock(start=datetime(2030, 1, 1, tzinfo=UTC)), seed=0)
    results = [rt.invoke(loop_graph()) for rt in (first, second, first)]
    assert [r.data["seen"] for r in results] == [[5], [5], [5]]  # virtual move_on_after
    assert loops[0] is loops[1] is loops[2]
    assert not loops[0].is_closed()
    assert (first.clock.elapsed, second.clock.elapsed) == (10, 5)


def test_tasks_a_call_leaves_behind_are_cancelled_before_it_returns() -> None:
    fate: list[str] = []

    async def forever() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            fate.append("cancelled")
            raise

    def leaves_a_task(s: S) -> None:
        asyncio.get_running_loop().create_task(forever())

    g = Graph("leaves", S)
    g.node("a", leaves_a_task).edge(START, "a").edge("a", END)
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    assert rt.invoke(g.compile()).status == "completed"
    assert fate == ["cancelled"]


def test_a_sync_node_of_a_sync_call_runs_in_the_calls_task_on_the_running_loop() -> None:
    """A leg of sync nodes takes no turn of the loop (issue 29), yet its nodes still see
    what they saw on one: the thread's running loop, the call's task, anyio on asyncio and
    the virtual clock's time."""
    seen: dict[str, Any] = {}

    def looks(s: S) -> None:
        loop = asyncio.get_running_loop()
        seen.update(loop=loop, running=loop.is_running(), task=asyncio.current_task(),
                    backend=sniffio.current_async_library(), now=anyio.current_time(),
                    loop_now=loop.time())

    g = Graph("looks", S)
    g.node("a", looks).edge(START, "a").edge("a", END)
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    assert rt.invoke(g.compile()).status == "completed"
    assert seen["running"] is True
    assert seen["task"] is not None
    assert seen["backend"] == "asyncio"
    assert seen["now"] == seen["loop_now"]
    with pytest.raises(RuntimeError):
        asyncio.get_running_loop()  # and none once the call returned
    assert not seen["loop"].is_running()
    assert rt.invoke(g.compile()).status == "completed"  # the same loop, again
    assert seen["loop"] is loops_of_thread()


def loops_of_thread() -> asyncio.AbstractEventLoop:
    """The thread's reused loop, as a node of a sync call sees it."""
    found: list[asyncio.AbstractEventLoop] = []
    g = Graph("which", S)
    g.node("a", lambda s: found.append(asyncio.get_running_loop())).edge(START, "a")
    g.edge("a", END)
    GraphRuntime(clock=VirtualClock(), seed=0).invoke(g.compile())
    return found[0]


def test_a_threads_loop_is_closed_when_the_thread_ends() -> None:
    loops.clear()
    done: list[str] = []

    def worker() -> None:
        done.append(GraphRuntime(clock=VirtualClock(), seed=0).invoke(loop_graph()).status)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    gc.collect()
    assert done == ["completed"]
    assert loops[0].is_closed()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_the_sync_api_refuses_a_running_loop() -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    with pytest.raises(RuntimeError, match="running event loop"):
        rt.invoke(loop_graph())


def test_interrupt_and_resume_on_the_reused_loop() -> None:
    def asks(s: S) -> dict[str, Any]:
        return {"seen": [interrupt("ok?", id="ok")]}

    g = Graph("ask", S)
    g.node("ask", asks).edge(START, "ask").edge("ask", END)
    graph = g.compile()
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    paused = rt.invoke(graph)
    assert paused.status == "interrupted"
    assert rt.resume(paused.run_id, Resume("yes")).data["seen"] == ["yes"]


EXIT_SCRIPT = """
import threading, warnings
from pydantic import BaseModel
from pytest_graphflow import END, START, Graph, GraphRuntime, VirtualClock
class S(BaseModel):
    n: int = 0
g = Graph("one", S)
g.node("a", lambda s: {"n": s.n + 1}).edge(START, "a").edge("a", END)
graph = g.compile()
def run():
    GraphRuntime(clock=VirtualClock(), seed=0).invoke(graph)
run()
threads = [threading.Thread(target=run) for _ in range(3)]
for t in threads: t.start()
for t in threads: t.join()
run()
print("ok")
"""


def test_no_resource_warning_at_thread_end_or_exit() -> None:
    """Under ``-X dev -W error``, an unclosed loop or socket would print a ResourceWarning (or
    an "Exception ignored") to stderr."""
    proc = subprocess.run([sys.executable, "-X", "dev", "-W", "error", "-c", EXIT_SCRIPT],
                          capture_output=True, text=True, timeout=120)
    assert (proc.returncode, proc.stdout.strip(), proc.stderr) == (0, "ok", "")


_CTRL_C = """
from pydantic import BaseModel
from pytest_graphflow import END, START, Graph, GraphRuntime, VirtualClock

class S(BaseModel):
    n: int = 0

async def interrupted(s):
    raise KeyboardInterrupt

g = Graph("ctrl-c", S)
g.node("a", interrupted).node("b", interrupted)
g.edge(START, ["a", "b"]).edge(["a", "b"], END)
rt = GraphRuntime(clock=VirtualClock(), seed=0)
try:
    rt.invoke(g.compile())
except KeyboardInterrupt:
    print("raised")
after = Graph("after", S).node("x", lambda s: {"n": 1}).edge(START, "x").edge("x", END)
print(rt.invoke(after.compile()).status)
"""


def test_a_keyboard_interrupt_in_an_async_node_is_raised_once_and_the_loop_goes_on() -> None:
    # The interruption reaches the caller, the next call runs on a new loop, and asyncio
    # prints nothing at exit ("Task exception was never retrieved" for the call's task).
    done = subprocess.run([sys.executable, "-c", _CTRL_C], capture_output=True, text=True,
                          check=True)
    assert done.stdout.split() == ["raised", "completed"]
    assert done.stderr == ""


def test_a_thread_loop_collected_while_another_loop_runs_is_still_closed() -> None:
    """A thread's loop can be collected on a thread that runs another loop (an async test,
    when the garbage collector frees a finished thread's loop): closing it there must not
    raise "Cannot run the event loop while another loop is running" from the collector, and
    its async generators are still finalised."""
    from pytest_graphflow._time._loops import _Holder
    from pytest_graphflow._time._vloop import VirtualEventLoop

    closed: list[str] = []

    async def gen() -> Any:
        try:
            yield 1
            yield 2
        finally:
            closed.append("gen")

    loop = VirtualEventLoop(VirtualClock())
    holder = _Holder(loop)

    async def start() -> Any:
        agen = gen()
        await agen.__anext__()  # left suspended: shutdown_asyncgens must close it
        return agen

    left = loop.run_until_complete(start())

    async def other_loop() -> None:
        holder.finalizer()  # raises here if the close runs on this thread's running loop

    asyncio.run(other_loop())
    assert loop.is_closed()
    assert closed == ["gen"]
    del left
