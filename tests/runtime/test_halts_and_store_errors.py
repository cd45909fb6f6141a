"""Seed 000 ``stream`` halts and seed 003 ``save``: checkpoint-before-events (C5), rejected
saves (C6), edge functions that raise and expansions (C7)."""

from __future__ import annotations

import gc
import warnings
from typing import Any

import pytest

from pytest_graphflow import (
    END,
    START,
    EventBase,
    Expand,
    Graph,
    GraphRuntime,
    NodeContext,
    Resume,
    RunStream,
)

from .conftest import (
    SEEDS,
    Boom,
    RecordingStore,
    RejectingStore,
    S,
    Script,
    brief,
    chain_graph,
    collect,
    fan_graph,
    of,
    resume,
    run,
    runtime,
    types,
)

pytestmark = pytest.mark.anyio


async def raises_same(stream: RunStream, error: BaseException) -> list[EventBase]:
    """Consume ``stream``; it must raise ``error`` itself. Returns the events yielded before."""
    events: list[EventBase] = []
    raised: BaseException | None = None
    try:
        async for event in stream:
            events.append(event)
    except BaseException as exc:
        raised = exc
    assert raised is error, f"raised {raised!r}, not the same object as {error!r}"
    return events


# -- C5: checkpoint before events -----------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS[:4])
@pytest.mark.parametrize("halt", ["interrupt", "fail"])
async def test_halt_checkpoint_is_saved_before_any_event_of_the_halting_batch(
    seed: int, halt: str
) -> None:
    """Seed 000 stream: "When a node interrupts or fails, the checkpoint the run resumes from
    is saved before any event that reports the node's result is yielded" and "The
    checkpoint_saved event for that checkpoint comes after interrupt or error" (C5), in a batch
    where one node halts and two complete (C4)."""
    store = RecordingStore()
    script = Script(sleeps={"a": 1, "c": 2})
    if halt == "interrupt":
        script.interrupts.add("b")
    else:
        script.fails["b"] = Boom("b broke")
    events: list[EventBase] = []

    def consumed(event: EventBase) -> None:
        events.append(event)
        store.consumed = len(events)

    await collect(runtime(seed=seed, store=store).stream(fan_graph(script)), consumed)
    kinds = types(events)
    reported = kinds.index(halt if halt == "interrupt" else "error")
    assert kinds[reported:] == [kinds[reported], "checkpoint_saved", "run_end"]
    halt_cp = events[reported + 1].checkpoint_id
    first_of_batch = next(i for i, e in enumerate(events) if e.step == 1)
    # save returned while the consumer had not yet seen any event of the batch
    assert store.saved_at[halt_cp] <= first_of_batch < reported
    saved = store.saved[-1]
    assert saved.id == halt_cp
    assert saved.status == ("interrupted" if halt == "interrupt" else "failed")
    assert [e.node for e in events[first_of_batch:reported + 1] if e.type == "node_start"] == [
        "a", "c", "b"]


@pytest.mark.parametrize("halt", ["interrupt", "error"])
async def test_consumer_that_stops_at_the_halt_resumes_by_run_start_run_id(halt: str) -> None:
    """Seed 000 stream: "so a consumer may stop iterating at interrupt or error and still
    resume the run", "so such a consumer resumes by the runId of run_start" — and leaving the
    stream with ``break`` warns about nothing (SPEC §2)."""
    script = Script(interrupts={"b"} if halt == "interrupt" else set())
    if halt == "error":
        script.fails["b"] = Boom("transient")
    rt = runtime(seed=2)
    graph = fan_graph(script)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_id = None
        seen: list[str] = []
        async for event in rt.stream(graph):
            seen.append(event.type)  # type: ignore[attr-defined]
            if event.type == "run_start":  # type: ignore[attr-defined]
                run_id = event.run_id
            if event.type == halt:  # type: ignore[attr-defined]
                break
        assert seen[-1] == halt
        assert "run_end" not in seen
        gc.collect()
        assert run_id is not None
        script.fails.clear()
        result = await rt.aresume(run_id, Resume("yes") if halt == "interrupt" else None)
        gc.collect()
    assert result.status == "completed"
    assert result.data["log"] == (["plan", "a", "b", "c", "join"])
    assert [str(w.message) for w in caught] == []


