"""Issue 4 — the virtual clock: sleeps in nodes take no real time, ``datetime.now()`` and
``time.time()`` in node code read virtual time, nothing leaks after the run, a user's own
``freeze_time`` is the starting instant, worker threads never see time jump, and a run whose
tasks all wait forever fails at once with ``VirtualDeadlock``.

Real time is only measured here with ``time.perf_counter`` outside the run, with generous
bounds; nothing asserts an exact wall-clock value.
"""

from __future__ import annotations

import hashlib
import operator
import time
import types
from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Any

import anyio
import pytest
from freezegun import freeze_time
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Graph,
    GraphRuntime,
    Reducer,
    VirtualClock,
    VirtualDeadlock,
)

pytestmark = pytest.mark.anyio

START_AT = datetime(2001, 2, 3, 4, 5, 6, tzinfo=UTC)  # far from any real "now"
DAYS_30 = 30 * 86400
REAL_BOUND = 5.0  # "well under a second"; bounded generously for loaded machines, still
# below the shortest virtual wait measured here (10 s), so a real wait cannot pass


class S(BaseModel):
    log: Annotated[list[str], Reducer(operator.add)] = []
    seen: dict[str, Any] = {}


async def month_sleeper(s: S) -> dict[str, Any]:
    before = datetime.now()
    before_utc = datetime.now(UTC)
    await anyio.sleep(DAYS_30)
    return {"seen": {
        "before": before.isoformat(),
        "before_utc": before_utc.isoformat(),
        "after": datetime.now().isoformat(),
        "after_utc": datetime.now(UTC).isoformat(),
        "time": time.time(),
        "today": date.today().isoformat(),
    }}


def month_graph() -> Any:
    g = Graph("month", S)
    g.node("sleeper", month_sleeper)
    g.edge(START, "sleeper")
    g.edge("sleeper", END)
    return g.compile()


def check_month(rt: GraphRuntime, trace: Any, real: float) -> None:
    end_at = START_AT + timedelta(days=30)
    seen = trace.result.data["seen"]
    assert real < REAL_BOUND
    assert rt.clock.elapsed == DAYS_30
    # naive values are the virtual instant in the local time zone, as real ones are local
    assert datetime.fromisoformat(seen["before"]) == START_AT.astimezone().replace(tzinfo=None)
    assert datetime.fromisoformat(seen["after"]) == end_at.astimezone().replace(tzinfo=None)
    assert datetime.fromisoformat(seen["before_utc"]) == START_AT
    assert datetime.fromisoformat(seen["after_utc"]) == end_at
    assert seen["time"] == end_at.timestamp()
    assert seen["today"] == end_at.astimezone().date().isoformat()
    # event timestamps come from the same clock
    node_end = next(e for e in trace.events if e.type == "node_end")
    assert node_end.started_at == START_AT
    assert node_end.finished_at == end_at
    assert trace.events[0].time == START_AT
    assert trace.events[-1].time == end_at


def assert_real_time_again(before: datetime, before_ts: float) -> None:
    now = datetime.now()
    assert now.year != START_AT.year
    assert abs(now - before) < timedelta(hours=1)
    assert abs(time.time() - before_ts) < 3600
    assert abs(datetime.now(UTC) - datetime.fromtimestamp(before_ts, UTC)) < timedelta(hours=1)
    # the event loops' clocks were never left frozen (research pitfalls P1, P2)
    assert isinstance(time.monotonic, types.BuiltinFunctionType)
    assert isinstance(time.perf_counter, types.BuiltinFunctionType)


# ---------------------------------------------------------------- 30 virtual days


def test_thirty_virtual_days_sync(anyio_backend: str) -> None:
    before, before_ts = datetime.now(), time.time()
    rt = GraphRuntime(clock=VirtualClock(start=START_AT), seed=0, backend=anyio_backend)
    t0 = time.perf_counter()
    trace = rt.trace(month_graph(), {})
    real = time.perf_counter() - t0

    assert trace.result.status == "completed"
    check_month(rt, trace, real)
    assert_real_time_again(before, before_ts)


