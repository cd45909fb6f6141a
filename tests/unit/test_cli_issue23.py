"""Issue 23, item 21: the ``graphflow`` command's hints point the right way, and ``events``
shows each task's own times.

"the CLI on a non-SQLite file says 'or a new path to create one' (the CLI never creates
stores); on a directory it says 'no store file'. `graphflow events` stamps each `node_start`
with the batch's end time."
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

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
