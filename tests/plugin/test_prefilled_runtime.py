"""A test that takes ``graph_runtime`` itself gets its runtime without pytest's fixture
machinery: made at the end of its setup, after every other fixture, and handed to the test
as its argument (issue 29: pytest's fixture machinery cost ~170 calls a
test). These tests pin that it is the runtime the fixture makes: the same parts, the same
object wherever the test reaches it, the same runs; and that the fixture itself still makes
it whenever pytest's machinery is asked for (an override, other stores, ``--setup-show``,
a Hypothesis test)."""

from __future__ import annotations

import re

import pytest
from graphflow_plugin_helpers import Run, dedent

# Records, per test, whether pytest set ``graph_runtime`` up as a fixture.
SETUP_SPY = '''
import pytest

SET_UP = []


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    if fixturedef.argname == "graph_runtime":
        SET_UP.append(request.node.name)
    return (yield)
'''

SAME_OBJECTS = '''
import pytest
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, Resume, interrupt
from pytest_graphflow.testing import RecordingRuntime

import conftest


class S(BaseModel):
    n: int = 0
    answer: str = ""


g = Graph("prefilled", S)
g.node("draft", lambda s: {"n": s.n + 1})
g.node("approve", lambda s: {"answer": interrupt({"draft": s.n}, id="ok")})
g.node("publish", lambda s: {"n": s.n + 10})
g.edge(START, "draft").edge("draft", "approve").edge("approve", "publish").edge("publish", END)
graph = g.compile()
RUNS = {}


@pytest.fixture
def wrapped(graph_runtime):
    return graph_runtime


def test_parts(store_faults, graph_runtime, virtual_clock, checkpoint_store, graph_seed,
               wrapped, request):
    assert type(graph_runtime) is RecordingRuntime
    assert graph_runtime is wrapped is request.getfixturevalue("graph_runtime")
    assert graph_runtime.store is store_faults and store_faults.inner is checkpoint_store
    assert graph_runtime.clock is virtual_clock and store_faults.clock is virtual_clock
    assert graph_runtime.seed == graph_seed
    assert graph_runtime.factory is not None
    assert conftest.SET_UP == ["test_parts"]  # asked of pytest by ``wrapped`` only


@pytest.mark.graphflow(seed=5)
def test_runs(graph_runtime):
    paused = graph_runtime.invoke(graph, {"n": 1})
    done = graph_runtime.resume(paused.run_id, Resume("yes"))
    RUNS["runs"] = (paused.run_id, done.data, [c.op for c in graph_runtime.store_faults.calls],
                    [e.model_dump_json() for leg in graph_runtime.recordings
                     for e in leg.events])
    assert conftest.SET_UP == ["test_parts"]  # this test's runtime: no fixture set up


@pytest.mark.graphflow(seed=5)
def test_runs_as_the_fixture_makes_them(request):
    runtime = request.getfixturevalue("graph_runtime")  # pytest's fixture path
    paused = runtime.invoke(graph, {"n": 1})
    done = runtime.resume(paused.run_id, Resume("yes"))
    assert RUNS["runs"] == (paused.run_id, done.data,
                            [c.op for c in runtime.store_faults.calls],
                            [e.model_dump_json() for leg in runtime.recordings
                             for e in leg.events])
    assert conftest.SET_UP[-1] == "test_runs_as_the_fixture_makes_them"
'''


def test_the_runtime_handed_to_the_test_is_the_fixtures(pytester: pytest.Pytester,
                                                              run: Run) -> None:
    pytester.makeconftest(SETUP_SPY)
    pytester.makepyfile(test_prefilled=SAME_OBJECTS)
    run("-q").assert_outcomes(passed=3)


def test_an_overridden_graph_runtime_is_set_up_by_pytest(pytester: pytest.Pytester,
                                                          run: Run) -> None:
    pytester.makeconftest(SETUP_SPY + dedent('''
        @pytest.fixture
        def graph_runtime(graph_runtime):
            graph_runtime.mine = True
            return graph_runtime
    '''))
    pytester.makepyfile(test_overridden=dedent('''
        import conftest

        def test_mine(graph_runtime):
            assert graph_runtime.mine
            assert conftest.SET_UP == ["test_mine", "test_mine"]  # the override and ours
    '''))
    run("-q").assert_outcomes(passed=1)