async def test_thirty_virtual_days_async() -> None:
    before, before_ts = datetime.now(), time.time()
    rt = GraphRuntime(clock=VirtualClock(start=START_AT), seed=0)
    t0 = time.perf_counter()
    trace = await rt.atrace(month_graph(), {})
    real = time.perf_counter() - t0

    assert trace.result.status == "completed"
    check_month(rt, trace, real)
    assert_real_time_again(before, before_ts)


async def test_backend_native_sleeps_are_virtual(anyio_backend: str) -> None:
    async def native(s: S) -> dict[str, Any]:
        if anyio_backend == "trio":
            import trio

            await trio.sleep(3600)
        else:
            import asyncio

            await asyncio.sleep(3600)
        from anyio import sleep

        await sleep(60)
        return {"seen": {"now": datetime.now().isoformat()}}

    g = Graph("native", S)
    g.node("n", native)
    g.edge(START, "n")
    g.edge("n", END)
    rt = GraphRuntime(clock=VirtualClock(start=START_AT), seed=0)
    t0 = time.perf_counter()
    result = await rt.ainvoke(g.compile(), {})

    assert time.perf_counter() - t0 < REAL_BOUND
    assert rt.clock.elapsed == 3660.0
    expected = (START_AT + timedelta(seconds=3660)).replace(tzinfo=None)
    assert datetime.fromisoformat(result.data["seen"]["now"]) == expected


# ---------------------------------------------------------------- nothing leaks


def raising_graph() -> Any:
    def route(s: S) -> str:
        raise KeyError("edge function failed")

    g = Graph("raising", S)
    g.node("sleeper", month_sleeper)
    g.edge(START, "sleeper")
    g.branch("sleeper", route, [END])
    return g.compile()


def test_wall_clock_is_real_again_after_a_run_that_raised(anyio_backend: str) -> None:
    before, before_ts = datetime.now(), time.time()
    rt = GraphRuntime(clock=VirtualClock(start=START_AT), seed=0, backend=anyio_backend)
    with pytest.raises(KeyError):
        rt.invoke(raising_graph(), {})
    assert rt.clock.elapsed == DAYS_30
    assert_real_time_again(before, before_ts)


async def test_wall_clock_is_real_again_after_a_run_that_raised_async() -> None:
    before, before_ts = datetime.now(), time.time()
    rt = GraphRuntime(clock=VirtualClock(start=START_AT), seed=0)
    with pytest.raises(KeyError):
        await rt.ainvoke(raising_graph(), {})
    assert_real_time_again(before, before_ts)


async def test_wall_clock_is_real_again_after_a_failed_run() -> None:
    async def fails(s: S) -> None:
        await anyio.sleep(DAYS_30)
        raise RuntimeError("node failed")

    g = Graph("fails", S)
    g.node("fails", fails)
    g.edge(START, "fails")
    g.edge("fails", END)
    before, before_ts = datetime.now(), time.time()
    result = await GraphRuntime(clock=VirtualClock(start=START_AT), seed=0).ainvoke(
        g.compile(), {})
    assert result.status == "failed"
    assert_real_time_again(before, before_ts)


async def test_code_outside_nodes_keeps_real_time_during_a_run() -> None:
    gate = anyio.Event()
    inside: list[datetime] = []

    async def waits(s: S) -> None:
        await anyio.sleep(3600)
        inside.append(datetime.now())
        await gate.wait()

    g = Graph("outside", S)
    g.node("waits", waits)
    g.edge(START, "waits")
    g.edge("waits", END)
    before = datetime.now()
    rt = GraphRuntime(clock=VirtualClock(start=START_AT), seed=0)
    outside: list[datetime] = []
    async with anyio.create_task_group() as tg:
        async def run() -> None:
            await rt.ainvoke(g.compile(), {})

        tg.start_soon(run)
        await anyio.wait_all_tasks_blocked()
        outside.append(datetime.now())  # the run is in progress here
        gate.set()

    assert inside == [(START_AT + timedelta(hours=1)).astimezone().replace(tzinfo=None)]
    assert abs(outside[0] - before) < timedelta(hours=1)


