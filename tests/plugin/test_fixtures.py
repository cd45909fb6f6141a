"""The fixtures: ``graph_runtime`` and its parts, in sync tests and in anyio tests (asyncio and
trio), and in a test file with no conftest at all."""

from __future__ import annotations

import pytest
from graphflow_plugin_helpers import GRAPHS, Run, dedent


def test_sync_fixtures_build_one_deterministic_runtime(graph_project: pytest.Pytester,
                                                       run: Run) -> None:
    graph_project.makepyfile(test_sync=dedent("""
        import datetime

        import pytest
        from pytest_graphflow import (
            DEFAULT_START, InMemoryCheckpointStore, StoreFault, VirtualClock,
        )
        from pytest_graphflow import FaultyStore
        from gf_graphs import fan, sleepy

        def test_parts_fit_together(graph_runtime, graph_seed, virtual_clock, checkpoint_store,
                                    store_faults):
            assert isinstance(graph_seed, int) and 0 <= graph_seed < 2**32
            assert isinstance(virtual_clock, VirtualClock)
            assert virtual_clock.start == DEFAULT_START
            assert isinstance(checkpoint_store, InMemoryCheckpointStore)
            assert isinstance(store_faults, FaultyStore) and store_faults.inner is checkpoint_store
            assert graph_runtime.store is store_faults
            assert graph_runtime.clock is virtual_clock
            assert graph_runtime.seed == graph_seed

        def test_trace_runs_to_the_end(graph_runtime, store_faults):
            trace = graph_runtime.trace(fan(), {"n": 1})
            assert trace.status == "completed"
            assert trace.state.n == 2 and sorted(trace.state.log) == ["a", "b", "join", "plan"]
            assert trace.events[0].type == "run_start" and trace.events[-1].type == "run_end"
            assert [c.op for c in store_faults.calls].count("save") == 4

        def test_nodes_sleep_in_virtual_time(graph_runtime, virtual_clock):
            trace = graph_runtime.trace(sleepy())
            assert trace.state.n == 1
            assert virtual_clock.elapsed == 30
            assert trace.events[-1].time - trace.events[0].time == datetime.timedelta(seconds=30)

        def test_store_faults_reach_the_runtime(graph_runtime, store_faults):
            store_faults.reject_save(nth=2)
            with pytest.raises(StoreFault):
                graph_runtime.trace(fan())
            saves = [c.outcome for c in store_faults.calls if c.op == "save"]
            assert saves[:2] == ["ok", "rejected"]

        def test_same_seed_same_events(graph_runtime, graph_runtime_factory, graph_seed):
            first = graph_runtime.trace(fan(), {"n": 1})
            again = graph_runtime_factory(seed=graph_seed).trace(fan(), {"n": 1})
            assert first.to_json() == again.to_json()
    """))
    result = run("-q", "test_sync.py")
    result.assert_outcomes(passed=5)


def test_a_failing_sync_test_still_fails(graph_project: pytest.Pytester, run: Run) -> None:
    """Twin of the test above: the fixtures do not swallow a test's own failure."""
    graph_project.makepyfile(test_sync_fail=dedent("""
        from gf_graphs import fan

        def test_wrong_expectation(graph_runtime):
            assert graph_runtime.trace(fan(), {"n": 1}).state.n == 99
    """))
    result = run("-q", "test_sync_fail.py")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*assert 2 == 99*"])


def test_async_fixtures_on_both_anyio_backends(graph_project: pytest.Pytester, run: Run) -> None:
    graph_project.makepyfile(test_async=dedent("""
        import pytest
        from pytest_graphflow import VirtualClock
        from gf_graphs import fan, sleepy

        pytestmark = pytest.mark.anyio

        async def test_atrace(graph_runtime, anyio_backend):
            trace = await graph_runtime.atrace(fan(), {"n": 1})
            assert trace.status == "completed" and trace.state.n == 2

        async def test_virtual_sleep(graph_runtime, virtual_clock, anyio_backend):
            trace = await graph_runtime.atrace(sleepy())
            assert trace.state.n == 1 and virtual_clock.elapsed == 30

        async def test_async_and_sync_agree(graph_runtime, graph_runtime_factory, graph_seed):
            streamed = await graph_runtime.atrace(fan(), {"n": 1})
            other = await graph_runtime_factory(seed=graph_seed).atrace(fan(), {"n": 1})
            assert streamed.to_json() == other.to_json()
    """))
    result = run("-v", "test_async.py")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["*test_atrace?asyncio?*PASSED*", "*test_atrace?trio?*PASSED*"])


def test_without_a_conftest_an_async_test_runs_on_every_installed_backend(
    pytester: pytest.Pytester, run: Run
) -> None:
    """docs/testing.md: the plugin provides no ``anyio_backend``; anyio's runs a marked test on
    asyncio and, trio being installed (the ``test`` extra), on trio too. A conftest that
    returns ``"asyncio"`` narrows it to one."""
    pytest.importorskip("trio")
    pytester.makepyfile(gf_graphs=GRAPHS)
    pytester.syspathinsert()
    pytester.makepyfile(test_default=dedent("""
        import pytest
        from gf_graphs import fan

        @pytest.mark.anyio
        async def test_where(graph_runtime):
            assert (await graph_runtime.atrace(fan())).status == "completed"
    """))
    result = run("-v", "test_default.py")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*test_where?asyncio?*", "*test_where?trio?*"], consecutive=False)
    pytester.makeconftest(dedent("""
        import pytest

        @pytest.fixture
        def anyio_backend():
            return "asyncio"
    """))
    run("test_default.py").assert_outcomes(passed=1)


