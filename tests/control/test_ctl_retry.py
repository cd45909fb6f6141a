"""Issue 3 — node retry on the runtime's clock: ``Retry(attempts, backoff, ...)`` (SPEC §2)."""

from __future__ import annotations

import operator
import time
from datetime import timedelta
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Graph,
    GraphRuntime,
    InvalidArgument,
    NodeFailed,
    Reducer,
    Retry,
    VirtualClock,
)

pytestmark = pytest.mark.anyio


class S(BaseModel):
    log: Annotated[list[str], Reducer(operator.add)] = []
    attempt: int = 0


def flaky_graph(retry: Retry, fail_until: int, calls: list[tuple[int, float]],
                exc: type[Exception] = ConnectionError, on_error: str | None = None) -> Any:
    """``call`` fails with ``exc`` on attempts < ``fail_until`` and records (attempt, time)."""

    def call(s: S, ctx: Any) -> dict[str, Any]:
        calls.append((ctx.attempt, ctx.clock.elapsed))
        if ctx.attempt < fail_until:
            raise exc(f"attempt {ctx.attempt} failed")
        return {"attempt": ctx.attempt}

    def fallback(s: S, ctx: Any) -> dict[str, Any]:
        return {"log": [f"{ctx.failure['node']}:{ctx.failure['error_type']}:"
                        f"{ctx.failure['message']}"]}

    g = Graph("retry", S)
    g.node("call", call, retry=retry, on_error=on_error)
    g.edge(START, "call")
    g.edge("call", END)
    if on_error:
        g.node(on_error, fallback)
        g.edge(on_error, END)
    return g.compile()


async def test_retries_wait_on_virtual_clock_and_every_attempt_is_an_event() -> None:
    calls: list[tuple[int, float]] = []
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    trace = await rt.atrace(flaky_graph(Retry(attempts=4, backoff=2.0, factor=3.0), 4, calls), {})

    assert trace.result.status == "completed"
    assert trace.result.data["attempt"] == 4
    # waits 2, 6, 18 on the virtual clock
    assert calls == [(1, 0.0), (2, 2.0), (3, 8.0), (4, 26.0)]
    assert rt.clock.elapsed == 26.0
    task = [(e.type, e.attempt, getattr(e, "will_retry", None))
            for e in trace.events if e.node == "call" and e.type in ("node_start", "error",
                                                                      "node_end")]
    assert task == [
        ("node_start", 1, None), ("error", 1, True),
        ("node_start", 2, None), ("error", 2, True),
        ("node_start", 3, None), ("error", 3, True),
        ("node_start", 4, None), ("node_end", 4, None),
    ]
    errors = [e for e in trace.events if e.type == "error"]
    assert all(e.error_type == "ConnectionError" for e in errors)
    assert [e.message for e in errors] == [f"attempt {k} failed" for k in (1, 2, 3)]
    end = next(e for e in trace.events if e.type == "node_end")
    assert end.finished_at - end.started_at == timedelta(seconds=26)


async def test_max_delay_caps_each_wait() -> None:
    calls: list[tuple[int, float]] = []
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    retry = Retry(attempts=4, backoff=10.0, factor=10.0, max_delay=15.0)
    result = await rt.ainvoke(flaky_graph(retry, 4, calls), {})

    assert result.status == "completed"
    assert [t for _, t in calls] == [0.0, 10.0, 25.0, 40.0]


async def test_exhausted_retries_fail_the_node_then_on_error_routes() -> None:
    calls: list[tuple[int, float]] = []
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    graph = flaky_graph(Retry(attempts=3, backoff=1.0), 99, calls, on_error="fallback")
    trace = await rt.atrace(graph, {})

    assert [a for a, _ in calls] == [1, 2, 3]
    errors = [e for e in trace.events if e.type == "error" and e.node == "call"]
    assert [(e.attempt, e.will_retry) for e in errors] == [(1, True), (2, True), (3, False)]
    assert errors[-1].routed_to == "fallback"
    edges = [(e.source, e.target) for e in trace.events if e.type == "edge_transition"]
    assert ("call", "fallback") in edges
    # the failure the route handles is the last attempt's
    assert trace.result.status == "completed"
    assert trace.result.data["log"] == ["call:ConnectionError:attempt 3 failed"]


