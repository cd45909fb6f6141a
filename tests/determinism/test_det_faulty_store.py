"""Issue 4 — ``FaultyStore(inner)`` rules exercised through runs: rejected saves, failing
operations, delays in virtual time, simulated crashes with recovery by a fresh runtime, and
the call log. After each, the test asserts what the inner store holds."""

from __future__ import annotations

import operator
import time
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

import pytest_graphflow
from pytest_graphflow import (
    END,
    START,
    Graph,
    GraphRuntime,
    InMemoryCheckpointStore,
    Reducer,
    SimulatedCrash,
    StoreFault,
    ThreadBusy,
    VirtualClock,
)
from pytest_graphflow._stores.faults import _store as _faulty

pytestmark = pytest.mark.anyio

FaultyStore = getattr(pytest_graphflow, "FaultyStore", None) or _faulty.FaultyStore
T0 = datetime(2025, 1, 1, tzinfo=UTC)


class S(BaseModel):
    log: Annotated[list[str], Reducer(operator.add)] = []


def chain(calls: list[str]) -> Any:
    def step(name: str) -> Any:
        def fn(s: S) -> dict[str, Any]:
            calls.append(name)
            return {"log": [name]}

        return fn

    g = Graph("chain", S)
    for name in "abc":
        g.node(name, step(name))
    g.edge(START, "a")
    g.edge("a", "b")
    g.edge("b", "c")
    g.edge("c", END)
    return g.compile()


def faulty_runtime(seed: int = 0) -> tuple[Any, InMemoryCheckpointStore, GraphRuntime]:
    inner = InMemoryCheckpointStore()
    store = FaultyStore(inner)
    return store, inner, GraphRuntime(store=store, clock=VirtualClock(start=T0), seed=seed)


async def drain(stream: Any, into: list[Any]) -> None:
    async for event in stream:
        into.append(event)


async def held(inner: InMemoryCheckpointStore, run_id: str | None = None) -> list[str]:
    return [cp.id for cp in await inner.list(run_id)]


def test_faulty_store_is_public_api() -> None:
    # SPEC §7 names FaultyStore(inner) as public API, next to VirtualClock.
    assert "FaultyStore" in pytest_graphflow.__all__
    assert pytest_graphflow.FaultyStore is _faulty.FaultyStore


# ---------------------------------------------------------------- reject_save


async def test_rejected_nth_save_ends_the_run_and_the_store_keeps_what_it_held() -> None:
    store, inner, rt = faulty_runtime()
    store.reject_save(nth=3)
    events: list[Any] = []
    with pytest.raises(StoreFault) as info:
        await drain(rt.stream(chain([]), {}), events)

    run_id = events[0].run_id
    saved = [e.checkpoint_id for e in events if e.type == "checkpoint_saved"]
    assert await held(inner, run_id) == saved  # exactly what was saved before
    assert len(saved) == 2
    rejected = [c for c in store.calls if c.outcome == "rejected"]
    assert len(rejected) == 1
    assert rejected[0].op == "save"
    assert rejected[0].injected
    assert repr(info.value) == rejected[0].error
    assert store.saves == saved
    assert rt.run_record(run_id).status == "failed"


async def test_rejected_save_raises_the_given_error_itself() -> None:
    store, inner, rt = faulty_runtime()
    error = OSError("disk full")
    store.reject_save(when=lambda cp: cp.status == "completed", error=error)
    calls: list[str] = []
    with pytest.raises(OSError, match="disk full") as info:
        await rt.ainvoke(chain(calls), {})

    assert info.value is error  # the store's own exception, never wrapped (C6)
    assert calls == ["a", "b", "c"]
    statuses = [cp.status for cp in await inner.list()]
    assert statuses
    assert "completed" not in statuses
    assert [c.outcome for c in store.calls if c.op == "save"][-1] == "rejected"

    # resume by run id continues from the last checkpoint the store saved (C8)
    store.clear_rules()
    run_id = (await inner.list())[0].run_id
    resumed = await rt.aresume(run_id)
    assert resumed.status == "completed"
    assert resumed.data == {"log": ["a", "b", "c"]}
    assert calls == ["a", "b", "c", "c"]
    assert (await inner.latest(run_id)).status == "completed"


async def test_reject_every_second_save_across_runs() -> None:
    store, inner, rt = faulty_runtime()
    store.reject_save(every=2)
    graph = chain([])
    for _ in range(2):
        with pytest.raises(StoreFault):
            await rt.ainvoke(graph, {})

    runs = [r.run_id for r in rt.runs]
    assert len(runs) == 2
    for run_id in runs:
        assert len(await held(inner, run_id)) == 1
    assert [c.outcome for c in store.calls if c.op == "save"] == [
        "ok", "rejected", "ok", "rejected"]


# ---------------------------------------------------------------- fail


async def test_failing_latest_makes_resume_raise_and_changes_nothing() -> None:
    store, inner, rt = faulty_runtime()
    first = await rt.ainvoke(chain([]), {}, max_supersteps=1)
    assert first.status == "failed"
    before = [(cp.id, cp.status) for cp in await inner.list()]

    store.fail("latest", nth=1)
    with pytest.raises(StoreFault):
        await rt.aresume(first.run_id, max_supersteps=10)

    assert [(cp.id, cp.status) for cp in await inner.list()] == before
    failed = [c for c in store.calls if c.outcome == "failed"]
    assert [c.op for c in failed] == ["latest"]
    # the rule fired once: the next resume goes through
    done = await rt.aresume(first.run_id, max_supersteps=10)
    assert done.status == "completed"