async def test_consumer_that_leaves_mid_run_can_resume_by_run_id() -> None:
    """SPEC §2: "stream() is safe to leave early ...: the run is finished or closed cleanly,
    with no warning" — leaving after the first node's events (no ``aclose``), the run resumes
    by its run id from its last checkpoint without re-running that node."""
    script = Script()
    rt = runtime()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        stream = rt.stream(chain_graph(script))
        run_id = None
        async for event in stream:
            run_id = event.run_id
            if event.type == "node_end":
                break
        del stream
        gc.collect()
        assert run_id is not None
        result = await rt.aresume(run_id)
        gc.collect()
    assert result.status == "completed"
    assert script.called() == ["one", "two", "three"]
    assert [str(w.message) for w in caught] == []


# -- C6: a save the store rejects -----------------------------------------------------------


@pytest.mark.parametrize("halt", ["interrupt", "fail"])
async def test_rejected_halt_save_raises_the_store_error_before_the_node_events(halt: str) -> None:
    """Seed 000 stream: "The checkpoint of a node that interrupts or fails is saved before the
    node's events, so when the store refuses it the error comes before them." Seed 003 save:
    "the run that asked for the checkpoint ends with the store's error, which
    GraphRuntime.stream() throws, and a resume by the run id continues from the last checkpoint
    the store saved." """
    refused = OSError("disk full")
    store = RejectingStore().reject(refused, when=lambda cp: cp.status != "running")
    script = Script()
    if halt == "interrupt":
        script.interrupts.add("two")
    else:
        script.fails["two"] = Boom("two broke")
    rt = runtime(store=store)
    events = await raises_same(rt.stream(chain_graph(script)), refused)
    assert all(e.step == 0 for e in events), brief(events)  # nothing of "two"'s step
    assert of(events, "node_start", "two") == []
    last_saved = await store.latest(events[0].run_id)
    assert last_saved is not None
    assert last_saved.id == events[-1].checkpoint_id
    assert script.count("two") == 1
    # seed 003: "The runtime awaits each save and does not retry one that rejects"
    assert len(store.rejected) == 1
    assert store.calls == len(of(events, "checkpoint_saved")) + 1

    store.clear()
    script.fails.clear()
    leg, result = await resume(rt, events[0].run_id)
    assert leg[0].resumed_from == last_saved.id  # the last checkpoint the store saved
    assert script.count("one") == 1
    assert script.count("two") == 2
    assert result.status == ("interrupted" if halt == "interrupt" else "completed")


@pytest.mark.parametrize("seed", SEEDS[:4])
@pytest.mark.parametrize("which", ["halt", "step"])
async def test_rejected_save_in_a_parallel_batch(seed: int, which: str) -> None:
    """C6: "In a parallel batch every other node runs to the end first, no event of the batch
    is yielded", and "the stream raises that same exception". Seed 003: "When a save inside a
    parallel batch rejects, the run ends with the error once the batch's other nodes have
    finished." """
    refused = ConnectionError("store went away")
    store = RejectingStore()
    script = Script(sleeps={"a": 3, "c": 5})
    if which == "halt":
        script.interrupts.add("b")  # b halts at once; a and c are still sleeping
        store.reject(refused, when=lambda cp: cp.status == "interrupted")
    else:
        store.reject(refused, when=lambda cp: cp.step == 1)
    events = await raises_same(runtime(seed=seed, store=store).stream(fan_graph(script)),
                               refused)
    assert sorted(script.finished) == (["a", "c", "plan"] if which == "halt"
                                       else ["a", "b", "c", "plan"])
    assert [e for e in events if e.step >= 1] == []
    assert "join" not in script.called()


@pytest.mark.parametrize("seed", SEEDS[:4])
async def test_first_error_in_declared_order_wins_two_edge_errors(seed: int) -> None:
    """C6/C7: "the error raised is the first in declared order" — two edge functions of one
    batch raise; the later-declared one raises first in time."""
    eb, ec = Boom("b's edge"), Boom("c's edge")
    script = Script(sleeps={"b": 4}, edge_errors={"b": eb, "c": ec})
    graph = fan_graph(script, routed=("b", "c"))
    events = await raises_same(runtime(seed=seed).stream(graph), eb)
    assert sorted(script.finished) == ["a", "b", "c", "plan"]
    assert [e for e in events if e.step >= 1] == []


