"""The ``graphflow`` command over a SQLite store file."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from graphflow_test_time import T0
from graphflow_test_time import at as _at
from pytest_graphflow import SQLiteCheckpointStore
from pytest_graphflow._cli._main import main
from pytest_graphflow._records._checkpoint import Checkpoint
from pytest_graphflow._records._events import (
    CheckpointSaved,
    EdgeTransition,
    ErrorEvent,
    Interrupt,
    InterruptEvent,
    NodeEnd,
    NodeStart,
    RunEnd,
    RunStart,
)

MODULE = "graphflow_cli_sample_graphs"



def _events() -> list[dict[str, Any]]:
    common: dict[str, Any] = {"run_id": "run-a", "step": 0}
    events = [
        RunStart(seq=0, time=T0, graph_id="flow", revision="rev-x", thread_id="thread-a",
                 **common),
        EdgeTransition(seq=1, time=T0, source="__start__", target="plan", **common),
        NodeStart(seq=2, time=T0, node="plan", task_id="task-1", **common),
        NodeEnd(seq=3, time=_at(1), node="plan", task_id="task-1", patch={"n": 1},
                started_at=T0, finished_at=_at(1), **common),
        EdgeTransition(seq=4, time=_at(1), source="plan", target="ask", **common),
        NodeStart(seq=5, time=_at(1), node="ask", task_id="task-2", attempt=2, **common),
        ErrorEvent(seq=6, time=_at(1), node="ask", task_id="task-2", error_type="ValueError",
                   message="bad input", will_retry=True, **common),
        InterruptEvent(seq=7, time=_at(2), node="ask", task_id="task-2", interrupts=[
            Interrupt(key="task-2:q", id="q", node="ask", task_id="task-2", payload="?")],
            **common),
        CheckpointSaved(seq=8, time=_at(2), checkpoint_id="cp-2", **common),
        RunEnd(seq=9, time=_at(2), status="interrupted", state={"n": 1}, **common),
    ]
    return [e.model_dump(mode="json") for e in events]


def _checkpoint(cid: str, run: str, at: float, **extra: Any) -> Checkpoint:
    return Checkpoint(id=cid, run_id=run, thread_id=f"thread-{run[4:]}", graph_id="flow",
                      revision="rev-x", step=0, timestamp=_at(at), state={"n": 1}, **extra)


@pytest.fixture
def store_file(tmp_path: Path) -> Path:
    """A store with two recorded runs (run-a with events) and run-c with a checkpoint only."""
    path = tmp_path / "runs.db"

    async def fill() -> None:
        with SQLiteCheckpointStore(path) as store:
            await store.record_run({"run_id": "run-a", "thread_id": "thread-a", "graph_id": "flow",
                                    "revision": "rev-x", "status": "interrupted",
                                    "started_at": T0, "updated_at": _at(2), "error": None,
                                    "tenant_id": None})
            await store.record_run({"run_id": "run-b", "thread_id": "thread-b", "graph_id": "flow",
                                    "status": "completed", "updated_at": _at(9)})
            await store.record_events("run-a", _events())
            await store.save(_checkpoint("cp-2", "run-a", 2, node_id="ask", status="interrupted"))
            await store.save(_checkpoint("cp-9", "run-c", 7, status="failed"))

    anyio.run(fill)
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _fails(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code, out, err = _run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.startswith("graphflow: error: ")
    assert err.count("\n") == 1  # one line
    return err


# -- runs ---------------------------------------------------------------------------------------


def test_runs_prints_a_table(capsys: pytest.CaptureFixture[str], store_file: Path) -> None:
    code, out, err = _run(capsys, "runs", str(store_file))
    assert (code, err) == (0, "")
    rows = [line.split() for line in out.splitlines()]
    assert rows[0] == ["RUN", "ID", "THREAD", "GRAPH", "STATUS", "UPDATED"]
    assert rows[1] == ["run-a", "thread-a", "flow", "interrupted", "2025-01-01T00:00:02Z"]
    assert rows[2] == ["run-b", "thread-b", "flow", "completed", "2025-01-01T00:00:09Z"]
    # a run with checkpoints but no run record is listed from its latest checkpoint
    assert rows[3] == ["run-c", "thread-c", "flow", "failed", "2025-01-01T00:00:07Z"]
    assert len({line.index("thread-") for line in out.splitlines()[1:]}) == 1  # aligned


def test_runs_of_an_empty_store(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    SQLiteCheckpointStore(path).close()
    code, out, _ = _run(capsys, "runs", str(path))
    assert code == 0
    assert out == f"no runs recorded in {path}\n"


# -- events -------------------------------------------------------------------------------------


def test_events_one_line_each(capsys: pytest.CaptureFixture[str], store_file: Path) -> None:
    code, out, err = _run(capsys, "events", str(store_file), "run-a")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert len(lines) == 10
    assert lines[0].split()[:5] == ["0", "00:00:00.000", "step", "0", "run_start"]
    assert "graph_id=flow" in lines[0]
    assert "thread_id=thread-a" in lines[0]
    assert "__start__ -> plan" in lines[1]
    assert lines[3].split()[1] == "00:00:01.000"  # the time column
    assert lines[3].split()[4:6] == ["node_end", "plan"]
    assert 'patch={"n":1}' in lines[3]
    assert "task=task-1" in lines[3]
    assert "attempt=2" in lines[5]
    assert "ValueError: bad input" in lines[6]
    assert lines[6].endswith("bad input will_retry task=task-2")
    assert 'keys=["task-2:q"]' in lines[7]
    assert "checkpoint_id=cp-2" in lines[8]
    assert "status=interrupted" in lines[9]
    assert "state" not in lines[9]  # the state is in `graphflow show`


def test_events_after_compaction(capsys: pytest.CaptureFixture[str], store_file: Path) -> None:
    async def compact() -> None:
        with SQLiteCheckpointStore(store_file) as store:
            await store.compact_events("run-a", 8)

    anyio.run(compact)
    code, out, _ = _run(capsys, "events", str(store_file), "run-a")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "(events before seq 8 were compacted away)"
    assert [line.split()[0] for line in lines[1:]] == ["8", "9"]


def test_events_of_a_run_without_events(
    capsys: pytest.CaptureFixture[str], store_file: Path
) -> None:
    code, out, _ = _run(capsys, "events", str(store_file), "run-b")
    assert code == 0
    assert out == "no events recorded for run run-b\n"


def test_events_of_an_unknown_run(capsys: pytest.CaptureFixture[str], store_file: Path) -> None:
    err = _fails(capsys, "events", str(store_file), "run-zzz")
    assert "'run-zzz'" in err
    assert f"graphflow runs {store_file}" in err


# -- show ---------------------------------------------------------------------------------------


def test_show_prints_the_checkpoint_as_json(
    capsys: pytest.CaptureFixture[str], store_file: Path
) -> None:
    code, out, _ = _run(capsys, "show", str(store_file), "cp-2")
    assert code == 0
    expected = _checkpoint("cp-2", "run-a", 2, node_id="ask", status="interrupted")
    assert json.loads(out) == expected.model_dump(mode="json")
    assert out.startswith('{\n  "id": "cp-2",')


def test_show_an_unknown_checkpoint(capsys: pytest.CaptureFixture[str], store_file: Path) -> None:
    err = _fails(capsys, "show", str(store_file), "cp-nope")
    assert "'cp-nope'" in err


def test_show_a_checkpoint_of_another_format(
    capsys: pytest.CaptureFixture[str], store_file: Path
) -> None:
    db = sqlite3.connect(store_file)
    with db:
        for table in ("checkpoints", "log"):  # wherever the row is (see stores/sqlite/_tail.py)
            db.execute(f"UPDATE {table} SET format_version = 99 WHERE id = 'cp-2'")
    db.close()
    err = _fails(capsys, "show", str(store_file), "cp-2")
    assert "format version 99" in err


# -- bad files ----------------------------------------------------------------------------------


def test_a_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "nope.db"
    err = _fails(capsys, "runs", str(missing))
    assert str(missing) in err
    assert "SQLiteCheckpointStore" in err
    assert not missing.exists()


def test_a_file_that_is_not_a_database(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "notes.db"
    path.write_text("just text, not sqlite " * 50)
    before = path.read_bytes()
    err = _fails(capsys, "events", str(path), "run-a")
    assert "is not a SQLite database" in err
    assert str(path) in err
    assert path.read_bytes() == before


def test_a_foreign_database_is_left_alone(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "other.db"
    db = sqlite3.connect(path)
    with db:
        db.execute("CREATE TABLE things (x)")
    db.close()
    before = path.read_bytes()
    err = _fails(capsys, "show", str(path), "cp-1")
    assert "not a pytest-graphflow store" in err
    assert path.read_bytes() == before
    db = sqlite3.connect(path)
    tables = db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    db.close()
    assert tables == [("things",)]


def test_usage_errors_and_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert main(["runs"]) == 2
    assert main(["frobnicate"]) == 2
    assert "usage: graphflow" in capsys.readouterr().err
    assert main(["--help"]) == 0
    assert "mermaid" in capsys.readouterr().out


# -- mermaid ------------------------------------------------------------------------------------

GRAPHS = """
from pydantic import BaseModel
from pytest_graphflow._graph._builder import END, START, Graph

