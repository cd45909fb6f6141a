"""Issue 29: ``invoke`` on a store that commits a step's events with its checkpoint (SQLite)
commits each lean step from the lean loop itself, its events dumped at once (``_stored``)
rather than built as models and dumped by the runner.

What users rely on: the file holds exactly what the general path (``trace``, every event
built) leaves in it, for graphs that leave the lean step at each of its exits and for a run
longer than the log's slots; a node with ``effect="external"`` still has its start recorded
before it runs; and each dumped event is, key for key and byte for byte, the dump of the
event the recording would build. The cost is counted, not timed: the Python calls a step
makes (``cProfile``'s total, the same on every run of the same graph and seed).
"""

from __future__ import annotations

import cProfile
import gc
import itertools
import operator
import pstats
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any

import pytest
from pydantic import BaseModel
from pydantic_core import to_json

from graphflow_sqlite import sqlite_rows
from pytest_graphflow import (
    END,
    START,
    CompiledGraph,
    Graph,
    GraphRuntime,
    RealClock,
    Reducer,
    Resume,
    SQLiteCheckpointStore,
    VirtualClock,
    interrupt,
)
from pytest_graphflow._engine._lazy import lean_step_events
from pytest_graphflow._engine._results import RunRecord
from pytest_graphflow._engine._stored import StepTimes, stored_step_events
from pytest_graphflow._stores.sqlite import _plain, _store
from pytest_graphflow._stores.sqlite._plain import plain_rows
from pytest_graphflow._stores.sqlite._tail import FOLD_AT

from .test_lean_step import GRAPHS


class V(BaseModel):
    n: int = 0
    log: Annotated[list[int], Reducer(operator.add)] = []
    note: str = ""
    x: float = 0.0
    d: dict[str, Any] = {}
    o: str | None = None


def _chain(length: int, fn: Any, effect: dict[int, str] | None = None) -> CompiledGraph:
    g = Graph("chain", V)
    prev = START
    for i in range(length):
        g.node(f"n{i}", fn, effect=(effect or {}).get(i, "pure"))  # type: ignore[arg-type]
        g.edge(prev, f"n{i}")
        prev = f"n{i}"
    g.edge(prev, END)
    return g.compile(checkpoint_policy="every_step")


def _values(s: V) -> dict[str, Any]:
    return {"n": s.n + 1, "note": s.note + "é\n\"\\\u2028<", "x": s.x + 0.1,
            "o": None if s.n % 2 else "ü", "d": {**s.d, f"k{s.n}": [1, 2.5, None, {"q": True}]}}


def _texts(s: V) -> dict[str, Any]:
    return {"n": s.n + 10**20, "note": "}},{{\"" * (s.n % 3), "o": "€"}


_AWKWARD = ["plain", "q\"uote", "back\\slash", "\x00\x1f\x7f", "é\u2028😀", " NaN Infinity", ""]


def _awkward() -> CompiledGraph:
    """Patches of plain values whose text the runtime writes (``DumpedEvents.text``), or the
    node_end's alone (strings JSON escapes), or not at all (an int ``str`` refuses)."""
    steps = itertools.count()

    def node(s: V) -> dict[str, Any]:
        step = next(steps)
        return {"note": _AWKWARD[step % len(_AWKWARD)], "o": None if step % 2 else "x",
                "n": 10**4400 + step if step % 4 == 3 else -step}

    return _chain(16, node)


def _asking() -> CompiledGraph:
    g = Graph("asking", V)
    g.node("a", lambda s: {"n": 1})
    g.node("ask", lambda s: {"note": str(interrupt("go?", id="go"))})
    g.node("z", lambda s: {"n": s.n + 1})
    g.edge(START, "a").edge("a", "ask").edge("ask", "z").edge("z", END)
    return g.compile()


CASES = {
    **{f"lean_{name}": make for name, make in GRAPHS.items()},
    "long": lambda: _chain(2 * FOLD_AT + 5, lambda s: {"n": s.n + 1}),
    "values": lambda: _chain(12, _values),
    "texts": lambda: _chain(12, _texts),
    "awkward": _awkward,
    "external": lambda: _chain(6, lambda s: {"n": s.n + 1}, {2: "external", 3: "external"}),
}


