"""``graph_runtime_factory`` in Hypothesis ``@given`` tests: no ``function_scoped_fixture``
health check, a fresh clock and store per example, the test's seed, failure reports."""

from __future__ import annotations

import pytest
from graphflow_plugin_helpers import Run, dedent


def test_given_with_the_factory_gets_fresh_runtimes(graph_project: pytest.Pytester,
                                                    run: Run) -> None:
    graph_project.makepyfile(test_given=dedent("""
        from hypothesis import given, settings, strategies as st
        from pytest_graphflow._plugin._seed import test_seed as per_test_seed
        from gf_graphs import fan, sleepy

        SESSION_SEED = 31
        SEEN = []

        @settings(max_examples=15, database=None)
        @given(n=st.integers(0, 100))
        def test_each_example_is_fresh(graph_runtime_factory, request, n):
            runtime = graph_runtime_factory()
            # the test's seed, every example (graph_seed is function-scoped: not usable here)
            assert runtime.seed == graph_runtime_factory.seed
            assert runtime.seed == per_test_seed(SESSION_SEED, request.node.nodeid)
            assert runtime.clock.elapsed == 0          # a clock nobody has moved
            assert runtime.store.calls == []           # a store nobody has used
            assert runtime.trace(sleepy(), {"n": n}).state.n == n + 1
            assert runtime.clock.elapsed == 30
            SEEN.append((id(runtime.clock), id(runtime.store.inner), runtime))

        def test_examples_did_not_share(request):
            assert len(SEEN) == 15
            assert len({clock for clock, _, _ in SEEN}) == 15
            assert len({store for _, store, _ in SEEN}) == 15

        @settings(max_examples=5, database=None)
        @given(seed=st.integers(0, 2**32 - 1))
        def test_drawn_seed(graph_runtime_factory, seed):
            runtime = graph_runtime_factory(seed=seed)
            assert runtime.seed == seed
            assert runtime.trace(fan()).status == "completed"
    """))
    result = run("-q", "--graphflow-seed=31", "test_given.py")
    result.assert_outcomes(passed=3)


def test_given_with_the_function_scoped_fixture_points_to_the_factory(
    graph_project: pytest.Pytester, run: Run
) -> None:
    """Twin: ``graph_runtime`` itself is function-scoped; the error says what to use
    (issue 14: Hypothesis' generic health check did not)."""
    graph_project.makepyfile(test_given_bad=dedent("""
        from hypothesis import given, strategies as st

        @given(n=st.integers())
        def test_shared(graph_runtime, n):
            pass
    """))
    result = run("-q", "test_given_bad.py")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*Take graph_runtime_factory instead and call it once per "
                                 "example*"])


def test_the_factory_follows_the_marker_and_closes_its_stores(graph_project: pytest.Pytester,
                                                              run: Run) -> None:
    graph_project.makepyfile(test_given_sqlite=dedent("""
        import sqlite3

        import anyio
        import pytest
        from hypothesis import given, settings, strategies as st
        from gf_graphs import fan

        MADE = []

        @pytest.mark.graphflow(store="sqlite", seed=11)
        @settings(max_examples=3, database=None)
        @given(n=st.integers(0, 3))
        def test_sqlite_examples(graph_runtime_factory, n):
            runtime = graph_runtime_factory()
            assert runtime.seed == 11
            assert type(runtime.store.inner).__name__ == "SQLiteCheckpointStore"
            assert runtime.trace(fan(), {"n": n}).state.n == n + 1
            MADE.append(runtime.store.inner)

        def test_they_were_closed_after_the_test():
            assert len(MADE) == 3
            for store in MADE:
                with pytest.raises(sqlite3.ProgrammingError):
                    anyio.run(store.latest, "run-x")
    """))
    run("-q", "test_given_sqlite.py").assert_outcomes(passed=2)


def test_a_failing_example_reports_its_last_run(graph_project: pytest.Pytester, run: Run) -> None:
    graph_project.makepyfile(test_given_fail=dedent("""
        from hypothesis import given, settings, strategies as st
        from gf_graphs import fan

        @settings(max_examples=50, database=None)
        @given(n=st.integers(0, 100))
        def test_small_only(graph_runtime_factory, n):
            runtime = graph_runtime_factory()
            assert runtime.trace(fan(), {"n": n}).state.n < 10
    """))
    result = run("--graphflow-seed=4", "test_given_fail.py")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*test_small_only(*",
        "*n=9,*",
        "*- graphflow -*",
        "reproduce: pytest test_given_fail.py::test_small_only --graphflow-seed=4",
        "last run: run-*, 1 leg(s) (the test made * other leg(s) before, not shown)",
        "leg 1: run-* of graph 'fan': completed, * events",
        "*run_end completed state={'n': 10,*",  # the shrunk example's run, not a bigger one
    ])


def test_a_runtime_made_in_a_session_fixture_outlives_the_tests(graph_project: pytest.Pytester,
                                                                run: Run) -> None:
    graph_project.makeconftest(dedent("""
        import pytest

        @pytest.fixture(scope="session")
        def shared_runtime(graph_runtime_factory):
            return graph_runtime_factory(store="sqlite")

        @pytest.fixture
        def own_runtime(graph_runtime_factory):
            return graph_runtime_factory()
    """))
    graph_project.makepyfile(test_shared=dedent("""
        from gf_graphs import fan

        SESSION_SEED = 21

        def test_one(shared_runtime, own_runtime, graph_seed):
            assert shared_runtime.seed == SESSION_SEED  # the session's, not test_one's
            assert own_runtime.seed == graph_seed != SESSION_SEED
            assert shared_runtime.trace(fan()).status == "completed"

        def test_two(shared_runtime):  # its SQLite store is still open
            assert len(shared_runtime.recordings) == 1
            assert shared_runtime.trace(fan()).status == "completed"
    """))
    run("-q", "--graphflow-seed=21", "test_shared.py").assert_outcomes(passed=2)
