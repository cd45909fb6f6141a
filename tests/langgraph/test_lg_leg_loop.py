"""Each harness leg runs on its thread's seeded loop, reused from leg to leg.

Nothing of one leg runs in the next (a task a node left behind is cancelled when its leg
ends), a node's own socket is still served, a harness is freed as soon as the test drops it
(no reference cycle waits for the garbage collector), and a sync call from inside a running
event loop says what to await instead.
"""

from __future__ import annotations

import asyncio
import gc
import operator
import os
import socket
import weakref
from typing import Annotated, Any, TypedDict

import pytest
from graphs import approval, fan_out
from langgraph.graph import END, START, StateGraph

from pytest_graphflow.errors import SyncCallInEventLoop
from pytest_graphflow.langgraph import LangGraphHarness


class Notes(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


def test_a_task_a_node_left_behind_is_cancelled_with_its_leg() -> None:
    seen: list[str] = []

    async def later() -> None:
        try:
            await asyncio.sleep(10)
            seen.append("ran")
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise

    async def fire_and_forget(state: Notes) -> dict[str, Any]:
        asyncio.get_running_loop().create_task(later())  # never awaited
        return {"log": ["fired"]}

    g = StateGraph(Notes)
    g.add_node("fire", fire_and_forget)
    g.add_edge(START, "fire")
    g.add_edge("fire", END)

    first = LangGraphHarness(g, seed=0)
    assert first.trace({"log": []}).result.status == "completed"
    assert seen == ["cancelled"]
    assert first.clock.elapsed == 0.0  # the leg did not wait for the stray task

    # the next leg, on the same thread's loop, runs its own work only
    second = LangGraphHarness(fan_out({"a": 30.0, "b": 0.0, "c": 0.0}), seed=0)
    assert second.trace({"log": []}).result.data["log"] == ["a", "b", "c", "join"]
    assert seen == ["cancelled"]
    assert second.clock.elapsed == 30.0


def test_a_node_reading_its_own_socket_gets_its_bytes() -> None:
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)

    async def listen(state: Notes) -> dict[str, Any]:
        data = await asyncio.get_running_loop().sock_recv(reader, 5)
        return {"log": [f"heard {data.decode()}"]}

    async def talk(state: Notes) -> dict[str, Any]:
        await asyncio.get_running_loop().sock_sendall(writer, b"hello")
        return {"log": ["said"]}

    g = StateGraph(Notes)
    g.add_node("listen", listen)
    g.add_node("talk", talk)
    g.add_edge(START, "listen")
    g.add_edge(START, "talk")
    g.add_edge("listen", END)
    g.add_edge("talk", END)
    try:
        for seed in range(4):  # the seed picks which starts first; both orders finish
            done = LangGraphHarness(g, seed=seed).trace({"log": []}).result
            assert done.status == "completed"
            assert sorted(done.data["log"]) == ["heard hello", "said"]
    finally:
        reader.close()
        writer.close()


def test_a_dropped_harness_is_freed_without_the_garbage_collector() -> None:
    # (a leg that paused at an interrupt leaves LangGraph's own exception cycles, which
    # the collector frees; a completed run leaves none)
    gc.collect()
    gc.disable()
    try:
        h = LangGraphHarness(fan_out({"a": 2.0, "b": 1.0, "c": 0.0}), seed=3)
        h.trace({"log": []})
        harness, saver, graph = weakref.ref(h), weakref.ref(h.saver), weakref.ref(h.graph)
        del h
        assert harness() is None
        assert saver() is None
        assert graph() is None
    finally:
        gc.enable()


def test_update_state_through_the_harness_graph_still_works_after_the_harness_is_gone(
) -> None:
    h = LangGraphHarness(approval(), seed=1)
    h.trace({"log": []})
    graph, config = h.graph, {"configurable": {"thread_id": h.thread_id}}
    del h
    gc.collect()
    saved = graph.update_state(config, {"log": ["edited"]})
    assert saved["configurable"]["thread_id"] == config["configurable"]["thread_id"]
    assert graph.get_state(config).values["log"][-1] == "edited"


@pytest.mark.anyio
async def test_trace_inside_a_running_event_loop_says_to_await_atrace() -> None:
    h = LangGraphHarness(approval(), seed=0)
    with pytest.raises(SyncCallInEventLoop, match=r"await h\.atrace"):
        h.trace({"log": []})
    paused = await h.atrace({"log": []})  # the async twin works from here
    assert paused.result.status == "interrupted"


def test_a_forked_child_and_its_parent_both_run_legs_after_the_fork() -> None:
    def run() -> list[str]:
        return list(LangGraphHarness(fan_out({"a": 5.0, "b": 1.0, "c": 0.0}),
                                     seed=2).trace({"log": []}).result.data["log"])

    before = run()  # this thread's loop exists now
    pid = os.fork()
    if pid == 0:  # the child makes a loop of its own, leaving the parent's alone
        try:
            os._exit(0 if run() == before else 1)
        finally:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert run() == before  # the parent's loop still works
