"""A test's runtime, store and runs go when the test ends, freed by reference counting alone.

pytest keeps every test item to the session's end; the plugin kept each item's graphflow
state on it (the runtime's recordings, the clock, the store with every checkpoint), and a
``RecordingRuntime`` was a reference cycle (its ``on_leg`` a bound method of itself). So a
session of thousands of tests kept every test's runs alive, and the collector walked them
all again and again: a full collection of ~75 ms every couple of hundred approval tests, more
than a third of what a test cost over an empty one. These tests run inner sessions with the
collector off from the first test: whatever a test's runtime leaves in a cycle, or on the
item, stays alive there and the last test sees it.
"""

from __future__ import annotations

import pytest

LIFETIME = '''
import gc
import weakref

import pytest
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, Resume, interrupt


class S(BaseModel):
    n: int = 0
    answer: str = ""


g = Graph("lifetime", S)
g.node("draft", lambda s: {"n": s.n + 1})
g.node("approve", lambda s: {"answer": interrupt({"draft": s.n}, id="ok")})
g.node("publish", lambda s: {"n": s.n + 10})
g.edge(START, "draft").edge("draft", "approve").edge("approve", "publish").edge("publish", END)
graph = g.compile()

REFS = []


@pytest.fixture(scope="module", autouse=True)
def collector_off():
    gc.collect()
    gc.disable()
    yield
    gc.enable()


def _keep(*objects):
    REFS.append([weakref.ref(o) for o in objects])


@pytest.mark.parametrize("i", range(3))
def test_runtime(graph_runtime, store_faults, i):
    paused = graph_runtime.invoke(graph, {"n": i})
    assert paused.status == "interrupted"
    done = graph_runtime.resume(paused.run_id, Resume("yes"))
    assert done.data == {"n": i + 11, "answer": "yes"}
    _keep(graph_runtime, store_faults, store_faults.inner, graph_runtime.clock)


@pytest.mark.parametrize("i", range(2))
def test_factory(graph_runtime_factory, i):
    runtime = graph_runtime_factory()
    assert runtime.invoke(graph, {"n": i}).status == "interrupted"
    _keep(runtime, runtime.store)


@pytest.mark.parametrize("i", range(2))
def test_failing(graph_runtime, i):
    # (a failing test's traceback holds its frames, and so its fixtures: not checked below)
    graph_runtime.invoke(graph, {"n": i})
    assert i < 0, "fails on purpose: its report still gets the graphflow section"


def test_every_earlier_passing_tests_runtime_is_gone():
    alive = [[type(r()).__name__ for r in refs if r() is not None] for refs in REFS]
    assert len(alive) == 5
    assert not any(alive), alive
'''


def test_a_tests_runtime_store_and_runs_are_freed_when_it_ends(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_lifetime=LIFETIME)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider",
                                           "-p", "no:xdist", "-rA")
    result.assert_outcomes(passed=6, failed=2)
    # the failure report, made before the test's state is let go, still shows its run
    for i in range(2):
        result.stdout.fnmatch_lines([
            "*- graphflow -*",
            f"reproduce: pytest 'test_lifetime.py::test_failing[[]{i}[]]' --graphflow-seed=*",
            "*run-*interrupted*"])
    assert "PASSED test_lifetime.py::test_every_earlier_passing_tests_runtime_is_gone" \
        in result.stdout.str()


def test_a_forwarded_store_method_holds_its_faulty_store_weakly() -> None:
    """A ``FaultyStore`` forwards what it does not wrap itself (``artifacts``, ``prune``...)
    through a function it keeps on the instance: that function holds the store weakly (a
    strong hold was a reference cycle), so it works while the store lives and says what
    happened after."""
    import gc
    import weakref

    import anyio

    from pytest_graphflow import FaultyStore, InMemoryCheckpointStore

    gc.collect()
    gc.disable()
    try:
        faults = FaultyStore(InMemoryCheckpointStore())
        artifacts = faults.artifacts
        assert artifacts is faults.artifacts  # kept: found directly from now on
        assert anyio.run(artifacts, "run-none") == []
        assert [call.op for call in faults.calls] == ["artifacts"]
        gone = weakref.ref(faults)
        del faults
        assert gone() is None  # freed at once: no cycle
        with pytest.raises(ReferenceError, match=r"FaultyStore\.artifacts: the FaultyStore"):
            anyio.run(artifacts, "run-none")
    finally:
        gc.enable()
