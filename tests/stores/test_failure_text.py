"""A failure is recorded whatever its message holds (SPEC §6, seed 002: "Run records
lifecycle status, ... and failure details"), on every store: a message with a lone surrogate
(a file name's bytes decoded with ``surrogateescape``) has no UTF-8 form, so where a failure
is recorded (error events, the checkpoint's error, the run record, a failure route's
``ctx.failure``) each lone surrogate is written as its escape ``\\udcff``; the exception the
caller gets is the node's own, unchanged."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, GraphRuntime, Retry, VirtualClock
from pytest_graphflow._graph._builder import CompiledGraph

pytestmark = pytest.mark.anyio
T0 = datetime(2025, 1, 1, tzinfo=UTC)
NAME = b"bad \xff name".decode("utf-8", "surrogateescape")  # 'bad \udcff name'
ESCAPED = "bad \\udcff name"


class S(BaseModel):
    seen: str = ""


def _open(state: S) -> None:
    raise FileNotFoundError(NAME)


def _failing() -> CompiledGraph:
    g = Graph("files", S)
    g.node("open", _open, retry=Retry(attempts=2, backoff=1.0))
    g.edge(START, "open").edge("open", END)
    return g.compile()


def _routed() -> CompiledGraph:
    g = Graph("files-routed", S)
    g.node("open", _open, on_error="report")
    g.node("report", lambda s, ctx: {"seen": ctx.failure["message"]})
    g.edge(START, "open").edge("open", END).edge("report", END)
    return g.compile()


async def test_a_failure_whose_message_has_a_lone_surrogate_is_recorded(
    make_any_store: Callable[..., Any]
) -> None:
    """Issue 23 item 5: the failed result is returned (not an exception), the failure
    checkpoint is saved, and the run record says ``failed``."""
    store = make_any_store()
    rt = GraphRuntime(store, clock=VirtualClock(start=T0), seed=0)
    result = await rt.ainvoke(_failing())
    assert result.status == "failed"
    assert str(result.error.__cause__) == NAME  # type: ignore[union-attr]  # the node's own
    cp = await store.latest(result.run_id)
    assert cp is not None
    assert cp.status == "failed"
    assert cp.error["message"].endswith(f"FileNotFoundError: {ESCAPED}")
    record = rt.run_record(result.run_id)
    assert record.status == "failed"
    assert record.error is not None
    assert record.error["message"] == cp.error["message"]
    if getattr(store, "records_events", False):  # the durable record and log say the same
        stored = await store.run(result.run_id)
        assert stored["status"] == "failed"
        assert stored["error"] == {"error_type": "NodeFailed", "message": cp.error["message"]}
        errors = [e for e in await store.events(result.run_id) if e["type"] == "error"]
        assert [e["message"] for e in errors] == [ESCAPED, ESCAPED]  # the retry and the last


async def test_a_failure_route_gets_the_escaped_message(
    make_any_store: Callable[..., Any]
) -> None:
    """The routed twin: the failure the route handles (``ctx.failure``) is recorded in the
    route's task, so it carries the same escaped message, and the run completes."""
    store = make_any_store()
    rt = GraphRuntime(store, clock=VirtualClock(start=T0), seed=0)
    result = await rt.ainvoke(_routed())
    assert (result.status, result.data) == ("completed", {"seen": ESCAPED})
    assert (await store.latest(result.run_id)).status == "completed"
