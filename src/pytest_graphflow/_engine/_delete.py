"""``GraphRuntime.adelete_thread``: a thread deleted from the runtime's store (seed 004).

The runtime refuses what its store cannot see: a run of the thread still executing in this
runtime, or a claim it keeps itself for a store without claims. Everything else (the tenant,
a live claim held by any process, what is deleted) the store decides in one transaction.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._records._checks import check_id, check_optional_id
from .._stores._deletion import DeletedThread
from ..errors import GraphExecutionError, TenantMismatch, ThreadBusy
from ._claim import local_holder

if TYPE_CHECKING:
    from ._legs import Legs

__all__ = ["delete_thread"]


async def delete_thread(legs: Legs, thread_id: str, tenant: str | None
                        ) -> DeletedThread:
    """Delete ``thread_id`` from the runtime's store as ``tenant``; forget its runs'
    records (``legs``: the runtime's, with its settings and books).

    Raises:
        GraphExecutionError: the store cannot delete threads.
        TenantMismatch: the thread belongs to another tenant; nothing is deleted.
        ThreadBusy: a run holds the thread; nothing is deleted.
    """
    check_id(thread_id, "thread_id", "delete_thread")
    check_optional_id(tenant, "tenant_id", "delete_thread")
    host, book = legs.host, legs.book
    store: Any = host.store
    if not host.store_features.delete_thread:
        raise GraphExecutionError(
            f"the store {type(store).__name__} cannot delete threads (its features say "
            "delete_thread=False); use InMemoryCheckpointStore, SQLiteCheckpointStore or "
            "PostgresCheckpointStore, or implement the DeletingStore protocol")
    last = await legs.thread_latest(thread_id)
    if last is not None and last.tenant_id != tenant:
        raise TenantMismatch(thread_id, tenant)
    for live in book.live.values():
        if not live.done and live.run.thread_id == thread_id:
            raise ThreadBusy(thread_id, live.run_id if last is not None else None)
    holder = local_holder(store, thread_id)
    if holder is not None:
        raise ThreadBusy(thread_id, holder if last is not None else None)
    # A store with tenants checks the tenant again in its own transaction; one without
    # deletes what the check above allowed.
    deleted: DeletedThread = await (
        store.delete_thread(thread_id, tenant_id=tenant, now=host.clock.now())
        if host.store_features.tenants else store.delete_thread(thread_id, now=host.clock.now()))
    records = book.records
    for run_id in [r for r, rec in records.items()
                   if rec.thread_id == thread_id or r in deleted.run_ids]:
        del records[run_id]
    return deleted