async def test_failing_list_makes_history_raise() -> None:
    store, inner, rt = faulty_runtime()
    result = await rt.ainvoke(chain([]), {})
    store.fail("list", error=ConnectionError("store unreachable"))
    with pytest.raises(ConnectionError):
        await rt.history(result.run_id)
    assert len(await held(inner, result.run_id)) == 4


# ---------------------------------------------------------------- delay


async def test_delayed_saves_show_up_in_event_times() -> None:
    store, inner, rt = faulty_runtime()
    store.delay("save", 5)
    trace = await rt.atrace(chain([]), {})

    saves = [c for c in store.calls if c.op == "save"]
    assert len(saves) == 4
    assert all(c.delay == 5 and c.outcome == "ok" for c in saves)
    assert rt.clock.elapsed == 20.0  # virtual: 4 saves x 5 s
    times = [e.time for e in trace.events]
    assert times == sorted(times)
    assert trace.events[-1].time == T0 + timedelta(seconds=20)
    assert len({e.time for e in trace.events}) == 4
    # the store holds every checkpoint, stamped on the virtual clock
    stamps = [cp.timestamp for cp in await inner.list(trace.result.run_id)]
    assert stamps == [T0 + timedelta(seconds=5 * k) for k in range(4)]


async def test_delays_take_no_real_time() -> None:
    store, _inner, rt = faulty_runtime()
    store.delay("save", 3600)
    t0 = time.perf_counter()
    result = await rt.ainvoke(chain([]), {})
    assert time.perf_counter() - t0 < 5.0  # a generous bound: four real hours cannot pass
    assert result.status == "completed"
    assert rt.clock.elapsed == 4 * 3600


async def test_trace_store_log_lists_the_runs_store_calls() -> None:
    store, _inner, rt = faulty_runtime()
    store.delay("save", 1)
    trace = await rt.atrace(chain([]), {})
    logged = [(c.op, c.outcome) for c in trace.store_log if c.op == "save"]
    assert logged == [("save", "ok")] * 4


# ---------------------------------------------------------------- crash_at


@pytest.mark.parametrize(("phase", "kept"), [("before", 2), ("after", 3)])
async def test_crash_then_a_fresh_runtime_over_the_inner_store_recovers(
    phase: str, kept: int,
) -> None:
    before_real = datetime.now()
    calls: list[str] = []
    graph = chain(calls)
    oracle = await GraphRuntime(clock=VirtualClock(start=T0), seed=0).ainvoke(chain([]), {})
    store, inner, rt = faulty_runtime()
    store.crash_at("save", nth=3, phase=phase)

    events: list[Any] = []
    with pytest.raises(SimulatedCrash):
        await drain(rt.stream(graph, {}), events)

    run_id = events[0].run_id
    ids = await held(inner, run_id)
    assert len(ids) == kept
    assert store.dead
    assert store.crash is not None
    assert store.crash.op == "save"
    assert abs(datetime.now() - before_real) < timedelta(hours=1)  # wall clock restored

    # nothing after the crash reaches the store
    with pytest.raises(SimulatedCrash):
        await rt.ainvoke(graph, {})
    assert await held(inner) == ids
    assert store.calls[-1].outcome == "dead"

    clock = VirtualClock(start=T0)
    fresh = GraphRuntime(store=inner, clock=clock, seed=0)
    calls_before = list(calls)
    # SPEC §5: the dead process's claim holds the thread until it expires (claim_ttl on the
    # claiming runtime's clock); then the thread is handed over.
    with pytest.raises(ThreadBusy, match="once its claim has expired"):
        await fresh.aresume(run_id, graph=graph)
    assert calls == calls_before
    assert await held(inner) == ids
    clock.advance(30)
    recovered = await fresh.aresume(run_id, graph=graph)

    assert recovered.status == "completed"
    assert recovered.data == oracle.data
    assert recovered.run_id == run_id
    latest = await inner.latest(run_id)
    assert latest is not None
    assert latest.status == "completed"
    assert (await held(inner, run_id))[:kept] == ids
    # only the work after the last durable checkpoint ran again
    assert calls_before == ["a", "b"]
    assert calls[len(calls_before):] == (["b", "c"] if phase == "before" else ["c"])


async def test_call_log_records_every_call_with_its_outcome() -> None:
    store, _inner, rt = faulty_runtime()
    store.reject_save(nth=2)
    with pytest.raises(StoreFault):
        await rt.ainvoke(chain([]), {})

    log = store.calls
    assert [c.index for c in log] == list(range(len(log)))
    saves = [(c.op, c.outcome) for c in log if c.op == "save"]
    assert saves == [("save", "ok"), ("save", "rejected")]
    assert all(c.outcome != "pending" for c in log)
    assert all(c.time is not None for c in log)  # on the runtime's virtual clock
    assert "rejected" in store.format_calls()
