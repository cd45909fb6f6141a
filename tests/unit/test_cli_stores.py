"""``graphflow`` over every store (issue 28): "every command takes a SQLite path or a
PostgreSQL DSN (password never printed); `graphflow --version`; `python -m pytest_graphflow`
runs the CLI."

Each command runs as a real process (``python -m pytest_graphflow``), on one run recorded
both in a SQLite file and in a PostgreSQL schema: the ids derive from the runtime's seed, so
the two stores must print the same thing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from pytest_graphflow import SQLiteCheckpointStore
from pytest_graphflow._cli._main import main

HTML_TESTS = Path(__file__).parents[1] / "html"
SECRET = "hunter2-not-shown"


def graphflow(*args: str, env: dict[str, str] | None = None,
              stdin: int | None = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    """``python -m pytest_graphflow ARGS`` in a fresh process."""
    full = {k: v for k, v in os.environ.items()
            if k not in ("NO_COLOR", "PY_COLORS", "FORCE_COLOR")}
    # The caller's path kept after ours: a checkout run with PYTHONPATH=<its src> (a git
    # worktree beside an editable install) tests its own code in the child too.
    kept = os.environ.get("PYTHONPATH")
    full.update({"PYTHONPATH": os.pathsep.join([str(HTML_TESTS), *([kept] if kept else [])]),
                 **(env or {})})
    return subprocess.run([sys.executable, "-m", "pytest_graphflow", *args], env=full,
                          capture_output=True, text=True, stdin=stdin, timeout=120,
                          check=False)


def _uri(dsn: str, password: str) -> str:
    """``dsn`` (libpq key=value) as a ``postgresql://user:password@/db?host=...`` URI."""
    from psycopg.conninfo import conninfo_to_dict

    parts = {k: str(v) for k, v in conninfo_to_dict(dsn).items()}
    user, db = parts.pop("user", "postgres"), parts.pop("dbname", "postgres")
    query = "&".join(f"{k}={quote(v, safe='')}" for k, v in parts.items())
    return f"postgresql://{user}:{quote(password, safe='')}@/{db}?{query}"


@pytest.fixture
def stores(tmp_path: Path, make_pg_store: Any, postgres_dsn: str
           ) -> dict[str, Any]:
    """The same run (paused at its interrupt) in a SQLite file and in a PostgreSQL schema."""
    sys.path.insert(0, str(HTML_TESTS))
    try:
        from graphflow_html_graph import record
    finally:
        sys.path.remove(str(HTML_TESTS))
    sqlite_history, _ = record(answer=None, store_path=tmp_path / "runs.db")
    pg = make_pg_store()
    pg_history, _ = record(answer=None, store=pg)
    assert pg_history.run_id == sqlite_history.run_id
    return {"file": str(tmp_path / "runs.db"), "schema": pg.schema,
            "run_id": pg_history.run_id, "thread_id": pg_history.thread_id,
            "keyvalue": f"{postgres_dsn} password={SECRET}",
            "uri": _uri(postgres_dsn, SECRET)}


def _commands(s: dict[str, Any], cp: str) -> list[list[str]]:
    run = s["run_id"]
    return [["runs", "STORE", "--json"], ["events", "STORE", run, "--json"],
            ["events", "STORE", run], ["checkpoints", "STORE", run, "--json"],
            ["waiting", "STORE", "--json"], ["show", "STORE", cp],
            ["artifacts", "STORE", run],
            ["mermaid", "graphflow_html_graph:build", "--run", "STORE", run]]


def test_every_read_command_prints_the_same_for_a_postgres_store_as_for_a_sqlite_file(
        stores: dict[str, Any], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(HTML_TESTS))
    assert main(["checkpoints", stores["file"], stores["run_id"], "--json"]) == 0
    first = json.loads(capsys.readouterr().out)[0]["checkpoint_id"]
    for n, command in enumerate(_commands(stores, first)):
        form = ("keyvalue", "uri")[n % 2]  # both ways of writing a DSN
        assert main([stores["file"] if a == "STORE" else a for a in command]) == 0, command
        on_file = capsys.readouterr().out  # the reference: in this process
        on_pg = graphflow(*[stores[form] if a == "STORE" else a for a in command],
                          "--schema", stores["schema"])
        assert on_pg.returncode == 0, (command, on_pg.stderr)
        assert SECRET not in on_pg.stdout + on_pg.stderr
        assert on_pg.stdout == on_file, command


