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
``StoreFeatures.in_process``); with the lean step's second pass, 175 and 474; its sixth
140 and 352 (a one-task pause with its events numbered, not built; a fresh run's first
checkpoint through the store's step sink; the resume's read and checks, the store's
lookups, the sync entry and the clock reads without calls they did not need). The bounds
leave room for other Pythons' asyncio (3.12 keeps two task registries) and catch any return
of a removed cost.

Reading a checkpoint to resume without copying it must not let the leg change what the store
keeps: the second test pins that. The pause and resume of ``invoke`` (events numbered, not
built; the first checkpoint through the store's step sink; one clock read serving the next)
must leave what a ``trace`` leaves: the third pins that, and the last that a flat dict's
JSON value (a question's usual payload, copied without the walks) is the general path's.
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
    Retry,
    VirtualClock,
    emit,
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
    """A one-node run makes at most 145 Python calls (519 before issue 29's third pass, 336
    after it, 175 after its fifth, 140 after its sixth, 138 -> 135 once ``run_options`` set
    every option a leg reads, so the leg reads them without ``dict.get``) and an interrupt
    round trip at most 360 (1,271, then 888, 474, 352, 339 -> 332)."""
    found = subprocess.run([sys.executable, "-c", _COUNT], capture_output=True, text=True,
                           timeout=120, check=False)
    assert found.returncode == 0, found.stderr
    one_node, round_trip = map(int, found.stdout.split())
    assert one_node <= 145, one_node
    assert round_trip <= 360, round_trip


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


class Q(BaseModel):
    n: int = 0
    answer: str = ""


def _asking(kind: str) -> CompiledGraph:
    """draft → a node that asks (``kind`` says how) → publish."""
    g = Graph(f"asking-{kind}", Q)
    g.node("draft", lambda s: {"n": s.n + 1})
    tries: list[int] = []

    def ask(s: Q) -> dict[str, object]:
        if kind == "emits":
            emit({"seen": s.n})
            emit("twice", channel="notes")
        elif kind == "retried":
            tries.append(1)
            if len(tries) == 1:
                raise ValueError("first try fails")
        elif kind == "clock":
            _CLOCK.advance(7.5)  # the node moves the virtual clock before it asks
        return {"answer": str(interrupt({"draft": s.n, "kind": kind, "é": [1.5]}, id="ok"))}

    async def ask_async(s: Q) -> dict[str, object]:
        return {"answer": str(interrupt({"draft": s.n}, id="ok"))}

    def publish(s: Q) -> dict[str, object]:
        if kind == "clock":
            _CLOCK.advance(2.25)  # and so does the last node
        return {"n": s.n + 10}

    if kind == "async":
        g.node("ask", ask_async)
    elif kind == "retried":
        g.node("ask", ask, retry=Retry(attempts=2, backoff=0.5))
    else:
        g.node("ask", ask)
    g.node("publish", publish)
    g.edge(START, "draft").edge("draft", "ask").edge("ask", "publish").edge("publish", END)
    return g.compile()


_CLOCK = VirtualClock()


def _record(rt: GraphRuntime, run_id: str) -> dict[str, Any]:
    return rt.run_record(run_id).as_dict()


@pytest.mark.parametrize("kind", ["plain", "async", "emits", "retried", "clock"])
@pytest.mark.parametrize("thread", [None, "t-1"])
def test_an_invoked_pause_and_resume_leave_what_a_traced_one_leaves(
        kind: str, thread: str | None) -> None:
    """``invoke`` pauses a leg of one asking task without building its events (the task's,
    ``checkpoint_saved`` and ``run_end`` only numbered) and saves a fresh run's first
    checkpoint through the in-memory store's own save; ``resume`` numbers its ``run_start``
    unbuilt, and reads a virtual clock once where nothing can move it in between. A
    ``trace`` (and ``resume_trace``) builds every event and takes the general path: the
    results, every checkpoint (ids, ``next_seq``, timestamps, tasks, questions) and the run
    records must be the same, for a sync, an async, an emitting and a retried asking node,
    and nodes that move the clock."""
    found = []
    for traced in (False, True):
        global _CLOCK
        _CLOCK = VirtualClock()
        store = InMemoryCheckpointStore()
        rt = GraphRuntime(store, clock=_CLOCK, seed=5)
        graph = _asking(kind)
        if traced:
            paused = rt.trace(graph, {}, thread_id=thread).result
        else:
            paused = rt.invoke(graph, {}, thread_id=thread)
        assert paused.status == "interrupted"
        asked = {k: (i.model_dump()) for k, i in paused.interrupts.items()}
        pause_record = _record(rt, paused.run_id)
        if traced:
            done = rt.resume_trace(paused.run_id, Resume("yes")).result
        else:
            done = rt.resume(paused.run_id, Resume("yes"))
        assert done.status == "completed"
        assert done.data["answer"] == "yes"
        found.append({
            "paused": (paused.run_id, paused.thread_id, paused.step, paused.checkpoint_id,
                       paused.data, asked),
            "pause_record": pause_record,
            "done": (done.run_id, done.step, done.checkpoint_id, done.data),
            "record": _record(rt, done.run_id),
            "checkpoints": [cp.model_dump() for cp in _history(rt, done.run_id)],
            "elapsed": _CLOCK.elapsed_ns,
        })
    assert found[0] == found[1]
    cps = found[0]["checkpoints"]
    assert (cps[0]["step"], cps[0]["node_ids"]) == (-1, [])  # the run's first, before any node


class _Dict(dict[str, Any]):
    """A dict subclass: ``to_json_value`` takes its general path for it."""


@pytest.mark.parametrize("value", [
    {}, {"draft": 1, "ok": True, "none": None, "x": 1.5, "s": "text"},
    {"é": 1}, {"a": "é"}, {"a": "\udcff"}, {"\udcff": 1}, {"a": float("nan")},
    {"a": float("inf")}, {1: "int key"}, {"a": [1, {"b": 2}]}, {"a": (1, 2)},
    {"a": {1, 2}}, {"a": 10**30}, {"a": -0.0},
])
def test_a_flat_dict_s_json_value_is_what_the_general_walk_gives(value: dict[Any, Any]
                                                                   ) -> None:
    """``to_json_value`` copies a flat dict of ASCII keys and plain values (a question's
    usual payload) without its walks: the same value, a fresh dict, and every refusal the
    general path makes, for either ``exact``."""
    from pytest_graphflow._records._json import NotJSONError, to_json_value

    for exact in (True, False):
        try:
            expected: Any = to_json_value(_Dict(value), exact=exact)
        except NotJSONError as exc:
            expected = ("refused", str(exc))
        try:
            got: Any = to_json_value(value, exact=exact)
        except NotJSONError as exc:
            got = ("refused", str(exc))
        assert got == expected
        assert type(got) is type(expected)
        if type(got) is dict:
            assert got is not value


@pytest.mark.parametrize("options", [{}, {"timeout": 5.0}, {"cancel_at": "node_end:a"}])
def test_run_options_set_every_option_a_leg_reads(options: dict[str, object]) -> None:
    """A leg reads its options by key, without ``dict.get`` (``Legs.start``,
    ``_prepare_resume``): both of ``run_options``' ways set each, the usual call's included,
    with the defaults a call that sets none runs with."""
    from pytest_graphflow._engine._options import run_options

    opts = run_options(GraphRuntime(clock=VirtualClock(), seed=0), options)
    assert opts["record_events"] is True
    assert opts["recover"] is None
    assert opts["cancel_after"] is None
    assert (opts["cancel_at"] is None) == ("cancel_at" not in options)  # (else its matcher)
