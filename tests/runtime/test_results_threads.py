"""Seed 001 results (``GraphResult``) and stream views; SPEC §2 threads, tenants and claims."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_graphflow import (
    END,
    START,
    Graph,
    GraphResult,
    MidExecution,
    NodeFailed,
    Resume,
    StreamEvent,
    TenantMismatch,
    ThreadBusy,
    ThreadSuspended,
    emit,
)

from .conftest import Boom, S, Script, chain_graph, collect, fan_graph, of, run, runtime, snapshot

pytestmark = pytest.mark.anyio


# -- GraphResult ------------------------------------------------------------------------------


async def test_result_of_a_completed_run() -> None:
    """Seed 001 GraphResult: "state: Final state as the declared schema type." "step:
    Superstep in which the run finished or paused, counted from 0." "data: Final state as a
    plain dict." "thread_id: Thread the run used." "checkpoint_id: Id of the run's last history
    event." "status: "completed" ..." "interrupts: Pending interrupts by Interrupt.key." """
    rt = runtime()
    events, result = await run(rt, chain_graph(Script()), {"n": 3})
    assert isinstance(result, GraphResult)
    assert isinstance(result.state, S)
    assert result.state == S(log=["one", "two", "three"], n=3)
    assert result.data == result.state.model_dump(mode="json") == events[-1].state
    assert result.status == "completed"
    assert result.step == 2  # three sequential steps: 0, 1, 2
    assert result.run_id == events[0].run_id
    assert result.run_id.startswith("run-")
    assert result.thread_id == events[0].thread_id
    assert result.thread_id.startswith("thread-")
    assert result.checkpoint_id == of(events, "checkpoint_saved")[-1].checkpoint_id
    latest = await rt.store.latest(result.run_id)
    assert latest is not None
    assert latest.id == result.checkpoint_id
    assert result.interrupts == {}
    assert result.error is None
    assert result.raise_for_status() is result


async def test_result_of_a_paused_run() -> None:
    """Seed 001 GraphResult: "status: "completed" or "interrupted"", "step: Superstep in which
    the run ... paused", "interrupts: Pending interrupts by Interrupt.key." """
    rt = runtime()
    events, result = await run(rt, chain_graph(Script(interrupts={"two"})))
    assert result.status == "interrupted"
    assert result.step == 1
    (event,) = of(events, "interrupt")
    assert result.interrupts == {i.key: i for i in event.interrupts}
    assert result.checkpoint_id == of(events, "checkpoint_saved")[-1].checkpoint_id
    assert result.data["log"] == ["one"]
    assert result.error is None


async def test_result_of_a_failed_run_carries_the_error() -> None:
    """SPEC §6: a node that raises ends the run with ``NodeFailed`` (the node's exception as
    ``__cause__``), an ``error`` event, ``run_end`` status ``failed``, a resumable checkpoint,
    and ``GraphResult.error``; ``result.raise_for_status()`` raises it."""
    boom = Boom("kaput")
    rt = runtime()
    events, result = await run(rt, chain_graph(Script(fails={"two": boom})))
    assert result.status == "failed"
    assert isinstance(result.error, NodeFailed)
    assert result.error.__cause__ is boom
    assert "two" in str(result.error)
    (error,) = of(events, "error")
    assert error.node == "two"
    assert error.error_type in ("Boom", "NodeFailed")
    assert "kaput" in error.message
    assert events[-1].status == "failed"
    with pytest.raises(NodeFailed) as info:
        result.raise_for_status()
    assert info.value is result.error
    cp = await rt.store.latest(result.run_id)
    assert cp is not None
    assert cp.status == "failed"


async def test_result_data_is_a_copy() -> None:
    """Seed 001 stream events: "Events carry copies: changing them does not change the run."
    — the result's ``data`` and ``state`` as well."""
    rt = runtime()
    _, result = await run(rt, chain_graph(Script()))
    result.data["log"].append("hacked")
    result.state.log.append("hacked")
    cp = await rt.store.latest(result.run_id)
    assert cp is not None
    assert cp.state["log"] == ["one", "two", "three"]