# ---------------------------------------------------------------- the user's freeze_time


def test_user_freeze_time_is_where_the_virtual_clock_starts(anyio_backend: str) -> None:
    frozen = datetime(2030, 5, 6, 7, 8, 9)
    with freeze_time(frozen):
        rt = GraphRuntime(clock=VirtualClock(), seed=0, backend=anyio_backend)
        assert rt.clock.start == frozen.replace(tzinfo=UTC)
        trace = rt.trace(month_graph(), {})
        # the user's frozen instant stands after the run
        assert datetime.now() == frozen

    seen = trace.result.data["seen"]
    assert datetime.fromisoformat(seen["before"]) == frozen
    assert datetime.fromisoformat(seen["after"]) == frozen + timedelta(days=30)
    assert trace.events[0].time == frozen.replace(tzinfo=UTC)
    assert datetime.now().year != 2030


@freeze_time("2031-01-02 03:04:05")
def test_user_freeze_time_decorator(anyio_backend: str) -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=0, backend=anyio_backend)
    result = rt.invoke(month_graph(), {})
    assert result.data["seen"]["before"] == "2031-01-02T03:04:05"
    assert result.data["seen"]["after"] == "2031-02-01T03:04:05"
    assert datetime.now() == datetime(2031, 1, 2, 3, 4, 5)


# ---------------------------------------------------------------- overlapping sleeps


def overlapping_graph() -> Any:
    def sleeper(name: str, delay: float) -> Any:
        async def fn(s: S, ctx: Any) -> dict[str, Any]:
            await anyio.sleep(delay)
            return {"log": [f"{name}@{ctx.clock.elapsed}@{datetime.now().time()}"]}

        return fn

    g = Graph("overlap", S)
    for name, delay in (("a", 2), ("b", 1), ("c", 4), ("d", 3)):
        g.node(name, sleeper(name, delay))
        g.edge(name, END)
    g.edge(START, ["a", "b", "c", "d"])
    return g.compile()


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
async def test_overlapping_sleeps_take_the_longest(seed: int) -> None:
    rt = GraphRuntime(clock=VirtualClock(start=datetime(2025, 1, 1)), seed=seed)
    result = await rt.ainvoke(overlapping_graph(), {})

    assert rt.clock.elapsed == 4.0  # 2, 1, 4, 3 overlap: not 10
    assert result.data["log"] == ["a@2.0@00:00:02", "b@1.0@00:00:01", "c@4.0@00:00:04",
                                  "d@3.0@00:00:03"]


def test_overlapping_sleeps_sync(anyio_backend: str) -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=5, backend=anyio_backend)
    rt.invoke(overlapping_graph(), {})
    assert rt.clock.elapsed == 4.0


# ---------------------------------------------------------------- worker threads


def cpu_work() -> str:
    digest = b"graphflow"
    for _ in range(20_000):  # a few ms of real work in flight
        digest = hashlib.sha256(digest).digest()
    return digest.hex()[:8]


def thread_graph() -> Any:
    async def threaded(s: S, ctx: Any) -> dict[str, Any]:
        before = ctx.clock.elapsed
        await anyio.to_thread.run_sync(cpu_work)
        return {"seen": {"thread": [before, ctx.clock.elapsed]}}

    async def ticker(s: S, ctx: Any) -> dict[str, Any]:
        for _ in range(5):
            await anyio.sleep(1)
        return {"log": [f"ticker@{ctx.clock.elapsed}"]}

    g = Graph("thread", S)
    g.node("threaded", threaded)
    g.node("ticker", ticker)
    g.edge(START, ["threaded", "ticker"])
    g.edge("threaded", END)
    g.edge("ticker", END)
    return g.compile()


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_worker_thread_does_not_move_virtual_time_sync(anyio_backend: str, seed: int) -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=seed, backend=anyio_backend)
    result = rt.invoke(thread_graph(), {})

    start, end = result.data["seen"]["thread"]
    assert end == start  # no virtual jump while the thread ran
    assert result.data["log"] == ["ticker@5.0"]
    assert rt.clock.elapsed == 5.0