class State(BaseModel):
    n: int = 0

def step(state):
    return None

builder = Graph("flow", State)
builder.node("plan", step)
builder.node("ask", step, effect="human")
builder.edge(START, "plan")
builder.edge("plan", "ask")
builder.edge("ask", END)
compiled = builder.compile()

broken = Graph("broken", State)
broken.node("lonely", step)

class Holder:
    graph = compiled

not_a_graph = 42
"""


@pytest.fixture
def graphs_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module of sample graphs in the current directory (like a user's project)."""
    (tmp_path / f"{MODULE}.py").write_text(textwrap.dedent(GRAPHS))
    monkeypatch.chdir(tmp_path)
    yield MODULE
    sys.modules.pop(MODULE, None)


def _diagram(graphs_module: str) -> str:
    module = sys.modules.get(graphs_module) or __import__(graphs_module)
    return str(module.compiled.mermaid())


def test_mermaid_of_a_compiled_graph_and_a_graph(
    capsys: pytest.CaptureFixture[str], graphs_module: str
) -> None:
    code, out, _ = _run(capsys, "mermaid", f"{graphs_module}:compiled")
    assert code == 0
    assert out.startswith("flowchart TD\n")
    assert 'n_ask["ask (human)"]' in out
    assert "stroke-width" not in out
    assert _run(capsys, "mermaid", f"{graphs_module}:builder") == (0, out, "")
    assert _run(capsys, "mermaid", f"{graphs_module}:Holder.graph") == (0, out, "")
    assert out == _diagram(graphs_module) + "\n"
    assert str(Path.cwd()) not in sys.path  # the module search path is restored