def test_an_overridden_part_is_asked_of_pytest(pytester: pytest.Pytester, run: Run) -> None:
    pytester.makeconftest(SETUP_SPY + dedent('''
        from pytest_graphflow import InMemoryCheckpointStore

        @pytest.fixture
        def checkpoint_store():
            store = InMemoryCheckpointStore()
            store.mine = True
            return store
    '''))
    pytester.makepyfile(test_part=dedent('''
        import conftest

        def test_part(graph_runtime):
            assert graph_runtime.store_faults.inner.mine
            assert conftest.SET_UP == ["test_part"]
    '''))
    run("-q").assert_outcomes(passed=1)


def test_a_sqlite_test_gets_its_runtime_from_the_fixture(pytester: pytest.Pytester,
                                                         run: Run) -> None:
    pytester.makeconftest(SETUP_SPY)
    pytester.makepyfile(test_sqlite=dedent('''
        import pytest
        import conftest

        @pytest.mark.graphflow(store="sqlite")
        def test_sqlite(graph_runtime, tmp_path):
            assert type(graph_runtime.store_faults.inner).__name__ == "SQLiteCheckpointStore"
            assert conftest.SET_UP == ["test_sqlite"]
    '''))
    run("-q").assert_outcomes(passed=1)


def test_setup_show_still_lists_graph_runtime(pytester: pytest.Pytester, run: Run) -> None:
    pytester.makepyfile(test_shown=dedent('''
        def test_shown(graph_runtime):
            assert graph_runtime.seed is not None
    '''))
    result = run("--setup-show")
    result.assert_outcomes(passed=1)
    assert re.search(r"SETUP\s+F graph_runtime", result.stdout.str()), result.stdout.str()


def test_a_hypothesis_test_taking_graph_runtime_still_fails_in_its_setup(
        pytester: pytest.Pytester, run: Run) -> None:
    pytester.makepyfile(test_given=dedent('''
        from hypothesis import given, strategies as st

        @given(st.integers())
        def test_given(graph_runtime, n):
            pass
    '''))
    result = run("-q")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*graph_runtime is one runtime per test*"])


def test_a_runtime_that_cannot_be_made_fails_the_setup_not_the_session(
        pytester: pytest.Pytester, run: Run) -> None:
    pytester.makeconftest(dedent('''
        from pytest_graphflow._plugin import _runtime

        def refuse(*args, **kwargs):
            raise RuntimeError("no runtime today")

        def pytest_sessionstart(session):
            session.config.add_cleanup(
                lambda made=_runtime.memory_runtime: setattr(_runtime, "memory_runtime", made))
            _runtime.memory_runtime = refuse
    '''))
    pytester.makepyfile(test_broken=dedent('''
        def test_broken(graph_runtime):
            pass

        def test_other():
            pass
    '''))
    result = run("-q")
    result.assert_outcomes(errors=1, passed=1)
    result.stdout.fnmatch_lines(["*ERROR at setup of test_broken*", "*no runtime today*"])


def test_a_marker_a_fixture_applies_is_read_as_the_fixture_read_it(
        pytester: pytest.Pytester, run: Run) -> None:
    """``request.applymarker(pytest.mark.graphflow(seed=5))`` in an autouse fixture sets the
    seed of a test taking ``graph_runtime`` itself: the runtime is made at the end of the
    setup, after every fixture (it was made before them for a while, with the session's
    seed), and a fixture taking ``graph_runtime`` gets that runtime too."""
    pytester.makepyfile(test_applied="""
        import pytest

        @pytest.fixture(autouse=True)
        def seeded(request):
            request.applymarker(pytest.mark.graphflow(seed=5))

        @pytest.fixture
        def app(graph_runtime):
            return graph_runtime

        def test_seed(graph_runtime):
            assert graph_runtime.seed == 5

        def test_through_a_fixture(app, graph_runtime):
            assert app is graph_runtime
            assert graph_runtime.seed == 5
    """)
    run().assert_outcomes(passed=2)