def _stored(path: Path, how: str, graph: CompiledGraph) -> dict[str, list[Any]]:
    with SQLiteCheckpointStore(path) as store:
        runtime = GraphRuntime(store, clock=VirtualClock(), seed=5, max_supersteps=1_000)
        getattr(runtime, how)(graph, {}, thread_id="t")
    return sqlite_rows(path)


@pytest.mark.parametrize("name", sorted(CASES))
def test_invoke_stores_what_a_traced_run_stores(tmp_path: Path, name: str) -> None:
    lean = _stored(tmp_path / "lean.db", "invoke", CASES[name]())
    full = _stored(tmp_path / "full.db", "trace", CASES[name]())
    assert lean == full
    assert lean["events"] or lean["log"]


def test_a_paused_and_resumed_run_stores_what_a_traced_one_stores(tmp_path: Path) -> None:
    files = []
    for how in ("invoke", "trace"):
        path = tmp_path / f"{how}.db"
        with SQLiteCheckpointStore(path) as store:
            runtime = GraphRuntime(store, clock=VirtualClock(), seed=5)
            paused = getattr(runtime, how)(_asking(), {}, thread_id="t")
            paused = getattr(paused, "result", paused)
            assert paused.status == "interrupted"
            runtime.resume(paused.run_id, Resume("yes"), graph=_asking())
        files.append(sqlite_rows(path))
    assert files[0] == files[1]


def test_an_external_node_s_start_is_recorded_before_it_runs(tmp_path: Path) -> None:
    """Seed 002's in-flight record: the log says the external node started before it runs,
    also when the lean loop ran the steps before it."""
    seen: list[list[str]] = []
    store = SQLiteCheckpointStore(tmp_path / "s.db")

    def external(s: V) -> dict[str, Any]:
        run = _sync(store.runs())[-1]["run_id"]
        seen.append([e["type"] for e in _sync(store.events(run))])
        return {"n": s.n + 1}

    g = Graph("ext", V)
    g.node("a", lambda s: {"n": 1}).node("b", lambda s: {"n": 2})
    g.node("c", external, effect="external")
    g.edge(START, "a").edge("a", "b").edge("b", "c").edge("c", END)
    with store:
        GraphRuntime(store, clock=VirtualClock(), seed=1).invoke(g.compile(), {},
                                                                 thread_id="t")
    assert seen == [["run_start", "checkpoint_saved", "node_start", "node_end",
                     "edge_transition", "checkpoint_saved", "node_start", "node_end",
                     "edge_transition", "checkpoint_saved", "node_start"]]


def _sync(coro: Any) -> Any:
    """The result of a store coroutine that never waits (the SQLite store's reads), from
    sync node code inside the run's event loop."""
    try:
        coro.send(None)
    except StopIteration as done:
        return done.value
    raise AssertionError("the store waited")


class _Clock:
    def __init__(self, now: datetime) -> None:
        self._now = now

    def now(self) -> datetime:
        return self._now


MOMENTS = [datetime(2025, 1, 1, tzinfo=UTC),
           datetime(2025, 1, 1, 1, 2, 3, 4500, tzinfo=UTC),
           datetime(2025, 6, 1, 1, 2, 3, 450000, tzinfo=timezone(timedelta(hours=-7)))]
PATCHES: list[dict[str, Any] | None] = [
    None, {}, {"n": 1, "s": "é\u2028", "b": True, "o": None}, {"x": 1.5},
    {"l": [1, (2, 3)], "d": {"k": datetime(2025, 1, 1, tzinfo=UTC)}}, {"t": (1, "a")}]


