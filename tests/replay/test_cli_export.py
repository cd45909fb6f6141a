"""``graphflow export FILE RUN_ID OUT``: a run of a SQLite store as a history file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


# -- where the history is written (issue 23, item 11) -------------------------------------------
# "`graphflow export FILE RUN_ID FILE` overwrites the store with the history and exits 0; it
# also overwrites any existing file and creates missing folders. Refuse to write onto the
# store or any existing file unless `--force`; never onto the store itself."


def _store_itself(store: Path, tmp_path: Path) -> Path:
    return store


def _store_by_another_name(store: Path, tmp_path: Path) -> Path:
    (tmp_path / "sub").mkdir()
    return tmp_path / "sub" / ".." / store.name


def _link_to_the_store(store: Path, tmp_path: Path) -> Path:
    link = tmp_path / "link.history.json"
    link.symlink_to(store)
    return link


def _the_store_s_journal(store: Path, tmp_path: Path) -> Path:
    return store.with_name(f"{store.name}-wal")  # SQLite would read it as the store's log


def _existing_file(store: Path, tmp_path: Path) -> Path:
    path = tmp_path / "kept.history.json"
    path.write_text("a file the user keeps\n")
    return path


def _directory(store: Path, tmp_path: Path) -> Path:
    (tmp_path / "histories").mkdir()
    return tmp_path / "histories"


def _missing_folder(store: Path, tmp_path: Path) -> Path:
    return tmp_path / "no" / "such" / "folder" / "run.history.json"


@pytest.mark.parametrize(("where", "force", "text"), [
    (_store_itself, False, "is the store file"),
    (_store_itself, True, "is the store file"),
    (_store_by_another_name, True, "is the store file"),
    (_link_to_the_store, True, "is the store file"),
    (_the_store_s_journal, True, "is the journal of the store file"),
    (_existing_file, False, "already exists; pass another path, or --force to replace it"),
    (_directory, True, "is a directory"),
    (_missing_folder, False, "folder"),
    (_missing_folder, True, "folder"),
], ids=["onto-the-store", "onto-the-store-forced", "onto-the-store-by-another-name",
        "onto-a-link-to-the-store", "onto-the-store-s-journal", "onto-an-existing-file",
        "onto-a-directory",
        "into-a-missing-folder", "into-a-missing-folder-forced"])
def test_export_refuses_to_write_over_a_file_and_changes_nothing(
    store_file: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
    where: Any, force: bool, text: str,
) -> None:
    path, run_id = store_file
    out = where(path, tmp_path)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    argv = ["export", str(path), run_id, str(out), *(["--force"] if force else [])]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("graphflow: error: ")
    assert text in captured.err
    assert str(out) in captured.err
    after = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert after == before  # the store and every other file: the same bytes, nothing new
    assert not (tmp_path / "no").exists()


def test_export_with_force_replaces_an_existing_file(
    store_file: tuple[Path, str], tmp_path: Path
) -> None:
    path, run_id = store_file
    out = _existing_file(path, tmp_path)
    store_bytes = path.read_bytes()
    assert main(["export", str(path), run_id, str(out), "--force"]) == 0
    assert load_history(out).run_id == run_id
    assert path.read_bytes() == store_bytes
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp left
