"""``--graphflow-store`` and the ``graphflow_store`` ini key: which store the fixtures build."""

from __future__ import annotations

import pytest
from graphflow_plugin_helpers import Run, dedent

STORE_TESTS = dedent("""
    import pytest
    from gf_graphs import fan

    def test_store_kind(checkpoint_store, graph_runtime, request):
        print(f"STORE {type(checkpoint_store).__name__}")
        assert graph_runtime.trace(fan()).status == "completed"

    @pytest.mark.graphflow(store="memory")
    def test_marker_wins(checkpoint_store):
        assert type(checkpoint_store).__name__ == "InMemoryCheckpointStore"

    def test_factory_follows(graph_runtime_factory, checkpoint_store):
        runtime = graph_runtime_factory()
        assert type(runtime.store.inner) is type(checkpoint_store)
        assert runtime.trace(fan()).status == "completed"
""")


def test_default_store_is_in_memory(graph_project: pytest.Pytester, run: Run) -> None:
    graph_project.makepyfile(test_store=STORE_TESTS)
    result = run("-rP", "test_store.py")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["STORE InMemoryCheckpointStore"])


def test_option_selects_sqlite(graph_project: pytest.Pytester, run: Run) -> None:
    graph_project.makepyfile(test_store=STORE_TESTS)
    result = run("-rP", "--graphflow-store=sqlite", "test_store.py")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["STORE SQLiteCheckpointStore"])


def test_ini_selects_sqlite_and_the_option_overrides_it(graph_project: pytest.Pytester,
                                                        run: Run) -> None:
    graph_project.makeini("[pytest]\ngraphflow_store = sqlite\n")
    graph_project.makepyfile(test_store=STORE_TESTS)
    result = run("-rP", "test_store.py")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["STORE SQLiteCheckpointStore"])
    result = run("-rP", "--graphflow-store=memory", "test_store.py")
    result.stdout.fnmatch_lines(["STORE InMemoryCheckpointStore"])


@pytest.mark.parametrize(
    ("args", "ini", "message"),
    [
        pytest.param(["--graphflow-store=redis"], None,
                     "ERROR: --graphflow-store='redis' is not a graphflow store: use one of "
                     "'memory', 'sqlite'", id="option"),
        pytest.param([], "graphflow_store = postgres",
                     "ERROR: graphflow_store (ini)='postgres' is not a graphflow store: use one "
                     "of 'memory', 'sqlite'", id="ini"),
    ],
)
def test_bad_stores_are_usage_errors(
    pytester: pytest.Pytester, run: Run, args: list[str], ini: str | None, message: str
) -> None:
    if ini is not None:
        pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile(test_x="def test_x(checkpoint_store): pass\n")
    result = run(*args, "test_x.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