@pytest.mark.parametrize("patch", PATCHES, ids=range(len(PATCHES)))
@pytest.mark.parametrize("moment", MOMENTS, ids=range(len(MOMENTS)))
@pytest.mark.parametrize("shape", ["one", "two", "end", "no_checkpoint"])
def test_each_dumped_event_is_the_dump_of_the_built_event(
        patch: dict[str, Any] | None, moment: datetime, shape: str) -> None:
    targets = {"one": ["b"], "two": ["b", "c"], "end": [END], "no_checkpoint": ["b"]}[shape]
    cid = None if shape == "no_checkpoint" else "cp-1"
    finished = shape == "end"
    state = {"n": 3, "l": [1, 2], "s": "x"}
    started, ended = moment - timedelta(microseconds=7), moment - timedelta(seconds=1)
    run = SimpleNamespace(run_id="run-1", clock=_Clock(moment))
    built = [e.build().model_dump(mode="json") for e in lean_step_events(
        run, 10, 4, "a", "task-1", patch, started, ended, targets, cid, finished,  # type: ignore[arg-type]
        state)]
    dumped = stored_step_events(StepTimes(), "run-1", moment, 10, 4, "a", "task-1", patch,
                                started, ended, targets, cid, finished,
                                state if finished else None)
    assert dumped == built
    assert [list(e) for e in dumped] == [list(e) for e in built]  # the keys' order
    assert [to_json(e) for e in dumped] == [to_json(e) for e in built]
    if patch:
        assert dumped[1]["patch"] is not patch  # the event holds its own copy


def _serialised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, graph: CompiledGraph
                ) -> tuple[int, int]:
    """How many commits took the SQLite store's plain path, and how many times it called
    ``to_json``, in one ``invoke`` of ``graph``."""
    taken, serialised = [], []
    def counted(*args: Any, **kwargs: Any) -> Any:
        serialised.append(1)
        return to_json(*args, **kwargs)

    def plain(*args: Any) -> Any:
        found = plain_rows(*args)
        taken.append(found is not None)
        return found

    monkeypatch.setattr(_plain, "to_json", counted)
    monkeypatch.setattr(_store, "plain_rows", plain)  # (as the store calls it)
    with SQLiteCheckpointStore(tmp_path / f"{id(graph)}.db") as store:
        GraphRuntime(store, clock=VirtualClock(), seed=3).invoke(graph, {}, thread_id="t")
    return sum(taken), len(serialised)