@pytest.mark.parametrize("seed", SEEDS[:3])
async def test_first_error_in_declared_order_wins_rejected_save_before_edge_error(
    seed: int,
) -> None:
    """C6: "the error raised is the first in declared order" — "a" (declared first) interrupts
    and the store rejects its checkpoint; "c" (declared later) has an edge function that raises.
    The store's error is the first in declared order."""
    refused = OSError("rejected a's checkpoint")
    ec = Boom("c's edge")
    store = RejectingStore().reject(refused, when=lambda cp: cp.status == "interrupted")
    script = Script(interrupts={"a"}, edge_errors={"c": ec}, sleeps={"c": 2})
    graph = fan_graph(script, routed=("c",))
    events = await raises_same(runtime(seed=seed, store=store).stream(graph), refused)
    assert sorted(script.finished) == ["b", "c", "plan"]
    assert [e for e in events if e.step >= 1] == []


@pytest.mark.parametrize("seed", SEEDS[:3])
async def test_first_error_in_declared_order_wins_edge_error_before_rejected_save(
    seed: int,
) -> None:
    """C6/C7: "the error raised is the first in declared order" — "a" (declared first) has an
    edge function that raises; "c" interrupts and its checkpoint would be rejected."""
    refused = OSError("rejected c's checkpoint")
    ea = Boom("a's edge")
    store = RejectingStore().reject(refused, when=lambda cp: cp.status == "interrupted")
    script = Script(interrupts={"c"}, edge_errors={"a": ea}, sleeps={"a": 2})
    graph = fan_graph(script, routed=("a",))
    events = await raises_same(runtime(seed=seed, store=store).stream(graph), ea)
    assert sorted(script.finished) == ["a", "b", "plan"]
    assert [e for e in events if e.step >= 1] == []


async def test_invoke_and_resume_raise_the_store_and_edge_errors_themselves() -> None:
    """Seed 000 invoke/resume/resumeStream "Throws: The error of a checkpoint save the store
    refuses, or of a conditional edge's function that throws, as () throws it." """
    refused = OSError("no space on store")
    store = RejectingStore().reject(refused, nth=2)
    with pytest.raises(OSError, match="no space on store") as info:
        await runtime(store=store).ainvoke(chain_graph(Script()))
    assert info.value is refused

    edge = Boom("route broke")
    script = Script(edge_errors={"two": edge})
    with pytest.raises(Boom) as info2:
        await runtime().ainvoke(chain_graph(script, routed=("two",)))
    assert info2.value is edge

    # the same on resume: a paused run whose next save is refused, or whose edge raises
    store = RejectingStore()
    rt = runtime(store=store)
    paused = await rt.ainvoke(chain_graph(Script(interrupts={"one"}), routed=("one",)))
    assert paused.status == "interrupted"
    store.reject(refused)
    with pytest.raises(OSError, match="no space on store") as info3:
        await rt.aresume(paused.run_id, Resume("x"))
    assert info3.value is refused
    store.clear()
    script = Script(interrupts={"one"})
    rt = runtime()
    paused = await rt.ainvoke(chain_graph(script, routed=("one",)))
    script.edge_errors["one"] = edge
    with pytest.raises(Boom) as info4:
        await collect(rt.resume_stream(paused.run_id, Resume("x")))
    assert info4.value is edge


def test_sync_invoke_raises_the_store_error_itself(anyio_backend: str) -> None:
    """Seed 000 invoke "Throws: The error of a checkpoint save the store refuses" — through
    the synchronous API, on either backend."""
    refused = OSError("no space on store")
    store = RejectingStore().reject(refused, nth=3)
    rt = GraphRuntime(store=store, clock=runtime().clock, seed=1, backend=anyio_backend)
    with pytest.raises(OSError, match="no space on store") as info:
        rt.invoke(chain_graph(Script()))
    assert info.value is refused


# -- C7: an edge function that raises --------------------------------------------------------


