"""``StoreFeatures.tenants`` (issue 25): the runtime reads whether a store keeps tenants
apart itself from its features, never by probing it. A store that does not (its ``waiting``
lists every tenant's runs, its ``delete_thread`` takes no tenant) still keeps each tenant to
its own threads through ``GraphRuntime``: the runtime filters and pages ``waiting`` itself
and checks a thread's tenant before deleting it."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

import anyio
import pytest

from graphflow_deadline_graphs import T0, THREE_DAYS, build
from pytest_graphflow import (
    DeletedThread,
    FaultyStore,
    GraphRuntime,
    InMemoryCheckpointStore,
    SQLiteCheckpointStore,
    TenantMismatch,
    VirtualClock,
    Waiting,
)
from pytest_graphflow.stores import StoreFeatures, features_of


class NoTenants(InMemoryCheckpointStore):
    """A store that keeps no tenants: ``waiting`` lists every waiting run and
    ``delete_thread`` deletes whatever thread it is given."""

    features = dataclasses.replace(InMemoryCheckpointStore.features, tenants=False)

    async def waiting(self, *, limit: int | None = None,  # type: ignore[override]
                      after: str | None = None) -> list[Waiting]:
        return await super().waiting(any_tenant=True, limit=limit, after=after)

    async def delete_thread(self, thread_id: str, *,  # type: ignore[override]
                            now: datetime | None = None) -> DeletedThread:
        held = await self.list(thread_id=thread_id)
        owner = held[-1].tenant_id if held else None
        return await super().delete_thread(thread_id, tenant_id=owner, now=now)


def runtime(store: Any, tenant: str | None) -> GraphRuntime:
    return GraphRuntime(store, clock=VirtualClock(start=T0), seed=7, tenant_id=tenant)


async def pause(store: Any, tenant: str | None, thread: str) -> str:
    result = await runtime(store, tenant).ainvoke(build(), {"amount": 120}, thread_id=thread)
    assert result.status == "interrupted"
    return result.run_id


def test_the_built_in_stores_keep_tenants_and_say_so(tmp_path: Any) -> None:
    with SQLiteCheckpointStore(tmp_path / "t.db") as sqlite:
        assert features_of(sqlite).tenants
    memory = InMemoryCheckpointStore()
    assert features_of(memory).tenants
    assert features_of(FaultyStore(memory)).tenants
    assert not features_of(FaultyStore(NoTenants())).tenants
    assert not StoreFeatures().tenants


def test_a_store_that_declares_nothing_keeps_tenants_when_its_methods_take_them() -> None:
    class Old:  # written before StoreFeatures
        async def waiting(self, *, tenant_id: str | None = None, **kw: Any) -> list[Any]:
            return []

    class Plain:
        async def waiting(self, *, limit: int | None = None) -> list[Any]:
            return []

    assert features_of(Old()).tenants
    assert not features_of(Plain()).tenants


def test_the_runtime_lists_only_the_callers_waiting_runs_of_a_store_without_tenants() -> None:
    store = NoTenants()

    async def main() -> None:
        acme = [await pause(store, "acme", f"thread-a{n}") for n in range(3)]
        globex = await pause(store, "globex", "thread-g")
        loner = await pause(store, None, "thread-n")
        assert len(await store.waiting()) == 5  # the store itself keeps them all together
        mine = await runtime(store, "acme").waiting()
        assert [w.run_id for w in mine] == acme
        assert [w.run_id for w in await runtime(store, "globex").waiting()] == [globex]
        assert [w.run_id for w in await runtime(store, None).waiting()] == [loner]
        page = await runtime(store, "acme").waiting(limit=2)
        rest = await runtime(store, "acme").waiting(limit=2, after=page[-1].thread_id)
        assert [w.run_id for w in page + rest] == acme
        late = GraphRuntime(store, clock=VirtualClock(start=T0 + THREE_DAYS), seed=7,
                            tenant_id="globex")
        fired = await late.aexpire_due(graphs=[build()])
        assert [r.run_id for r in fired] == [globex]  # only the caller's tenant's run fires

    anyio.run(main)


def test_the_runtime_refuses_another_tenants_thread_before_a_store_without_tenants_deletes(
) -> None:
    store = NoTenants()

    async def main() -> None:
        run_id = await pause(store, "acme", "thread-a")
        with pytest.raises(TenantMismatch):
            await runtime(store, "globex").adelete_thread("thread-a")
        assert [cp.run_id for cp in await store.list(thread_id="thread-a")][-1] == run_id
        deleted = await runtime(store, "acme").adelete_thread("thread-a")
        assert deleted.run_ids == (run_id,)
        assert await store.list(thread_id="thread-a") == []

    anyio.run(main)
