"""A run's artifacts belong to its tenant (seed 004 TenantMismatch: "The run's tenant is not
the thread's ... Nothing was changed"), on every store: ``runtime.artifacts`` and
``runtime.attach`` check the caller's tenant as ``history`` does."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, GraphRuntime, TenantMismatch, VirtualClock

pytestmark = pytest.mark.anyio
T0 = datetime(2025, 1, 1, tzinfo=UTC)


class S(BaseModel):
    n: int = 0


def _report(state: S, ctx: Any) -> None:
    ctx.attach("report.txt", "the real report", media_type="text/plain")


def _graph() -> Any:
    g = Graph("reports", S)
    g.node("report", _report).edge(START, "report").edge("report", END)
    return g.compile()


Call = Callable[[GraphRuntime, str, dict[str, Any]], Awaitable[Any]]
"""A runtime method called on a run, with extra keyword arguments (``tenant_id=``)."""
CALLS = [
    pytest.param(lambda rt, run, kw: rt.artifacts(run, **kw), id="list"),
    pytest.param(lambda rt, run, kw: rt.attach(run, "report.txt", "forged", **kw),
                 id="overwrite"),
    pytest.param(lambda rt, run, kw: rt.attach(run, "extra.txt", "planted", **kw), id="add"),
]


async def _state(store: Any, run_id: str) -> Any:
    listed = await store.artifacts(run_id)
    return listed, [await store.get_artifact(run_id, a["name"]) for a in listed]


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize(("other", "per_call"), [
    pytest.param("globex", None, id="another-tenant's-runtime"),
    pytest.param(None, None, id="a-runtime-without-tenant"),
    pytest.param("acme", "globex", id="another-tenant-per-call"),
])
async def test_another_tenant_can_neither_list_nor_change_a_run_s_artifacts(
    any_store: Any, call: Call, other: str | None, per_call: str | None
) -> None:
    """Issue 23 item 17: listing and overwriting another tenant's artifacts are refused with
    ``TenantMismatch`` (naming no id of the other tenant's), and nothing changes."""
    owner = GraphRuntime(any_store, clock=VirtualClock(start=T0), seed=0, tenant_id="acme")
    run_id = (await owner.ainvoke(_graph())).run_id
    before = await _state(any_store, run_id)
    intruder = GraphRuntime(any_store, clock=VirtualClock(start=T0), seed=1, tenant_id=other)
    with pytest.raises(TenantMismatch) as refused:
        await call(intruder, run_id, {} if per_call is None else {"tenant_id": per_call})
    assert "acme" not in str(refused.value)
    assert await _state(any_store, run_id) == before


@pytest.mark.parametrize("call", CALLS)
async def test_the_run_s_own_tenant_lists_and_attaches(any_store: Any, call: Call) -> None:
    """The passing twin: the run's tenant, from another runtime too, may do all three."""
    owner = GraphRuntime(any_store, clock=VirtualClock(start=T0), seed=0, tenant_id="acme")
    run_id = (await owner.ainvoke(_graph())).run_id
    colleague = GraphRuntime(any_store, clock=VirtualClock(start=T0), seed=1, tenant_id="acme")
    await call(colleague, run_id, {})
    assert "report.txt" in [a["name"] for a in await colleague.artifacts(run_id)]