def test_a_failing_async_test_still_fails(graph_project: pytest.Pytester, run: Run) -> None:
    """Twin: a wrong expectation fails on both backends."""
    graph_project.makepyfile(test_async_fail=dedent("""
        import pytest
        from gf_graphs import fan

        @pytest.mark.anyio
        async def test_wrong(graph_runtime):
            assert (await graph_runtime.atrace(fan(), {"n": 1})).state.n == 99
    """))
    result = run("-q", "test_async_fail.py")
    result.assert_outcomes(failed=2)


def test_a_conftest_free_file_with_only_graph_runtime_works(pytester: pytest.Pytester,
                                                            run: Run) -> None:
    pytester.makepyfile(test_plain=dedent("""
        def test_x(graph_runtime):
            assert graph_runtime.seed is not None
    """))
    result = run("-q", "test_plain.py")
    result.assert_outcomes(passed=1)


def test_without_the_plugin_the_fixture_is_unknown(pytester: pytest.Pytester, run: Run) -> None:
    """Twin: ``-p no:graphflow`` turns the plugin off, and with it the fixture."""
    pytester.makepyfile(test_plain=dedent("""
        def test_x(graph_runtime):
            pass
    """))
    result = run("-q", "-p", "no:graphflow", "test_plain.py")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'graph_runtime' not found*"])


def test_graph_runtime_factory_is_also_an_attribute(graph_project: pytest.Pytester,
                                                   run: Run) -> None:
    graph_project.makepyfile(test_attr=dedent("""
        from gf_graphs import fan

        def test_factory_attribute(graph_runtime, graph_runtime_factory, graph_seed):
            assert graph_runtime.factory is graph_runtime_factory
            fresh = graph_runtime.factory()
            assert fresh is not graph_runtime and fresh.store is not graph_runtime.store
            assert fresh.seed == graph_seed
    """))
    run("-q", "test_attr.py").assert_outcomes(passed=1)


def test_a_conftest_override_of_a_part_reaches_graph_runtime(graph_project: pytest.Pytester,
                                                             run: Run) -> None:
    """``graph_runtime`` builds its parts itself (one fixture instead of five), but a conftest
    that overrides a part, as pytest users do, still gets its own part under the runtime."""
    graph_project.makeconftest(dedent("""
        import pytest
        from pytest_graphflow import InMemoryCheckpointStore, VirtualClock
        import datetime

        class TaggedStore(InMemoryCheckpointStore):
            tag = "mine"

        @pytest.fixture
        def checkpoint_store():
            return TaggedStore()

        @pytest.fixture
        def virtual_clock():
            return VirtualClock(datetime.datetime(2030, 1, 1, tzinfo=datetime.timezone.utc))
    """))
    graph_project.makepyfile(test_override=dedent("""
        from gf_graphs import fan

        def test_runtime_uses_the_override(graph_runtime, checkpoint_store, virtual_clock):
            assert checkpoint_store.tag == "mine"
            assert graph_runtime.store.inner is checkpoint_store
            assert graph_runtime.clock is virtual_clock
            assert graph_runtime.clock.now().year == 2030
            assert graph_runtime.trace(fan(), {"n": 1}).status == "completed"

        def test_runtime_alone_uses_the_override(graph_runtime):
            assert graph_runtime.store.inner.tag == "mine"
            assert graph_runtime.clock.now().year == 2030
    """))
    result = run("-q", "test_override.py")
    result.assert_outcomes(passed=2)


def test_a_sqlite_store_closes_when_the_test_ends(graph_project: pytest.Pytester,
                                                  run: Run) -> None:
    graph_project.makepyfile(test_close=dedent("""
        import pytest
        from gf_graphs import fan

        held = []

        @pytest.mark.graphflow(store="sqlite")
        def test_runs_on_sqlite(graph_runtime):
            held.append(graph_runtime.store.inner)
            assert graph_runtime.trace(fan(), {"n": 1}).status == "completed"

        def test_the_store_was_closed():
            (store,) = held
            with pytest.raises(Exception, match="closed"):
                store.vacuum()
    """))
    result = run("-q", "-p", "no:randomly", "test_close.py")
    result.assert_outcomes(passed=2)


def test_fixtures_hand_over_objects_whose_classes_show_their_public_module(
        graph_project: pytest.Pytester, run_subprocess: Run) -> None:
    # a fresh interpreter: in this one every class was shown publicly long ago
    graph_project.makepyfile(test_gf_public_reprs=dedent("""
        def test_reprs(graph_runtime, checkpoint_store, store_faults, virtual_clock):
            assert repr(type(graph_runtime)) == (
                "<class 'pytest_graphflow.testing.RecordingRuntime'>")
            assert type(checkpoint_store).__module__ == "pytest_graphflow"
            assert type(store_faults).__module__ == "pytest_graphflow"
            assert type(virtual_clock).__module__ == "pytest_graphflow"
    """))
    result = run_subprocess("-q", "test_gf_public_reprs.py")
    result.assert_outcomes(passed=1)
