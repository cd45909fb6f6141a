"""``GraphRuntime.waiting`` and ``GraphRuntime.aexpire_due``: the runs waiting for answers,
and firing every question whose deadline passed (see :mod:`.._graph._deadlines`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from .._graph._builder import CompiledGraph
from .._graph._node import Resume
from .._stores._waiting import Waiting
from ..errors import GraphExecutionError, InvalidArgument, ResumeError, ThreadBusy
from ._expiry import ExpiryResume
from ._host import LegHost
from ._results import GraphResult

__all__ = ["Expirer", "expire_due", "list_waiting"]


class Expirer(LegHost, Protocol):
    """A runtime as the deadline operations see it: its settings, and ``aresume``."""

    async def aresume(self, run_or_checkpoint_id: str, resume: Resume | None = ..., *,
                      graph: CompiledGraph | None = ..., tenant_id: str | None = ...
                      ) -> GraphResult[Any]:
        """Resume a run and return its result."""
        ...

_PAGE = 200


async def list_waiting(rt: LegHost, *, tenant_id: str | None, limit: int | None,
                       after: str | None, any_tenant: bool = False) -> list[Waiting]:
    """One page of the runs waiting for answers (``tenant_id``'s, or ``any_tenant``'s), in
    thread-id order: the store's ``waiting``, or an error naming the fix for a store without
    it. A store without ``tenants`` lists every tenant's runs; the runtime then keeps the
    caller's and pages them itself.

    Raises:
        GraphExecutionError: the store cannot list waiting runs.
    """
    if not rt.store_features.waiting:
        raise GraphExecutionError(
            f"the store {type(rt.store).__name__} cannot list the runs waiting for answers "
            "(its features say waiting=False: it has no waiting()); use "
            "InMemoryCheckpointStore, SQLiteCheckpointStore or PostgresCheckpointStore")
    store: Any = rt.store
    if rt.store_features.tenants:
        found: list[Waiting] = await store.waiting(tenant_id=tenant_id, limit=limit,
                                                   after=after, any_tenant=any_tenant)
        return found
    rows: list[Waiting] = await store.waiting()
    mine = sorted((row for row in rows if (any_tenant or row.tenant_id == tenant_id)
                   and (after is None or row.thread_id > after)), key=lambda r: r.thread_id)
    return mine if limit is None else mine[:limit]


def _graph_table(graphs: Iterable[CompiledGraph] | Mapping[str, CompiledGraph] | None
                 ) -> dict[str, CompiledGraph] | None:
    if graphs is None:
        return None
    found = list(graphs.values()) if isinstance(graphs, Mapping) else list(graphs)
    table: dict[str, CompiledGraph] = {}
    for graph in found:
        if not isinstance(graph, CompiledGraph):
            raise InvalidArgument(f"expire_due(graphs=...): {graph!r} is not a CompiledGraph "
                                  "(call .compile())")
        table[graph.graph_id] = graph
    return table


async def expire_due(
    rt: Expirer,
    *,
    tenant_id: str | None,
    any_tenant: bool,
    graphs: Iterable[CompiledGraph] | Mapping[str, CompiledGraph] | None,
) -> list[GraphResult[Any]]:
    """Fire every question whose deadline passed by ``rt``'s clock, earliest deadline first
    (ties in thread-id order); each run resumes and takes its graph's timeout route.

    A run that another runtime holds, or that was answered or fired meanwhile, is skipped.
    With ``graphs``, only runs of those graphs are fired (a worker serving them).
    """
    table = _graph_table(graphs)
    now = rt.clock.now()
    due: list[tuple[Any, str, Waiting, list[str]]] = []
    after: str | None = None
    while True:
        page = await list_waiting(rt, tenant_id=tenant_id, any_tenant=any_tenant,
                                  limit=_PAGE, after=after)
        for row in page:
            keys = [i.key for i in row.interrupts
                    if i.deadline is not None and i.deadline <= now]
            if keys and (table is None or row.graph_id in table):
                first = min(i.deadline for i in row.interrupts if i.key in keys
                            and i.deadline is not None)
                due.append((first, row.thread_id, row, keys))
        if len(page) < _PAGE:
            break
        after = page[-1].thread_id
    due.sort(key=lambda d: (d[0], d[1]))
    fired: list[GraphResult[Any]] = []
    for _, _, row, keys in due:
        graph = None if table is None else table[row.graph_id]
        try:
            result = await rt.aresume(row.run_id, ExpiryResume(keys), graph=graph,
                                      tenant_id=row.tenant_id)
        except (ThreadBusy, ResumeError):
            continue  # another runtime holds it, or it was answered or fired meanwhile
        fired.append(result)
    return fired
