"""Issue 23, item 21: the ``graphflow`` command's hints point the right way, and ``events``
shows each task's own times.

"the CLI on a non-SQLite file says 'or a new path to create one' (the CLI never creates
stores); on a directory it says 'no store file'. `graphflow events` stamps each `node_start`
with the batch's end time."
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, GraphRuntime, SQLiteCheckpointStore, VirtualClock
from pytest_graphflow._cli._main import main


def _fails(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.startswith("graphflow: error: ")
    assert err.count("\n") == 1
    return err


def _text_file(path: Path) -> Path:
    path.write_text("just text, not sqlite " * 50)
    return path


def _foreign_database(path: Path) -> Path:
    db = sqlite3.connect(path)
    with db:
        db.execute("CREATE TABLE things (x)")
    db.close()
    return path


@pytest.mark.parametrize("make", [_text_file, _foreign_database],
                         ids=["text-file", "foreign-sqlite-database"])
@pytest.mark.parametrize("argv", [["runs"], ["events", "run-a"], ["export", "run-a", "OUT"]],
                         ids=["runs", "events", "export"])
def test_a_file_that_is_not_a_store_is_not_offered_to_be_created(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, make: object, argv: list[str]
) -> None:
    path = make(tmp_path / "notes.db")  # type: ignore[operator]
    before = path.read_bytes()
    args = [str(tmp_path / "out.history.json") if a == "OUT" else a for a in argv[1:]]
    err = _fails(capsys, argv[0], str(path), *args)
    assert str(path) in err
    assert "create" not in err  # the command never creates a store
    assert "pass the path of a file written by SQLiteCheckpointStore" in err
    assert path.read_bytes() == before
    assert not (tmp_path / "out.history.json").exists()


def test_a_directory_is_named_as_a_directory(capsys: pytest.CaptureFixture[str],
                                            tmp_path: Path) -> None:
    folder = tmp_path / "stores"
    folder.mkdir()
    err = _fails(capsys, "runs", str(folder))
    assert f"{str(folder)!r} is a directory, not a store file" in err
    assert "no store file" not in err
    assert list(folder.iterdir()) == []


class Timed(BaseModel):
    n: int = 0


def _timed_store(path: Path) -> str:
    """``plan`` → [``fast`` (1 s), ``slow`` (5 s)] → ``done`` (2 s), on a virtual clock."""

    def sleeping(seconds: float) -> object:
        async def node(state: Timed) -> None:
            await anyio.sleep(seconds)
        return node

    g = Graph("timed", Timed)
    g.node("plan", lambda s: None)
    g.node("fast", sleeping(1))
    g.node("slow", sleeping(5))
    g.node("done", sleeping(2))
    g.edge(START, "plan").edge("plan", "fast").edge("plan", "slow")
    g.edge("fast", "done").edge("slow", "done").edge("done", END)
    with SQLiteCheckpointStore(path) as store:
        return GraphRuntime(store, clock=VirtualClock(), seed=0).invoke(g.compile()).run_id


def test_events_shows_each_task_s_own_start_and_end(capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    path = tmp_path / "timed.db"
    run_id = _timed_store(path)
    assert main(["events", str(path), run_id]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    times = {(row[4], row[5]): row[1] for row in rows if row[4] in ("node_start", "node_end")}
    assert times == {
        ("node_start", "plan"): "00:00:00.000", ("node_end", "plan"): "00:00:00.000",
        # both started with the batch at 0 s; each ended at its own time, not the batch's
        ("node_start", "fast"): "00:00:00.000", ("node_end", "fast"): "00:00:01.000",
        ("node_start", "slow"): "00:00:00.000", ("node_end", "slow"): "00:00:05.000",
        ("node_start", "done"): "00:00:05.000", ("node_end", "done"): "00:00:07.000",
    }
    # the stored events keep the time each was yielded (the batch's end): --json is raw
    assert main(["events", str(path), run_id, "--json"]) == 0
    assert '"time": "2025-01-01T00:00:05Z"' in capsys.readouterr().out