@pytest.mark.parametrize("effect", ["pure", "write"])
async def test_edge_function_that_raises_ends_the_run_with_that_exception(effect: str) -> None:
    """Seed 000 stream: "a function on a conditional edge that throws ends the run: the
    generator throws that error where the runtime ... evaluated the edge"; "a node whose edges
    threw is in no checkpoint as completed" (C7); "A resume by the runId of run_start continues
    from the last checkpoint the store saved." """
    edge = Boom("no route")
    script = Script(edge_errors={"two": edge})
    rt = runtime()
    graph = chain_graph(script, routed=("two",), effects={"two": effect})
    events = await raises_same(rt.stream(graph), edge)
    run_id = events[0].run_id
    assert of(events, "run_end") == []
    for cp in await rt.store.list(run_id):
        assert "two" not in cp.visited
        assert all(out.node != "two" for out in cp.completed.values())
        assert cp.status == "running"
    last = await rt.store.latest(run_id)
    assert last is not None
    assert last.id == of(events, "checkpoint_saved")[-1].checkpoint_id

    script.edge_errors.clear()
    leg, result = await resume(rt, run_id)
    assert leg[0].resumed_from == last.id
    assert script.called() == ["one", "two", "two", "three"]  # "two" re-runs, even a write
    assert [e.replayed for e in of(leg, "node_end", "two")] == [False]
    assert result.status == "completed"


@pytest.mark.parametrize("seed", SEEDS[:3])
async def test_edge_error_in_a_parallel_batch_records_no_node_of_it(seed: int) -> None:
    """Seed 000 stream: "a node of the batch counts as completed only once its edges are
    decided, so a node whose edges threw is in no checkpoint as completed"; every other node of
    the batch runs to the end first and no event of the batch is yielded (C6/C7)."""
    edge = Boom("b cannot route")
    script = Script(edge_errors={"b": edge}, sleeps={"a": 2, "c": 4})
    effects = {"a": "write", "b": "write", "c": "external"}
    rt = runtime(seed=seed)
    graph = fan_graph(script, routed=("b",), effects=effects)
    events = await raises_same(rt.stream(graph), edge)
    assert sorted(script.finished) == ["a", "b", "c", "plan"]
    assert [e for e in events if e.step >= 1] == []
    for cp in await rt.store.list(events[0].run_id):
        assert "b" not in cp.visited
        assert all(out.node != "b" for out in cp.completed.values())

    script.edge_errors.clear()
    leg, result = await resume(rt, events[0].run_id)
    assert result.status == "completed"
    assert script.count("b") == 2
    assert [e.replayed for e in of(leg, "node_end", "b")] == [False]


# -- C7: expansions --------------------------------------------------------------------------


def expansion_graph(seen: list[dict[str, Any]], calls: list[str]) -> Any:
    async def split(state: S) -> Expand:
        calls.append("split")
        return Expand("work", [3, 1, 2])

    async def work(state: S, ctx: NodeContext) -> dict[str, Any]:
        import anyio

        seen.append({"item": ctx.item, "before": ctx.checkpoint_id_before})
        await anyio.sleep(ctx.item)
        return {"log": [f"item{ctx.item}"]}

    g = Graph("expand", S)
    g.node("split", split, destinations=["work"])
    g.node("work", work)
    g.node("done", lambda s: {"n": len(s.log)})
    g.edge(START, "split").edge("work", "done").edge("done", END)
    return g.compile()


@pytest.mark.parametrize("seed", SEEDS[:3])
async def test_checkpoint_before_an_expansion_does_not_list_the_expanding_node(seed: int) -> None:
    """Seed 000 stream: "The checkpoint saved before an expansion does not list the node the
    expansion came after as completed either"; C7: "``ctx.checkpoint_id_before`` in the
    expanded tasks names it: resuming from it re-runs the expanding node". SPEC §1: each task
    reads its item as ``ctx.item``; "their patches merge in item order"."""
    seen: list[dict[str, Any]] = []
    calls: list[str] = []
    rt = runtime(seed=seed)
    graph = expansion_graph(seen, calls)
    events, result = await run(rt, graph)
    assert result.status == "completed"
    assert sorted(s["item"] for s in seen) == [1, 2, 3]
    assert result.data["log"] == ["item3", "item1", "item2"]
    assert result.data["n"] == 3
    before = {s["before"] for s in seen}
    assert len(before) == 1
    (before_id,) = before
    assert before_id in [e.checkpoint_id for e in of(events, "checkpoint_saved")]
    cp = await rt.store.get(before_id)
    assert cp is not None
    split_task = of(events, "node_start", "split")[0].task_id
    assert "split" not in cp.visited
    assert split_task not in cp.completed
    assert [t.node for t in cp.tasks] == ["split"]

    leg, again = await resume(rt, before_id)
    assert calls == ["split", "split"]
    assert of(leg, "node_start", "split") != []
    assert again.data["log"] == ["item3", "item1", "item2"]