def test_mermaid_bolds_the_edges_a_run_took(
    capsys: pytest.CaptureFixture[str], graphs_module: str, store_file: Path
) -> None:
    code, out, _ = _run(capsys, "mermaid", f"{graphs_module}:compiled",
                        "--run", str(store_file), "run-a")
    assert code == 0
    assert out.splitlines()[-1] == "    linkStyle 0,1 stroke-width:4px"


def test_mermaid_with_an_unknown_run(
    capsys: pytest.CaptureFixture[str], graphs_module: str, store_file: Path
) -> None:
    err = _fails(capsys, "mermaid", f"{graphs_module}:compiled", "--run", str(store_file),
                 "run-zzz")
    assert "'run-zzz'" in err


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("no_colon_here", "not MODULE:GRAPH"),
        (":compiled", "not MODULE:GRAPH"),
        (f"{MODULE}:", "not MODULE:GRAPH"),
        ("graphflow_cli_no_such_module:g", "cannot import module"),
        (f"{MODULE}:missing", "has no attribute 'missing'"),
        (f"{MODULE}:not_a_graph", "is a int, not a Graph or CompiledGraph"),
        (f"{MODULE}:broken", "structural problem"),
    ],
    ids=["no-colon", "no-module", "no-attribute", "unknown-module", "unknown-attribute",
         "not-a-graph", "invalid-graph"],
)
def test_mermaid_of_a_bad_target(
    capsys: pytest.CaptureFixture[str], graphs_module: str, target: str, expected: str
) -> None:
    assert expected in _fails(capsys, "mermaid", target)