# -- stream views (seed 001 StreamEvent) --------------------------------------------------------


async def test_stream_modes_give_seed_001_views() -> None:
    """Seed 001 StreamEvent: "updates" carries "A task's update dict", "values" "the merged
    state", "custom" "the emitted value", then the terminal "interrupt" or "final"."""

    def talk(state: S) -> dict[str, Any]:
        emit({"said": "hi"})
        return {"n": 1}

    g = Graph("modes", S)
    g.node("talk", talk)
    g.node("more", lambda s: {"log": ["more"]})
    g.edge(START, "talk").edge("talk", "more").edge("more", END)
    graph = g.compile()

    updates = await collect(runtime().stream(graph, mode="updates"))
    assert all(isinstance(e, StreamEvent) for e in updates)
    assert [(e.mode, e.node, e.data) for e in updates[:2]] == [
        ("updates", "talk", {"n": 1}), ("updates", "more", {"log": ["more"]})]
    final = updates[2]
    assert (final.mode, final.node, len(updates)) == ("final", None, 3)
    assert _field(final.data, "state") == {"log": ["more"], "n": 1, "answer": None,
                                           "answers": []}
    assert _field(final.data, "thread_id") == updates[0].run_id.replace("run-", "thread-")
    values = await collect(runtime().stream(graph, mode="values"))
    assert [e.data for e in values if e.mode == "values"] == [
        {"log": [], "n": 1, "answer": None, "answers": []},
        {"log": ["more"], "n": 1, "answer": None, "answers": []},
    ]
    custom = await collect(runtime().stream(graph, mode="custom"))
    assert next((e.mode, e.node, e.data) for e in custom) == ("custom", "talk", {"said": "hi"})
    paused = await collect(runtime().stream(chain_graph(Script(interrupts={"one"})),
                                            mode="updates"))
    assert paused[-1].mode == "interrupt"
    assert len(_field(paused[-1].data, "interrupts")) == 1


def _field(data: Any, name: str) -> Any:
    """A field of seed 001's ``FinalEventData``/``InterruptEventData`` (object or dict)."""
    return data[name] if isinstance(data, dict) else getattr(data, name)


# -- threads ----------------------------------------------------------------------------------


async def test_a_new_run_on_a_completed_thread_starts_from_its_last_state() -> None:
    """SPEC §2: "a new run on a thread that has completed runs starts from that thread's last
    state; by default each run gets a thread of its own." """
    rt = runtime()
    graph = chain_graph(Script())
    first = await rt.ainvoke(graph, {"n": 1}, thread_id="conversation")
    second = await rt.ainvoke(graph, {"n": 2}, thread_id="conversation")
    assert first.thread_id == second.thread_id == "conversation"
    assert first.run_id != second.run_id
    assert second.data["log"] == ["one", "two", "three"] * 2
    assert second.data["n"] == 2

    third = await rt.ainvoke(graph)
    fourth = await rt.ainvoke(graph)
    assert len({third.thread_id, fourth.thread_id, "conversation"}) == 3
    assert fourth.data["log"] == ["one", "two", "three"]


@pytest.mark.parametrize(("halt", "error"), [("interrupt", ThreadSuspended),
                                              ("fail", MidExecution)])
async def test_a_new_run_on_a_suspended_thread_is_refused(halt: str, error: type) -> None:
    """SPEC §6 / seed 004 ThreadSuspended: "start ... was called on a suspended thread; answer
    its interrupts with resume." A failed run left its thread mid-execution (seed 004
    MidExecution: "start was called on a thread whose latest checkpoint is mid-execution;
    use recover.")."""
    script = Script(interrupts={"two"} if halt == "interrupt" else set(),
                    fails={"two": Boom("x")} if halt == "fail" else {})
    rt = runtime()
    graph = chain_graph(script)
    paused = await rt.ainvoke(graph, thread_id="t")
    before = await snapshot(rt.store)
    with pytest.raises(error, match="resume" if halt == "interrupt" else "arecover"):
        await rt.ainvoke(graph, thread_id="t")
    assert await snapshot(rt.store) == before
    script.fails.clear()
    done = await rt.aresume(paused.run_id, Resume("ok") if halt == "interrupt" else None)
    assert done.status == "completed"
    script.interrupts.clear()
    again = await rt.ainvoke(graph, thread_id="t")
    assert again.status == "completed"


