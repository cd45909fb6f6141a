"""The approval graph of the deadline tests (issue 26, "Deadlines on human input"): a refund
waits for a human's approval for 3 days; unanswered, it is escalated. Importable by the
worker processes of ``tests/workers``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel

from pytest_graphflow import END, START, CompiledGraph, Graph, TimeoutAnswer, interrupt

T0 = datetime(2025, 1, 1, tzinfo=UTC)
"""Where every test's virtual clock starts (``VirtualClock``'s default start)."""

THREE_DAYS = timedelta(days=3)


class Approval(BaseModel):
    amount: int = 0
    decision: Any = None
    escalated: bool = False


def approve(state: Approval) -> dict[str, Any]:
    answer = interrupt({"refund": state.amount}, id="approve", deadline=THREE_DAYS)
    return {"decision": answer}


def escalate(state: Approval) -> dict[str, Any]:
    return {"escalated": True}


def build(on_timeout: str | TimeoutAnswer | None = "escalate", *,
          graph_id: str = "approval") -> CompiledGraph:
    """The approval graph; ``escalate`` (reached only by the timeout route) is there when
    the route names it."""
    g = Graph(graph_id, Approval)
    g.node("approve", approve, effect="human")
    g.edge(START, "approve").edge("approve", END)
    if on_timeout == "escalate":
        g.node("escalate", escalate).edge("escalate", END)
    return g.compile(on_timeout=on_timeout)


def serve(argv: list[str]) -> None:
    """A worker process: ``python graphflow_deadline_graphs.py sqlite PATH AT`` or
    ``... postgres DSN SCHEMA AT`` (``AT``: its virtual clock's start, ISO 8601). It fires
    the due deadlines of the approval graph, then prints its stats as JSON and exits."""
    import json
    import sys

    from pytest_graphflow import (
        PostgresCheckpointStore,
        SQLiteCheckpointStore,
        VirtualClock,
        Worker,
    )

    kind, *where, at = argv
    store: Any = (SQLiteCheckpointStore(where[0]) if kind == "sqlite"
                  else PostgresCheckpointStore(where[0], schema=where[1]))
    clock = VirtualClock(start=datetime.fromisoformat(at))
    stats = Worker(store, [build()], clock=clock, poll_interval=0.01).serve(until_idle=True)
    if kind == "sqlite":
        store.close()
    json.dump({"expired": stats.expired, "errors": stats.errors,
               "statuses": stats.statuses}, sys.stdout)


if __name__ == "__main__":
    import sys

    serve(sys.argv[1:])
