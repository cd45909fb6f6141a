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
                     "'memory', 'sqlite', 'postgres'", id="option"),
        pytest.param([], "graphflow_store = mysql",
                     "ERROR: graphflow_store (ini)='mysql' is not a graphflow store: use one "
                     "of 'memory', 'sqlite', 'postgres'", id="ini"),
        pytest.param(["--graphflow-store=postgres"], None,
                     "ERROR: the graphflow 'postgres' store needs a server: give "
                     "--graphflow-postgres-dsn=DSN (or the graphflow_postgres_dsn ini key, or "
                     "GRAPHFLOW_POSTGRES_DSN)", id="postgres-without-dsn"),
    ],
)
def test_bad_stores_are_usage_errors(
    pytester: pytest.Pytester, run: Run, args: list[str], ini: str | None, message: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GRAPHFLOW_POSTGRES_DSN", raising=False)
    if ini is not None:
        pytester.makeini(f"[pytest]\n{ini}\n")
    pytester.makepyfile(test_x="def test_x(checkpoint_store): pass\n")
    result = run(*args, "test_x.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


POSTGRES_TESTS = dedent("""
    import anyio
    import pytest
    from gf_graphs import fan

    SEEN = []

    @pytest.mark.parametrize("n", [1, 2])
    def test_each_test_has_its_own_schema(checkpoint_store, graph_runtime, n):
        print(f"STORE {type(checkpoint_store).__name__} {checkpoint_store.schema}")
        assert checkpoint_store.schema not in SEEN
        SEEN.append(checkpoint_store.schema)
        # the same seed in both tests: the same ids, which only separate schemas allow
        trace = graph_runtime.trace(fan())
        assert trace.status == "completed"
        runs = anyio.run(checkpoint_store.runs)
        assert [r["run_id"] for r in runs] == [trace.result.run_id]

    def test_factory_follows(graph_runtime_factory, checkpoint_store):
        runtime = graph_runtime_factory()
        assert type(runtime.store.inner).__name__ == "PostgresCheckpointStore"
        assert runtime.store.inner.schema != checkpoint_store.schema
        assert runtime.trace(fan()).status == "completed"
""")


def _schemas(dsn: str) -> set[str]:
    """The test schemas of this process (the inner session runs in it; other xdist workers
    make their own meanwhile)."""
    import os

    import psycopg

    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE %s",
                            (f"graphflow\\_test\\_{os.getpid()}\\_%",)).fetchall()
    return {r[0] for r in rows}


@pytest.mark.parametrize("where", ["option", "ini", "env"])
def test_postgres_store_from_option_ini_or_env(
    graph_project: pytest.Pytester, run: Run, postgres_dsn: str, where: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("GRAPHFLOW_POSTGRES_DSN", raising=False)
    args = ["-rP", "--graphflow-store=postgres", "--graphflow-seed=7", "test_store.py"]
    if where == "option":
        args.append(f"--graphflow-postgres-dsn={postgres_dsn}")
    elif where == "ini":
        graph_project.makeini(f"[pytest]\ngraphflow_postgres_dsn = {postgres_dsn}\n")
    else:
        monkeypatch.setenv("GRAPHFLOW_POSTGRES_DSN", postgres_dsn)
    graph_project.makepyfile(test_store=POSTGRES_TESTS)
    result = run(*args)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["STORE PostgresCheckpointStore graphflow_test_*"])
    assert _schemas(postgres_dsn) == set()  # every test's schema was dropped
