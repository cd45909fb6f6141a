"""``@pytest.mark.graphflow(seed=..., start=..., store=..., checkpoint_policy=...)``: what each
argument does, how markers merge, ``--strict-markers``, and a table of bad values."""

from __future__ import annotations

import pytest
from graphflow_plugin_helpers import Run, dedent


def test_marker_arguments_reach_the_fixtures(graph_project: pytest.Pytester, run: Run) -> None:
    graph_project.makepyfile(test_marked=dedent("""
        from datetime import UTC, datetime

        import pytest
        from pytest_graphflow import SQLiteCheckpointStore
        from gf_graphs import fan

        @pytest.mark.graphflow(seed=7)
        def test_seed(graph_seed, graph_runtime):
            assert graph_seed == 7 and graph_runtime.seed == 7

        @pytest.mark.graphflow(start=datetime(2030, 5, 1, tzinfo=UTC))
        def test_start_datetime(virtual_clock, graph_runtime):
            assert virtual_clock.now() == datetime(2030, 5, 1, tzinfo=UTC)
            assert graph_runtime.trace(fan()).events[0].time == datetime(2030, 5, 1, tzinfo=UTC)

        @pytest.mark.graphflow(start="2031-01-02T03:04:05")
        def test_start_text_naive_is_utc(virtual_clock):
            assert virtual_clock.now() == datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC)

        @pytest.mark.graphflow(store="sqlite")
        def test_sqlite_store(checkpoint_store, graph_runtime, tmp_path):
            assert isinstance(checkpoint_store, SQLiteCheckpointStore)
            assert checkpoint_store.path == str(tmp_path / "graphflow.db")
            assert checkpoint_store.synchronous == "off"  # a throwaway file: no fsync
            assert graph_runtime.trace(fan()).status == "completed"

        @pytest.mark.graphflow(checkpoint_policy="never")
        def test_policy_never(graph_runtime):
            trace = graph_runtime.trace(fan())
            assert trace.status == "completed"
            assert trace.events.of_type("checkpoint_saved") == []

        def test_policy_default_is_the_graphs(graph_runtime):
            assert len(graph_runtime.trace(fan()).events.of_type("checkpoint_saved")) == 4

        @pytest.mark.graphflow(checkpoint_policy="never")
        def test_policy_applies_to_invoke_too(graph_runtime, store_faults):
            assert graph_runtime.invoke(fan()).status == "completed"
            assert [c for c in store_faults.calls if c.op == "save"] == []
    """))
    result = run("-q", "--strict-markers", "test_marked.py")
    result.assert_outcomes(passed=7)


def test_markers_merge_closest_first(graph_project: pytest.Pytester, run: Run) -> None:
    graph_project.makepyfile(test_merge=dedent("""
        import pytest

        pytestmark = pytest.mark.graphflow(seed=1, store="sqlite")

        class TestGroup:
            pytestmark = pytest.mark.graphflow(seed=2)

            @pytest.mark.graphflow(checkpoint_policy="on_halt")
            def test_merged(self, graph_seed, checkpoint_store, graph_runtime):
                assert graph_seed == 2
                assert type(checkpoint_store).__name__ == "SQLiteCheckpointStore"
                assert graph_runtime.checkpoint_policy == "on_halt"

        def test_module_level(graph_seed):
            assert graph_seed == 1
    """))
    run("-q", "test_merge.py").assert_outcomes(passed=2)


def test_an_unregistered_marker_fails_under_strict_markers(pytester: pytest.Pytester,
                                                           run: Run) -> None:
    """Twin of the tests above: ``--strict-markers`` is on, and it does bite."""
    pytester.makepyfile(test_typo=dedent("""
        import pytest

        @pytest.mark.graphflw(seed=1)
        def test_x():
            pass
    """))
    result = run("-q", "--strict-markers", "test_typo.py")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*'graphflw' not found in `markers` configuration option*"])


def test_the_marker_is_documented(pytester: pytest.Pytester, run: Run) -> None:
    result = run("--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.graphflow(seed=None, start=None, store=None, "
                                 "checkpoint_policy=None):*"])


BAD_MARKERS = [
    pytest.param("seed='1'", "seed='1' must be an int from 0 to 4294967295*", id="seed-text"),
    pytest.param("seed=-1", "seed=-1 must be an int*", id="seed-negative"),
    pytest.param("seed=2**32", "seed=4294967296 must be an int*", id="seed-too-big"),
    pytest.param("seed=True", "seed=True must be an int*", id="seed-bool"),
    pytest.param("store='redis'", "*store='redis' is not a graphflow store: use one of "
                 "'memory', 'sqlite', 'postgres'", id="store-unknown"),
    pytest.param("start='yesterday'", "*start='yesterday' is not an ISO-8601 date-time*",
                 id="start-text"),
    pytest.param("start=5", "*start=5 must be a datetime or ISO-8601 text*", id="start-int"),
    pytest.param("checkpoint_policy='sometimes'", "*checkpoint_policy='sometimes' is not a "
                 "checkpoint policy: use one of 'every_step', 'never', 'on_halt'*",
                 id="policy-unknown"),
    pytest.param("speed=3", "*unknown argument(s) speed; valid arguments are seed, start, "
                 "store, checkpoint_policy", id="unknown-key"),
    pytest.param("3", "*takes keyword arguments only*got positional (3,)", id="positional"),
]


@pytest.mark.parametrize(("arguments", "message"), BAD_MARKERS)
def test_bad_marker_values_are_usage_errors(
    pytester: pytest.Pytester, run: Run, arguments: str, message: str
) -> None:
    pytester.makepyfile(test_bad=dedent(f"""
        import pytest

        def test_fine():
            pass

        @pytest.mark.graphflow({arguments})
        def test_marked():
            pass
    """))
    result = run("-q", "test_bad.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: @pytest.mark.graphflow on test_bad.py::test_marked: "
                                 f"{message}"])
    result.stdout.no_fnmatch_line("*passed*")  # nothing ran: the session stopped first