def test_the_store_keeps_a_plain_step_s_events_as_the_runtime_wrote_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain step's events reach the SQLite store as JSON text (``DumpedEvents.text``):
    its plain commit serialises none of them (it called ``to_json`` once a step, ~45 k of
    a step's ~410 k instructions; the text costs the runtime ~23 k), also when the patch's
    strings need escaping (its ``node_end`` serialised alone, by the runtime). Where there
    is no text (a float in the patch), the store serialises the events as before."""
    words = _chain(20, lambda s: {"n": s.n + 1, "note": "é\"\n" * (s.n % 2), "o": "x"})
    taken, serialised = _serialised(tmp_path, monkeypatch, words)
    assert taken >= 18
    assert serialised == 0
    floats = _chain(20, lambda s: {"n": s.n + 1, "x": s.x + 0.5})
    taken, serialised = _serialised(tmp_path, monkeypatch, floats)
    assert taken >= 18
    assert serialised == taken


def _calls(tmp_path: Path, steps: int, clock: Any = None) -> int:
    """Python calls (functions and builtins) of one ``invoke`` of a ``steps``-node chain on
    a SQLite store (a fresh file, warmed by a run of the same chain); no garbage collection
    during it (a finaliser it ran would count). ``clock``: the runtime's (a
    ``VirtualClock`` unless given)."""
    name = f"calls{steps}{type(clock).__name__}.db"
    # The seed's first run ids are made once per process, each when a runtime first asks
    # for it: a runtime of the same seed asks for them first, so the measured run draws its
    # id from that cache whichever length is measured first in this process.
    ids = GraphRuntime(clock=VirtualClock(), seed=0)
    for _ in range(2):
        ids.invoke(_chain(1, lambda s: {"n": s.n + 1}), {})
    with SQLiteCheckpointStore(tmp_path / name) as store:
        runtime = GraphRuntime(store, clock=clock or VirtualClock(), seed=0,
                               max_supersteps=10_000)
        runtime.invoke(_chain(steps, lambda s: {"n": s.n + 1}), {}, thread_id="warm")
        graph = _chain(steps, lambda s: {"n": s.n + 1})
        gc.collect()
        gc.disable()
        try:
            profile = cProfile.Profile()
            profile.enable()
            runtime.invoke(graph, {}, thread_id="measured")
            profile.disable()
        finally:
            gc.enable()
    return pstats.Stats(profile).total_calls  # type: ignore[attr-defined, no-any-return]


def test_a_sqlite_step_makes_the_same_calls_at_any_length(tmp_path: Path) -> None:
    """A step of a chain committed to SQLite makes the same calls at any length (the log's
    fold every ``FOLD_AT`` steps included: the lengths are multiples of it): 63.8 on
    CPython 3.11 (67.8 before the runtime wrote a plain step's events as JSON text; 77
    before the plain commit serialised a step's events in one call and its checkpoint and
    row timestamp inline; 82 before the plain commit wrote its log row itself on one
    cursor; 100 before the durable lean step's numbering, checkpoint, times and run record
    were made inline; 105 while the plain commit wrote ``_begin``/``_end`` out), was 184
    when the runner committed each step as a piece of its own with its events built as
    models and dumped."""
    counts = [_calls(tmp_path, n * FOLD_AT) for n in (2, 4, 6)]
    assert counts[2] - counts[1] == counts[1] - counts[0]
    assert (counts[1] - counts[0]) / (2 * FOLD_AT) <= 65


def test_a_sqlite_step_on_the_real_clock_reads_it_twice(tmp_path: Path) -> None:
    """On the real clock (a production runtime's) a durable step reads the time twice —
    the node's start and end, the end also its checkpoint's time and its events' — inline:
    66.8 calls a step on CPython 3.11 (70.8 before the events' text, 79 before the plain
    commit's events in one call, checkpoint and timestamp inline; 84 before the plain
    commit's own log row), was 114
    (four ``RealClock.now()`` a step, the claim's ``due()``, the run record made and
    compared every step)."""
    counts = [_calls(tmp_path, n * FOLD_AT, RealClock()) for n in (2, 4)]
    assert (counts[1] - counts[0]) / (2 * FOLD_AT) <= 68


def test_on_the_real_clock_a_durable_step_s_times_agree(tmp_path: Path) -> None:
    """What the two reads give: each step's ``node_end`` ends when its checkpoint was taken
    and its events were stamped; no time goes back, from one event to the next or from one
    checkpoint to the next; a node starts after the step before it ended."""
    with SQLiteCheckpointStore(tmp_path / "real.db") as store:
        runtime = GraphRuntime(store, max_supersteps=1_000)
        result = runtime.invoke(_chain(30, lambda s: {"n": s.n + 1}), {}, thread_id="t")
        assert result.status == "completed"
        events = _sync(store.events(result.run_id))
        checkpoints = {cp.id: cp for cp in _sync(store.list(result.run_id))}
    times = [datetime.fromisoformat(e["time"]) for e in events]
    assert times == sorted(times)
    ends = [e for e in events if e["type"] == "node_end"]
    saved = [e for e in events if e["type"] == "checkpoint_saved"]
    assert len(ends) == 30
    by_step = {e["step"]: e for e in saved}
    previous_end = None
    for end in ends:
        started = datetime.fromisoformat(end["started_at"])
        finished = datetime.fromisoformat(end["finished_at"])
        assert started <= finished
        assert previous_end is None or previous_end <= started
        previous_end = finished
        mark = by_step[end["step"]]
        assert end["time"] == mark["time"] == end["finished_at"]
        assert checkpoints[mark["checkpoint_id"]].timestamp == finished
    stamps = [cp.timestamp for cp in sorted(checkpoints.values(), key=lambda c: c.step)]
    assert stamps == sorted(stamps)


def test_a_durable_leg_makes_its_run_record_once_a_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A step that leaves the run record as it was does not make it again to find that out:
    a run makes it the same few times at any length (it was once a step), and the store
    still holds the record's last form."""
    made: list[str] = []
    as_dict = RunRecord.as_dict

    def counted(self: RunRecord) -> dict[str, Any]:
        made.append(self.status)
        return as_dict(self)

    monkeypatch.setattr(RunRecord, "as_dict", counted)
    counts = []
    with SQLiteCheckpointStore(tmp_path / "record.db") as store:
        runtime = GraphRuntime(store, clock=VirtualClock(), seed=0, max_supersteps=1_000)
        for length in (5, 40):
            made.clear()
            result = runtime.invoke(_chain(length, lambda s: {"n": s.n + 1}), {})
            counts.append(len(made))
            stored = _sync(store.run(result.run_id))
            assert stored is not None
            assert stored["status"] == "completed"
    assert counts[0] == counts[1] <= 4


def test_a_postgres_step_on_the_real_clock_reads_it_twice(
        make_pg_store: Callable[..., Any]) -> None:
    """The same on PostgreSQL's sync connection: 51.4 calls a step on CPython 3.11 (66.5
    before pg9 wrote fetch_one's common cases, the statement's look-ups and the tail's JSON
    inline; 62
    before schema version 4's path blocks placed each step's path and wrote its tail's JSON,
    for a row's bytes flat as the run grows; 114 before the store's plain step skipped the
    checks its ids passed, 123 before its leaner step row), was 153; 68.4 since a step's
    commit is sent while the next step runs (s42: ~14 calls a step to make it ready, send
    it, settle it and mark the run's position; ~50 us of the server's time hidden a step);
    63.4 with the step's events handed over as text (s42); 70.7 with each step's statement
    made ahead while the commit before it is on the wire (s44: its path placed and its
    parameters dumped off the server's wait); 79.7 with two commits on the wire in libpq's
    pipeline mode (s44: a sync point sent and read a statement; the server no longer waits
    for the client between two pure steps)."""
    store = make_pg_store()
    runtime = GraphRuntime(store, clock=RealClock(), seed=0, max_supersteps=1_000)
    short, long = (_chain(n, lambda s: {"n": s.n + 1}) for n in (5, 45))
    runtime.invoke(short, {})
    runtime.invoke(long, {})
    counts = []
    for graph in (long, short):
        gc.collect()
        gc.disable()
        try:
            profile = cProfile.Profile()
            profile.enable()
            runtime.invoke(graph, {})
            profile.disable()
        finally:
            gc.enable()
        counts.append(pstats.Stats(profile).total_calls)  # type: ignore[attr-defined]
    per_step = (counts[0] - counts[1]) / 40
    assert per_step <= 81, per_step


@pytest.mark.parametrize("name", ["lean_chain", "lean_loop", "lean_commands", "long", "values",
                                  "external"])
def test_on_postgres_invoke_stores_what_a_traced_run_stores(
        make_pg_store: Callable[..., Any], name: str) -> None:
    """The same on PostgreSQL (its steps commit from the lean loop too): the run's events
    and checkpoints as the store gives them back."""
    import anyio

    store = make_pg_store()

    async def stored(run_id: str) -> tuple[list[Any], list[Any], Any]:
        return (await store.events(run_id), [cp.model_dump() for cp in await store.list(run_id)],
                await store.run(run_id))

    kept = []
    for how in ("invoke", "trace"):
        runtime = GraphRuntime(store, clock=VirtualClock(), seed=5, max_supersteps=1_000)
        result = getattr(runtime, how)(CASES[name](), {}, thread_id="t")
        run_id = getattr(result, "result", result).run_id
        kept.append(anyio.run(stored, run_id))
        runtime.delete_thread("t")  # the same seed takes the same ids again
    assert kept[0] == kept[1]
    assert kept[0][0]  # events
    assert kept[0][1]  # checkpoints