@pytest.mark.parametrize("seed", [0, 1])
async def test_worker_thread_does_not_move_virtual_time_async(seed: int) -> None:
    rt = GraphRuntime(clock=VirtualClock(), seed=seed)
    result = await rt.ainvoke(thread_graph(), {})
    start, end = result.data["seen"]["thread"]
    assert end == start
    assert rt.clock.elapsed == 5.0


# ---------------------------------------------------------------- deadlock


async def test_sleep_forever_with_no_timer_fails_at_once_with_virtual_deadlock() -> None:
    async def forever(s: S) -> None:
        await anyio.sleep_forever()

    g = Graph("deadlock", S)
    g.node("stuck_node", forever)
    g.edge(START, "stuck_node")
    g.edge("stuck_node", END)
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    with anyio.fail_after(5):  # real seconds: a hang fails the test instead of blocking it
        trace = await rt.atrace(g.compile(), {})

    result = trace.result
    assert result.status == "failed"
    err = result.error
    deadlock = err if isinstance(err, VirtualDeadlock) else err.__cause__
    assert isinstance(deadlock, VirtualDeadlock), repr(err)
    assert "stuck_node" in str(err)
    assert rt.clock.elapsed == 0.0
    errors = [e for e in trace.events if e.type == "error"]
    assert errors
    assert errors[0].node == "stuck_node"


async def test_deadlock_is_detected_once_the_last_timer_fired() -> None:
    async def forever(s: S) -> None:
        await anyio.sleep_forever()

    async def five(s: S) -> dict[str, Any]:
        await anyio.sleep(5)
        return {"log": ["five"]}

    g = Graph("deadlock2", S)
    g.node("forever_a", forever)
    g.node("five", five)
    g.node("forever_b", forever)
    g.edge(START, ["forever_a", "five", "forever_b"])
    for name in ("forever_a", "five", "forever_b"):
        g.edge(name, END)
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    with anyio.fail_after(5):
        result = await rt.ainvoke(g.compile(), {})

    assert result.status == "failed"
    assert "forever_a" in str(result.error)
    assert "forever_b" in str(result.error)
    assert rt.clock.elapsed == 5.0


# ---------------------------------------------------------------- cancel scopes (SPEC §7)


def test_move_on_after_in_a_node_is_virtual_where_the_runtime_owns_the_loop(
    anyio_backend: str,
) -> None:
    # SPEC §7: under the sync API the runtime owns the loop, so fail_after/move_on_after and
    # anyio.current_time() in nodes are virtual too.
    async def bounded(s: S, ctx: Any) -> dict[str, Any]:
        t = anyio.current_time()
        with anyio.move_on_after(10) as scope:
            await anyio.sleep(3600)
        return {"seen": {"caught": scope.cancelled_caught, "elapsed": ctx.clock.elapsed,
                         "loop": anyio.current_time() - t}}

    g = Graph("bounded", S)
    g.node("bounded", bounded)
    g.edge(START, "bounded")
    g.edge("bounded", END)
    rt = GraphRuntime(clock=VirtualClock(), seed=0, backend=anyio_backend)
    t0 = time.perf_counter()
    result = rt.invoke(g.compile(), {})

    assert time.perf_counter() - t0 < REAL_BOUND
    assert result.data["seen"] == {"caught": True, "elapsed": 10.0, "loop": 10.0}
