"""``graphflow delete-thread FILE THREAD_ID`` (issue 26): asks on a terminal, refuses
without one unless ``--yes``, deletes nothing when it refuses, and says why in one line.

Real processes of the installed console script: a pipe, /dev/null and a pseudo-terminal as
stdin.
"""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, GraphRuntime, SQLiteCheckpointStore, VirtualClock
from pytest_graphflow._cli._main import main

T0 = datetime(2025, 1, 1, tzinfo=UTC)
SCRIPT = Path(sys.executable).parent / "graphflow"


class S(BaseModel):
    n: int = 0


@pytest.fixture
def store_file(tmp_path: Path) -> Path:
    """A store with two finished threads, ``t-1`` and ``t-2`` (tenant ``acme``)."""

    def add(state: S) -> dict[str, int]:
        return {"n": state.n + 1}

    g = Graph("counter", S)
    g.node("add", add)
    g.edge(START, "add").edge("add", END)
    path = tmp_path / "runs.db"
    with SQLiteCheckpointStore(path) as store:
        rt = GraphRuntime(store, clock=VirtualClock(start=T0), seed=0, tenant_id="acme")
        for thread in ("t-1", "t-2"):
            assert rt.invoke(g.compile(), thread_id=thread).status == "completed"
    return path


def _threads(path: Path) -> dict[str, int]:
    async def read() -> dict[str, int]:
        with SQLiteCheckpointStore(path, readonly=True) as store:
            return {t: len(await store.list(thread_id=t)) for t in ("t-1", "t-2")}

    return anyio.run(read)


def _run(argv: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), *argv], capture_output=True, text=True, timeout=60,
                          check=False, **kw)  # type: ignore[call-overload]


def test_yes_deletes_the_thread_and_nothing_else(store_file: Path) -> None:
    before = _threads(store_file)
    done = _run(["delete-thread", str(store_file), "t-1", "--yes", "--tenant", "acme"],
                stdin=subprocess.DEVNULL)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith(f"deleted thread 't-1': 1 run, {before['t-1']} checkpoints, ")
    assert done.stdout.rstrip().endswith("1 run records, 0 artifacts")
    assert _threads(store_file) == {"t-1": 0, "t-2": before["t-2"]}


@pytest.mark.parametrize("answer", ["y\n", "yes\n", "Y\n"], ids=["y", "yes", "Y"])
def test_a_yes_typed_on_a_terminal_deletes(store_file: Path, answer: str) -> None:
    before = _threads(store_file)
    master, slave = pty.openpty()
    try:
        os.write(master, answer.encode())
        done = _run(["delete-thread", str(store_file), "t-1", "--tenant", "acme"], stdin=slave)
    finally:
        os.close(slave)
        os.close(master)
    assert done.returncode == 0, done.stderr
    assert done.stderr == (f"delete thread 't-1' (1 run, {before['t-1']} checkpoints) from "
                           f"{store_file}? This cannot be undone. [y/N] ")
    assert _threads(store_file) == {"t-1": 0, "t-2": before["t-2"]}


REFUSALS = [
    pytest.param(["--tenant", "acme"], "n\n", "not deleting thread 't-1' of {file}: not "
                 "confirmed (answer y to delete, or pass --yes). Nothing was deleted",
                 id="terminal-answers-n"),
    pytest.param(["--tenant", "acme"], "\n", "not deleting thread 't-1' of {file}: not "
                 "confirmed", id="terminal-answers-nothing"),
    pytest.param(["--tenant", "acme"], "pipe:y\n", "not deleting thread 't-1' of {file}: "
                 "stdin is not a terminal to confirm on; pass --yes to delete it. Nothing was "
                 "deleted", id="y-from-a-pipe"),
    pytest.param(["--tenant", "acme"], None, "stdin is not a terminal to confirm on; pass "
                 "--yes to delete it", id="no-stdin"),
    pytest.param(["--yes"], None, "tenant None may not use thread 't-1'; pass the tenant_id "
                 "the thread was created with. Nothing was deleted", id="no-tenant"),
    pytest.param(["--yes", "--tenant", "globex"], None, "tenant 'globex' may not use thread "
                 "'t-1'", id="another-tenant"),
]


@pytest.mark.parametrize(("options", "stdin", "message"), REFUSALS)
def test_a_refusal_exits_2_with_one_line_and_deletes_nothing(
    store_file: Path, options: list[str], stdin: str | None, message: str
) -> None:
    before = _threads(store_file)
    argv = ["delete-thread", str(store_file), "t-1", *options]
    master, slave = pty.openpty()
    try:
        if stdin is None:
            done = _run(argv, stdin=subprocess.DEVNULL)
        elif stdin.startswith("pipe:"):
            done = _run(argv, input=stdin.removeprefix("pipe:"))
        else:
            os.write(master, stdin.encode())
            done = _run(argv, stdin=slave)
    finally:
        os.close(slave)
        os.close(master)
    assert (done.returncode, done.stdout) == (2, "")
    line = done.stderr.rsplit("[y/N] ", 1)[-1]  # after the question, if it was asked
    assert line.startswith("graphflow: error: ")
    assert line.count("\n") == 1
    assert message.format(file=store_file) in line
    assert _threads(store_file) == before


def test_a_thread_a_run_holds_is_refused(capsys: pytest.CaptureFixture[str],
                                         store_file: Path) -> None:
    async def hold() -> None:
        with SQLiteCheckpointStore(store_file) as store:  # a claim live until 2100
            await store.claim("t-1", "run-elsewhere", now=datetime(2100, 1, 1, tzinfo=UTC))

    anyio.run(hold)
    before = _threads(store_file)
    code = main(["delete-thread", str(store_file), "t-1", "--yes", "--tenant", "acme"])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err == (f"graphflow: error: {str(store_file)!r}: thread 't-1' is busy (held by run "
                   "run-elsewhere); retry once that run has suspended or completed, or once "
                   "its claim has expired. Nothing was deleted\n")
    assert _threads(store_file) == before


@pytest.mark.parametrize(("argv", "message"), [
    (["t-unknown", "--yes"], "no thread 't-unknown' in {file}; list the runs and their "
     "threads with `graphflow runs {file}`. Nothing was deleted"),
    (["", "--yes"], "graphflow delete-thread(THREAD_ID=''): THREAD_ID must not be empty; "
     "pass a thread id as `graphflow runs {file}` lists them"),
], ids=["unknown-thread", "empty-thread-id"])
def test_an_unknown_thread_is_named(capsys: pytest.CaptureFixture[str], store_file: Path,
                                    argv: list[str], message: str) -> None:
    before = _threads(store_file)
    code = main(["delete-thread", str(store_file), *argv])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err == f"graphflow: error: {message.format(file=store_file)}\n"
    assert _threads(store_file) == before


def test_a_file_that_is_not_a_store_is_left_alone(capsys: pytest.CaptureFixture[str],
                                                  tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a store " * 40)
    code = main(["delete-thread", str(path), "t-1", "--yes"])
    _, err = capsys.readouterr()
    assert code == 2
    assert err.startswith("graphflow: error: ")
    assert err == (f"graphflow: error: store file {str(path)!r} is not a SQLite database (its "
                   "first bytes are not SQLite's header: another kind of file, or damaged); "
                   "pass the path of a file written by SQLiteCheckpointStore\n")
    assert path.read_text() == "not a store " * 40
