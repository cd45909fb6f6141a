"""``pytest_graphflow.testing``: ``make_graph_runtime``, ``GraphRuntimeFactory`` and the
recording runtime they hand out, used directly (no inner pytest session)."""

from __future__ import annotations

import operator
from datetime import UTC, datetime
from typing import Annotated, Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    DEFAULT_START,
    END,
    START,
    CompiledGraph,
    FaultyStore,
    Graph,
    InMemoryCheckpointStore,
    InvalidArgument,
    Reducer,
    Resume,
    SQLiteCheckpointStore,
    StoreFault,
    VirtualClock,
    interrupt,
)
from pytest_graphflow.testing import (
    GraphRuntimeFactory,
    RecordingRuntime,
    RunRecording,
    make_graph_runtime,
)


class State(BaseModel):
    n: int = 0
    log: Annotated[list[str], Reducer(operator.add)] = []


def fan(policy: Any = "every_step") -> CompiledGraph:
    g = Graph("fan", State)
    g.node("plan", lambda s: {"log": ["plan"]})
    g.node("a", lambda s: {"log": ["a"], "n": s.n + 1})
    g.node("b", lambda s: {"log": ["b"]})
    g.edge(START, "plan")
    g.edge("plan", ["a", "b"])
    g.edge("a", END)
    g.edge("b", END)
    return g.compile(checkpoint_policy=policy)


def asking() -> CompiledGraph:
    g = Graph("asking", State)
    g.node("ask", lambda s: {"n": interrupt("how many?", id="count")}, effect="human")
    g.edge(START, "ask")
    g.edge("ask", END)
    return g.compile()


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_make_graph_runtime_builds_the_fixture_stack() -> None:
    runtime = make_graph_runtime()
    assert isinstance(runtime, RecordingRuntime)
    assert runtime.seed == 0
    assert isinstance(runtime.clock, VirtualClock)
    assert runtime.clock.start == DEFAULT_START
    assert isinstance(runtime.store, FaultyStore)
    assert isinstance(runtime.store.inner, InMemoryCheckpointStore)
    assert runtime.store_faults is runtime.store
    assert runtime.store.clock is runtime.clock


def test_arguments_are_honoured() -> None:
    start = datetime(2030, 1, 1, tzinfo=UTC)
    store = InMemoryCheckpointStore()
    runtime = make_graph_runtime(seed=9, start=start, store=store, faulty=False,
                                 max_supersteps=5)
    assert runtime.seed == 9
    assert runtime.clock.now() == start
    assert runtime.store is store
    assert runtime.store_faults is None
    assert runtime.max_supersteps == 5


def test_same_seed_same_stream_other_seed_other_ids() -> None:
    one = make_graph_runtime(seed=5).trace(fan(), {"n": 1})
    two = make_graph_runtime(seed=5).trace(fan(), {"n": 1})
    other = make_graph_runtime(seed=6).trace(fan(), {"n": 1})
    assert one.to_json() == two.to_json()
    assert one.result.run_id != other.result.run_id


def test_a_factory_makes_fresh_runtimes() -> None:
    factory = GraphRuntimeFactory(seed=3)
    first, second = factory(), factory()
    assert first is not second
    assert first.clock is not second.clock
    assert first.store is not second.store
    assert first.seed == second.seed == 3 == factory.seed
    assert factory(seed=4).seed == 4
    assert first.factory is factory
    first.trace(fan())
    assert second.store.calls == []
    assert second.clock.elapsed == 0


def test_a_factory_store_can_be_a_callable_or_sqlite() -> None:
    made: list[InMemoryCheckpointStore] = []

    def fresh() -> InMemoryCheckpointStore:
        made.append(InMemoryCheckpointStore())
        return made[-1]

    runtime = GraphRuntimeFactory(store=fresh)()
    assert runtime.store.inner is made[0]  # type: ignore[attr-defined]
    with make_graph_runtime(store="sqlite") as sqlite_runtime:
        inner = sqlite_runtime.store.inner  # type: ignore[attr-defined]
        assert isinstance(inner, SQLiteCheckpointStore)
        assert inner.path == ":memory:"
        assert sqlite_runtime.trace(fan()).status == "completed"


