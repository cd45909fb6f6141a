"""Issue 29: what a whole run costs on the default path besides its steps, counted, not timed.

The benchmark's two single-run rows (``benchmarks/bench_vs_langgraph.py``) make a new
``GraphRuntime(clock=VirtualClock(), seed=0)`` per run: one node writing one key, and an
interrupt round trip (draft, approve asking, publish; ``invoke`` pauses, ``resume`` answers on
the same runtime). Everything but the node calls is fixed cost: the runtime, the sync entry on
the thread's loop, the run id, the thread's claim and its release, the wall-clock patch, the
leg's parts, the first checkpoint, the pause and the resume's reads, the result. The counts are
Python calls (``cProfile``'s total, builtins included), measured in a fresh interpreter (what
an earlier test imported or left running changes them: trio, a live task), after warm-up runs.

Issue 29's third pass took them 519 → 336 (one-node) and 1,271 → 888 (round trip); its fifth
194 and 552 (the in-memory store answers the claim, the run id and the resume's read at once,
``StoreFeatures.in_process``); with the lean step's second pass, 175 and 474. The bounds
leave room for other Pythons' asyncio (3.12 keeps two task registries) and catch any return
of a removed cost.

Reading a checkpoint to resume without copying it must not let the leg change what the store
keeps: the second test pins that.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    CompiledGraph,
    Graph,
    GraphRuntime,
    InMemoryCheckpointStore,
    Resume,
    VirtualClock,
    interrupt,
)
from pytest_graphflow._engine._runtime import run_sync

_COUNT = textwrap.dedent('''
    import cProfile, gc, pstats, sys
    from pydantic import BaseModel
    from pytest_graphflow import END, START, Graph, GraphRuntime, Resume, VirtualClock, interrupt

    class S(BaseModel):
        n: int = 0
        answer: str = ""

    g = Graph("one", S)
    g.node("a", lambda s: {"n": s.n + 1}).edge(START, "a").edge("a", END)
    one = g.compile()
    g = Graph("approval", S)
    g.node("draft", lambda s: {"n": s.n + 1})
    g.node("approve", lambda s: {"answer": interrupt({"draft": s.n}, id="ok")})
    g.node("publish", lambda s: {"n": s.n + 10})
    g.edge(START, "draft").edge("draft", "approve").edge("approve", "publish")
    g.edge("publish", END)
    approval = g.compile()

    def one_node():
        assert GraphRuntime(clock=VirtualClock(), seed=0).invoke(one, {}).status == "completed"

    def round_trip():
        rt = GraphRuntime(clock=VirtualClock(), seed=0)
        paused = rt.invoke(approval, {})
        assert paused.status == "interrupted"
        assert rt.resume(paused.run_id, Resume("yes")).status == "completed"

    def calls(fn):
        for _ in range(3):
            fn()
        gc.collect()
        gc.disable()
        try:
            profile = cProfile.Profile()
            profile.enable()
            fn()
            profile.disable()
        finally:
            gc.enable()
        return pstats.Stats(profile).total_calls

    print(calls(one_node), calls(round_trip))
''')


def test_a_run_s_fixed_cost_stays_down() -> None:
    """A one-node run makes at most 190 Python calls (519 before issue 29's third pass, 336
    after it) and an interrupt round trip at most 510 (1,271, then 888)."""
    found = subprocess.run([sys.executable, "-c", _COUNT], capture_output=True, text=True,
                           timeout=120, check=False)
    assert found.returncode == 0, found.stderr
    one_node, round_trip = map(int, found.stdout.split())
    assert one_node <= 190, one_node
    assert round_trip <= 510, round_trip


class S(BaseModel):
    n: int = 0
    log: list[str] = []
    answer: str = ""


def _approval() -> CompiledGraph:
    g = Graph("approval", S)
    g.node("draft", lambda s: {"n": s.n + 1, "log": [*s.log, "draft"]})
    g.node("approve", lambda s: {"answer": interrupt({"draft": s.n}, id="ok")})
    g.node("publish", lambda s: {"n": s.n + 10, "log": [*s.log, "publish"]})
    g.edge(START, "draft").edge("draft", "approve").edge("approve", "publish")
    g.edge("publish", END)
    return g.compile()


@pytest.mark.parametrize("update", [None, {"log": ["changed"]}])
def test_a_resume_leaves_the_checkpoints_it_read_as_they_were(
        update: dict[str, object] | None) -> None:
    """The resume reads the paused checkpoint as the in-memory store keeps it (no copy); its
    leg, an update included, changes nothing of it or of the checkpoints before it: the run's
    history reads the same after the resume, up to the pause, and another runtime resuming
    from the paused checkpoint by id gets the same result."""
    store = InMemoryCheckpointStore()
    rt = GraphRuntime(store, clock=VirtualClock(), seed=0)
    graph = _approval()
    paused = rt.invoke(graph, {})
    kept = [cp.model_dump() for cp in _history(rt, paused.run_id)]
    done = rt.resume(paused.run_id, Resume("yes", update=update))
    assert done.status == "completed"
    after = [cp.model_dump() for cp in _history(rt, paused.run_id)]
    assert after[:len(kept)] == kept
    assert len(after) > len(kept)
    other = GraphRuntime(store, clock=VirtualClock(), seed=0)
    assert paused.checkpoint_id is not None
    again = other.resume(paused.checkpoint_id, Resume("yes", update=update),
                         graph=graph)
    assert (again.status, again.data) == (done.status, done.data)


def _history(rt: GraphRuntime, run_id: str) -> list[Any]:
    return run_sync(rt, lambda: rt.history(run_id))