def test_export_and_html_read_a_postgres_store(stores: dict[str, Any], tmp_path: Path) -> None:
    pg = [stores["uri"], stores["run_id"]]
    exported = graphflow("export", *pg, str(tmp_path / "pg.history.json"),
                         "--schema", stores["schema"])
    assert exported.returncode == 0, exported.stderr
    assert SECRET not in exported.stdout + exported.stderr
    history = json.loads((tmp_path / "pg.history.json").read_text())
    assert history["run_id"] == stores["run_id"]
    assert "***" in history["source"]
    assert SECRET not in history["source"]
    page = graphflow("html", *pg, "-o", str(tmp_path / "pg.html"), "--schema", stores["schema"])
    assert page.returncode == 0, page.stderr
    assert f"run {stores['run_id']} of graph shop" in (tmp_path / "pg.html").read_text()


def _no_run(s: dict[str, Any]) -> list[str]:
    return ["events", s["uri"], "run-nope", "--schema", s["schema"]]


def _no_store_schema(s: dict[str, Any]) -> list[str]:
    return ["runs", s["keyvalue"], "--schema", "graphflow_no_such_schema"]


def _bad_port(s: dict[str, Any]) -> list[str]:
    return ["runs", f"postgresql://app:{SECRET}@127.0.0.1:1/graphs"]


def _bad_dsn(s: dict[str, Any]) -> list[str]:
    return ["runs", f"host=/nowhere password={SECRET} port=nan"]


def _bad_schema_name(s: dict[str, Any]) -> list[str]:
    return ["runs", s["uri"], "--schema", "Bad;Name"]


def _html_without_run_id(s: dict[str, Any]) -> list[str]:
    return ["html", s["uri"], "-o", str(Path(s["file"]).with_name("o.html")), "--schema",
            s["schema"]]


def _schema_for_a_file(s: dict[str, Any]) -> list[str]:
    return ["runs", s["file"], "--schema", "graphflow"]


@pytest.mark.parametrize(("make", "text"), [
    (_no_run, "no run 'run-nope' in postgresql://postgres:***@/"),
    (_no_store_schema, "no pytest-graphflow store in schema 'graphflow_no_such_schema' of '"),
    (_bad_port, "cannot open the store on 'postgresql://app:***@127.0.0.1:1/graphs'"),
    (_bad_dsn, "password=***"),
    (_bad_schema_name, "--schema: "),
    (_schema_for_a_file, "--schema=graphflow applies to a PostgreSQL store"),
    (_html_without_run_id, "is a PostgreSQL store; pass the RUN_ID of the run to draw"),
], ids=["unknown-run", "schema-without-a-store", "server-not-reachable", "bad-dsn",
        "bad-schema-name", "schema-for-a-file", "html-without-run-id"])
def test_a_problem_is_one_line_naming_the_store_without_its_password(
        stores: dict[str, Any], make: Any, text: str) -> None:
    done = graphflow(*make(stores))
    assert done.returncode == 2
    assert done.stdout == ""
    assert SECRET not in done.stderr
    assert done.stderr.startswith("graphflow: error: ")
    assert done.stderr.count("\n") == 1, done.stderr
    assert text in done.stderr
    assert "Traceback" not in done.stderr


def test_the_hint_names_the_schema_and_inspecting_creates_no_schema(
        stores: dict[str, Any], postgres_dsn: str) -> None:
    import psycopg

    hint = graphflow(*_no_run(stores)).stderr
    assert f"--schema {stores['schema']}`" in hint
    graphflow(*_no_store_schema(stores))
    with psycopg.connect(postgres_dsn) as conn:
        row = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s",
                           ("graphflow_no_such_schema",)).fetchone()
    assert row is None


def test_delete_thread_deletes_from_a_postgres_store(stores: dict[str, Any]) -> None:
    pg = [stores["uri"], "--schema", stores["schema"]]
    refused = graphflow("delete-thread", stores["uri"], stores["thread_id"], "--schema",
                        stores["schema"])
    assert refused.returncode == 2
    assert "pass --yes" in refused.stderr
    deleted = graphflow("delete-thread", stores["uri"], stores["thread_id"], "--yes",
                        "--schema", stores["schema"])
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.startswith(f"deleted thread {stores['thread_id']!r}: 1 run, ")
    assert json.loads(graphflow("runs", *pg, "--json").stdout) == []
    assert json.loads(graphflow("runs", stores["file"], "--json").stdout) != []


def test_version_names_the_installed_package() -> None:
    from importlib.metadata import version

    done = graphflow("--version")
    assert done.returncode == 0
    assert done.stdout == f"graphflow (pytest-graphflow) {version('pytest-graphflow')}\n"


def test_help_names_both_kinds_of_store() -> None:
    done = graphflow("events", "--help")
    assert done.returncode == 0
    assert "a SQLite store file, or a PostgreSQL DSN" in " ".join(done.stdout.split())
    assert "--schema SCHEMA" in done.stdout


def test_sqlite_store_is_still_opened_read_only(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    with SQLiteCheckpointStore(path):
        pass
    before = path.read_bytes()
    assert graphflow("runs", str(path)).stdout == f"no runs recorded in {path}\n"
    assert path.read_bytes() == before
