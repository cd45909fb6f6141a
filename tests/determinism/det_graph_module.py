"""A small graph for the determinism tests, importable by a subprocess.

``stream_json(backend, seed)`` runs it under a virtual clock and returns the event stream as
JSON lines. The graph exercises what could leak nondeterminism: a parallel batch whose tasks
sleep different virtual times and read ``datetime.now()``/``time.time()``, custom events, a
reducer, a join and a conditional edge.

Run in another process with::

    python -c "import sys; sys.path.insert(0, DIR); import det_graph_module as m; \
sys.stdout.write(m.stream_json('asyncio', 7))"
"""

from __future__ import annotations

import json
import operator
import time
from datetime import datetime
from typing import Annotated, Any

import anyio
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, GraphRuntime, Reducer, VirtualClock, emit


class DetState(BaseModel):
    log: Annotated[list[str], Reducer(operator.add)] = []
    seen: Annotated[list[float], Reducer(operator.add)] = []
    total: int = 0


def plan(s: DetState) -> dict[str, Any]:
    return {"total": 1}


def worker(name: str, delay: float) -> Any:
    async def fn(s: DetState, ctx: Any) -> dict[str, Any]:
        await anyio.sleep(delay)
        emit({"worker": name, "at": datetime.now().isoformat()})
        await anyio.sleep(delay / 2)
        return {"log": [f"{name}:{datetime.now().isoformat()}"], "seen": [time.time()]}

    return fn


def join(s: DetState) -> dict[str, Any]:
    return {"total": s.total + len(s.log)}


def build() -> Any:
    g = Graph("determinism", DetState)
    g.node("plan", plan)
    for name, delay in (("a", 2.0), ("b", 1.0), ("c", 4.0), ("d", 3.0)):
        g.node(name, worker(name, delay))
    g.node("join", join)
    g.node("done", lambda s: {"log": ["done"]})
    g.edge(START, "plan")
    g.edge("plan", ["a", "b", "c", "d"])
    g.edge(["a", "b", "c", "d"], "join")
    g.branch("join", lambda s: "more" if s.total > 0 else "stop", {"more": "done", "stop": END})
    g.edge("done", END)
    return g.compile()


GRAPH = build()


def stream_json(backend: str, seed: int) -> str:
    """The run's event stream in wire form (``model_dump(mode="json")``), one JSON per line."""
    runtime = GraphRuntime(clock=VirtualClock(), seed=seed, backend=backend)
    events = runtime.trace(GRAPH, {}).events
    return "\n".join(json.dumps(e.model_dump(mode="json")) for e in events)