# -- the installed console script ---------------------------------------------------------------


def test_the_graphflow_console_script(store_file: Path) -> None:
    script = Path(sys.executable).parent / "graphflow"
    # `pip install -e .` (what .ci/run does) installs the console script next to Python.
    assert script.exists(), f"the graphflow console script is missing: {script}"
    done = subprocess.run([str(script), "runs", str(store_file)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines()[1].split()[0] == "run-a"
    failed = subprocess.run([str(script), "show", str(store_file), "cp-nope"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert failed.returncode == 2
    assert failed.stderr.startswith("graphflow: error: no checkpoint 'cp-nope'")


# -- --json and escaping (issue 12) -----------------------------------------------------------


def test_runs_json_is_for_scripts(capsys: pytest.CaptureFixture[str], store_file: Path) -> None:
    code, out, err = _run(capsys, "runs", str(store_file), "--json")
    assert (code, err) == (0, "")
    records = json.loads(out)
    assert [r["run_id"] for r in records] == ["run-a", "run-b", "run-c"]
    assert records[0]["status"] == "interrupted"
    assert records[2] == {"run_id": "run-c", "thread_id": "thread-c", "graph_id": "flow",
                          "status": "failed", "updated_at": "2025-01-01T00:00:07Z"}


def test_events_json_is_for_scripts(capsys: pytest.CaptureFixture[str], store_file: Path) -> None:
    code, out, err = _run(capsys, "events", str(store_file), "run-a", "--json")
    assert (code, err) == (0, "")
    found = json.loads(out)
    assert found["run_id"] == "run-a"
    assert found["earliest_seq"] == 0
    assert found["events"] == _events()


def _forged(path: Path) -> None:
    """A store whose data holds control characters (written by another tool, or by an
    older version that did not check ids)."""
    async def fill() -> None:
        with SQLiteCheckpointStore(path) as store:
            await store.record_events("run-x", [
                {"seq": 0, "type": "error", "run_id": "run-x", "step": 0, "node": "n",
                 "error_type": "ValueError", "message": "boom\x1b[2J\nseq  step 9 forged"},
            ])
            await store.save(_checkpoint("cp-x", "run-x", 1))
    anyio.run(fill)
    db = sqlite3.connect(path)
    with db:
        db.execute("INSERT INTO runs (run_id, thread_id, status, data) VALUES (?, ?, ?, ?)",
                   ("run-y", "t\nrun-z  forged", "completed",
                    json.dumps({"run_id": "run-y", "thread_id": "t\nrun-z  forged\x07",
                                "status": "completed"})))
    db.close()


@pytest.mark.parametrize("argv", [["runs"], ["events", "run-x"], ["show", "cp-x"]],
                         ids=["runs", "events", "show"])
def test_control_characters_never_reach_the_terminal(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str]
) -> None:
    path = tmp_path / "forged.db"
    _forged(path)
    code, out, err = _run(capsys, argv[0], str(path), *argv[1:])
    assert (code, err) == (0, "")
    assert all(ch == "\n" or ch.isprintable() for ch in out), out
    assert "forged" not in "".join(line for line in out.splitlines()
                                   if line.lstrip().startswith(("run-z", "seq")))
    if argv[0] == "runs":
        assert "t\\nrun-z  forged\\x07" in out
        assert len(out.splitlines()) == 3  # header, run-x, run-y: no forged row
    if argv[0] == "events":
        assert "boom\\x1b[2J\\nseq  step 9 forged" in out
        assert len(out.splitlines()) == 1


def test_json_output_escapes_control_characters(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "forged.db"
    _forged(path)
    code, out, _ = _run(capsys, "runs", str(path), "--json")
    assert code == 0
    assert out.isascii()
    assert "\x07" not in out
    threads = {r["run_id"]: r["thread_id"] for r in json.loads(out)}
    assert threads["run-y"] == "t\nrun-z  forged\x07"