async def test_exhausted_retries_without_route_fail_the_run() -> None:
    calls: list[tuple[int, float]] = []
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    trace = await rt.atrace(flaky_graph(Retry(attempts=3, backoff=1.0), 99, calls), {})

    assert len(calls) == 3
    result = trace.result
    assert result.status == "failed"
    assert isinstance(result.error, NodeFailed)
    assert result.error.node == "call"
    assert isinstance(result.error.__cause__, ConnectionError)
    assert str(result.error.__cause__) == "attempt 3 failed"
    with pytest.raises(NodeFailed):
        result.raise_for_status()
    assert trace.events[-1].type == "run_end"
    assert trace.events[-1].status == "failed"


async def test_retry_on_filters_which_errors_are_retried() -> None:
    calls: list[tuple[int, float]] = []
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    retry = Retry(attempts=5, backoff=1.0, retry_on=(ConnectionError,))
    trace = await rt.atrace(flaky_graph(retry, 99, calls, exc=ValueError), {})

    assert calls == [(1, 0.0)]  # not retried, no wait
    assert rt.clock.elapsed == 0.0
    assert trace.result.status == "failed"
    assert isinstance(trace.result.error.__cause__, ValueError)
    assert not [e for e in trace.events if e.type == "error" and e.will_retry]


async def test_retry_on_accepts_subclasses() -> None:
    calls: list[tuple[int, float]] = []
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    retry = Retry(attempts=3, backoff=1.0, retry_on=(OSError,))
    result = await rt.ainvoke(flaky_graph(retry, 3, calls, exc=ConnectionError), {})

    assert result.status == "completed"
    assert [a for a, _ in calls] == [1, 2, 3]


def _one_hour_graph(calls: list[tuple[int, float]]) -> Any:
    # 240 + 480 + 960 + 1920 = 3600 s of exponential backoff
    return flaky_graph(Retry(attempts=5, backoff=240.0, factor=2.0), 5, calls)


def test_one_hour_of_backoff_takes_well_under_a_second_sync(anyio_backend: str) -> None:
    calls: list[tuple[int, float]] = []
    rt = GraphRuntime(clock=VirtualClock(), seed=0, backend=anyio_backend)
    t0 = time.perf_counter()
    result = rt.invoke(_one_hour_graph(calls), {})
    real = time.perf_counter() - t0

    assert result.status == "completed"
    assert rt.clock.elapsed == 3600.0
    assert [t for _, t in calls] == [0.0, 240.0, 720.0, 1680.0, 3600.0]
    assert real < 5.0  # a generous bound for loaded machines: a real hour cannot pass


async def test_one_hour_of_backoff_takes_well_under_a_second_async() -> None:
    calls: list[tuple[int, float]] = []
    rt = GraphRuntime(clock=VirtualClock(), seed=0)
    t0 = time.perf_counter()
    result = await rt.ainvoke(_one_hour_graph(calls), {})
    real = time.perf_counter() - t0

    assert result.status == "completed"
    assert rt.clock.elapsed == 3600.0
    assert real < 5.0  # a generous bound for loaded machines: a real hour cannot pass


@pytest.mark.parametrize("kwargs", [
    {"attempts": 0},
    {"attempts": -1},
    {"attempts": 1.5},
    {"attempts": True},
    {"backoff": -1.0},
    {"backoff": float("nan")},
    {"factor": 0.5},
    {"factor": 0},
    {"max_delay": -1.0},
    {"retry_on": (int,)},
    {"retry_on": ("ValueError",)},
], ids=repr)
def test_retry_settings_out_of_range_are_invalid_argument(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidArgument):
        Retry(**kwargs)


def test_retry_rejects_an_infinite_backoff() -> None:
    # An infinite first delay can never elapse: it is out of range, like a negative one.
    with pytest.raises(InvalidArgument):
        Retry(attempts=2, backoff=float("inf"))


def test_node_retry_must_be_a_retry() -> None:
    g = Graph("bad-retry", S)
    with pytest.raises(InvalidArgument):
        g.node("call", lambda s: None, retry=3)  # type: ignore[arg-type]
