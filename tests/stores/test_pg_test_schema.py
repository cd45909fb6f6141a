"""The PostgreSQL test fixtures clean up after themselves on the server they are given: a
pytest session drops its process's ``tests_<pid>`` schema when it ends, so a developer's
long-lived server (``GRAPHFLOW_POSTGRES_DSN``) does not keep one schema per pytest worker of
every session it served."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def _test_schemas(dsn: str) -> set[str]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        return {n for (n,) in conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'tests\\_%'")}


def test_a_session_drops_its_process_schema(
    pytester: pytest.Pytester, postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = Path(__file__).resolve().parents[1]  # tests/: graphflow_postgres lives there
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        p for p in (str(here), os.environ.get("PYTHONPATH", "")) if p))
    monkeypatch.setenv("GRAPHFLOW_POSTGRES_DSN", postgres_dsn)
    pytester.makeconftest('pytest_plugins = ["graphflow_postgres"]\n')
    pytester.makepyfile('''
        import os

        from graphflow_chains import counting_chain
        from pytest_graphflow import GraphRuntime, VirtualClock


        def test_writes(make_pg_store, pg_schema):
            assert pg_schema == f"tests_{os.getpid()}"
            store = make_pg_store()
            assert GraphRuntime(store, clock=VirtualClock(), seed=1).invoke(
                counting_chain("chain", 2)).status == "completed"
            print("SCHEMA", pg_schema)
    ''')
    before = _test_schemas(postgres_dsn)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s", "-q")
    result.assert_outcomes(passed=1)
    line = next(x for x in result.outlines if x.startswith("SCHEMA "))
    inner = line.split()[1]
    assert inner not in before  # the inner session's own schema, made by its store
    assert inner not in _test_schemas(postgres_dsn)