def test_a_factory_sqlite_dir_and_close(tmp_path: Any) -> None:
    dirs = iter([tmp_path / "one", tmp_path / "two"])

    def next_dir() -> Any:
        path = next(dirs)
        path.mkdir()
        return path

    factory = GraphRuntimeFactory(store="sqlite", sqlite_dir=next_dir)
    a, b = factory(), factory()
    assert a.store.inner.path == str(tmp_path / "one" / "graphflow.db")  # type: ignore[attr-defined]
    assert b.store.inner.path == str(tmp_path / "two" / "graphflow.db")  # type: ignore[attr-defined]
    assert a.store.inner.synchronous == "off"  # type: ignore[attr-defined]
    factory.close()
    import sqlite3

    import anyio

    with pytest.raises(sqlite3.ProgrammingError):
        anyio.run(a.store.inner.latest, "run-x")  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"store": "redis"},
                     "store='redis': use 'memory', 'sqlite', 'postgres', a store", id="store"),
        pytest.param({"checkpoint_policy": "sometimes"},
                     "checkpoint_policy='sometimes'", id="policy"),
        pytest.param({"seed": "1"}, "seed='1'", id="seed"),
    ],
)
def test_bad_arguments(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgument, match=message.replace("(", r"\(")):
        make_graph_runtime(**kwargs)


def test_checkpoint_policy_overrides_the_graphs_on_every_api() -> None:
    graph = fan()
    runtime = make_graph_runtime(checkpoint_policy="never")
    assert runtime.trace(graph).events.of_type("checkpoint_saved") == []
    assert runtime.invoke(graph).status == "completed"
    assert [c for c in runtime.store.calls if c.op == "save"] == []  # type: ignore[attr-defined]
    assert graph.checkpoint_policy == "every_step"  # the user's graph is untouched
    everything = make_graph_runtime(checkpoint_policy="every_step")
    assert len(everything.trace(fan("never")).events.of_type("checkpoint_saved")) == 3


def test_recordings_cover_invoke_trace_and_resume() -> None:
    runtime = make_graph_runtime(seed=1)
    seen: list[RunRecording] = []
    runtime.add_observer(seen.append)
    runtime.invoke(fan(), {"n": 1})
    paused = runtime.invoke(asking())
    assert paused.status == "interrupted"
    runtime.resume(paused.run_id, Resume(4))
    assert [r.graph.graph_id for r in runtime.recordings] == ["fan", "asking", "asking"]
    assert seen == runtime.recordings
    invoked, asked, resumed = runtime.recordings
    assert invoked.status == "completed"
    assert invoked.events[0].type == "run_start"
    assert invoked.path() == [("__start__", "plan"), ("plan", "a"), ("plan", "b"),
                              ("a", "__end__"), ("b", "__end__")]
    assert invoked.path_text() == "START -> plan -> a -> END; plan -> b -> END"
    assert "linkStyle" in invoked.mermaid()
    assert asked.status == "interrupted"
    assert not asked.resumed
    assert resumed.resumed
    assert resumed.status == "completed"
    assert resumed.run_id == asked.run_id
    assert resumed.path_text() == "ask -> END"
    assert runtime.last_recording is resumed


def test_a_run_that_raises_is_recorded_with_its_error() -> None:
    runtime = make_graph_runtime()
    runtime.store.reject_save(nth=2)  # type: ignore[attr-defined]
    with pytest.raises(StoreFault):
        runtime.trace(fan())
    recording = runtime.last_recording
    assert recording is not None
    assert isinstance(recording.error, StoreFault)
    assert recording.status == "raised"
    # The events of the step whose checkpoint was rejected are lost with the exception;
    # the recording still knows which nodes completed.
    assert [e.type for e in recording.events] == ["run_start", "checkpoint_saved"]
    assert recording.visited == ["plan"]


@pytest.mark.anyio
async def test_async_apis_are_recorded(anyio_backend: str) -> None:
    runtime = make_graph_runtime(seed=2)
    trace = await runtime.atrace(fan(), {"n": 1})
    async with runtime.stream(fan(), mode="updates") as updates:
        async for _ in updates:
            pass
    handle = await runtime.start(fan())
    await handle.result()
    assert len(runtime.recordings) == 3
    assert runtime.recordings[0].events == list(trace.events)
    # whatever the stream mode, the recording holds the events
    assert runtime.recordings[1].events[-1].type == "run_end"
    assert runtime.recordings[2].status == "completed"


def test_no_observer_no_recording_is_still_a_graph_runtime() -> None:
    runtime = RecordingRuntime()  # same defaults as GraphRuntime
    assert runtime.recordings == []
    assert runtime.last_recording is None
    assert runtime.store_faults is None
    assert runtime.invoke(fan()).status == "completed"
    assert runtime.last_recording is not None


def test_a_trace_carries_the_store_calls_of_its_run() -> None:
    runtime = make_graph_runtime()
    runtime.trace(fan())
    trace = runtime.trace(fan())  # only this run's calls, not the first run's
    assert [c.op for c in trace.store_log].count("save") == 3