async def test_a_thread_belongs_to_one_tenant() -> None:
    """Seed 004 TenantMismatch: "The run's tenant is not the thread's ... None and Some
    differ. Nothing was changed." """
    rt = runtime()
    graph = chain_graph(Script())
    await rt.ainvoke(graph, thread_id="t", tenant_id="acme")
    before = await snapshot(rt.store)
    for other in ("globex", None):
        with pytest.raises(TenantMismatch):
            await rt.ainvoke(graph, thread_id="t", tenant_id=other)
    assert await snapshot(rt.store) == before
    ok = await rt.ainvoke(graph, thread_id="t", tenant_id="acme")
    assert ok.status == "completed"

    acme = runtime(tenant_id="acme")
    script = Script(interrupts={"one"})
    paused = await acme.ainvoke(chain_graph(script), thread_id="p")
    before = await snapshot(acme.store)
    with pytest.raises(TenantMismatch):
        await acme.aresume(paused.run_id, Resume("x"), tenant_id="globex")
    with pytest.raises(TenantMismatch):
        await acme.aresume(paused.run_id, Resume("x"), tenant_id=None)
    assert await snapshot(acme.store) == before
    assert (await acme.aresume(paused.run_id, Resume("x"))).status == "completed"


async def test_a_held_thread_is_busy() -> None:
    """Seed 004 ThreadBusy: "Another run holds the thread: it is still executing in this
    runtime ... Nothing was accepted or discarded - retry once that run has suspended or
    completed"."""
    rt = runtime()
    graph = chain_graph(Script(), policy="on_halt")
    async with rt.stream(graph, thread_id="t") as first:
        assert (await first.__anext__()).type == "run_start"
        with pytest.raises(ThreadBusy):
            await rt.ainvoke(graph, thread_id="t")
        rest = await collect(first)
    assert rest[-1].status == "completed"
    assert (await rt.ainvoke(graph, thread_id="t")).status == "completed"


async def test_a_held_thread_is_busy_also_after_its_first_checkpoint() -> None:
    """Seed 004 ThreadBusy: "Another run holds the thread: it is still executing in this
    runtime" — the live run has saved a mid-execution checkpoint, but it is still executing:
    the thread is busy (retry later), not a thread to ``recover`` (``MidExecution``)."""
    rt = runtime()
    graph = chain_graph(Script())  # every_step: a checkpoint is saved at the start
    async with rt.stream(graph, thread_id="t") as first:
        seen = [await first.__anext__(), await first.__anext__()]
        assert [e.type for e in seen] == ["run_start", "checkpoint_saved"]
        with pytest.raises((ThreadBusy, MidExecution)) as info:
            await rt.ainvoke(graph, thread_id="t")
        await collect(first)
    assert type(info.value) is ThreadBusy


async def test_a_run_still_executing_is_not_resumed_a_second_time() -> None:
    """Seed 004 ThreadBusy: "Another run holds the thread: it is still executing in this
    runtime" — resuming a run whose first leg is still executing would run its nodes twice
    (seed 002: "a retry cannot silently duplicate the operation")."""
    script = Script()
    rt = runtime()
    async with rt.stream(chain_graph(script)) as live:
        start = await live.__anext__()
        assert (await live.__anext__()).type == "checkpoint_saved"
        with pytest.raises(ThreadBusy):
            await rt.aresume(start.run_id)
        await collect(live)
    assert script.called() == ["one", "two", "three"]


async def test_parallel_run_result_merges_the_batch() -> None:
    """A run with a parallel batch returns the merged state (sanity for the fan graph)."""
    _, result = await run(runtime(seed=5), fan_graph(Script(sleeps={"a": 2})))
    assert result.data["log"] == ["plan", "a", "b", "c", "join"]
