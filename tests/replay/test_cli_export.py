"""``graphflow export FILE RUN_ID OUT``: a run of a SQLite store as a history file."""

from __future__ import annotations

from pathlib import Path

import pytest
from graphflow_replay_graph import Payments, build

from pytest_graphflow import (
    DEFAULT_START,
    GraphRuntime,
    Resume,
    SQLiteCheckpointStore,
    VirtualClock,
    assert_replays,
    load_history,
)
from pytest_graphflow._cli._main import main


@pytest.fixture
def store_file(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "runs.db"
    with SQLiteCheckpointStore(path) as store:
        runtime = GraphRuntime(store, clock=VirtualClock(), seed=4)
        paused = runtime.invoke(build(Payments(flaky=1)), {"amount": 120})
        runtime.resume(paused.run_id, Resume("yes"))
    return path, paused.run_id


def test_an_exported_run_replays(store_file: tuple[Path, str], tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    path, run_id = store_file
    out = tmp_path / "run.history.json"
    code = main(["export", str(path), run_id, str(out), "--seed", "4",
                 "--clock-start", DEFAULT_START.isoformat()])
    assert code == 0
    assert f"wrote {out}: run {run_id} of graph 'checkout' (" in capsys.readouterr().out
    history = load_history(out)
    assert (history.seed, history.clock_start, history.status) == (4, DEFAULT_START, "completed")
    assert list(history.resumes[0].values()) == ["yes"]
    assert_replays(out, build(Payments()))


def test_without_seed_and_clock_it_replays_without_comparing_times(
    store_file: tuple[Path, str], tmp_path: Path
) -> None:
    path, run_id = store_file
    out = tmp_path / "real.history.json"
    assert main(["export", str(path), run_id, str(out)]) == 0
    history = load_history(out)
    assert history.clock_start is None
    assert history.seed is None
    assert_replays(out, build(Payments()))


@pytest.mark.parametrize(("args", "text"), [
    (["RUN", "run-nope"], "the store holds no events or no checkpoint of run 'run-nope'"),
    (["RUN", "RUN_ID", "--clock-start", "soon"], "--clock-start='soon' is not an ISO-8601"),
    (["missing.db", "run-x"], "no store file"),
], ids=["unknown-run", "bad-clock-start", "no-file"])
def test_export_problems_are_one_line(store_file: tuple[Path, str], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str], args: list[str],
                                      text: str) -> None:
    path, run_id = store_file
    argv = ["export", *[str(path) if a == "RUN" else run_id if a == "RUN_ID" else a
                        for a in args[:2]], str(tmp_path / "o.json"), *args[2:]]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("graphflow: error: ")
    assert text in err
