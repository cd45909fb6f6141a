"""The SQLite store never harms a file (issue 12): it identifies a file read-only before
anything writes; a file that is not a store of a version it can write is refused with a
``StoreFileError`` (or ``UnsupportedFormat``) naming the file and the fix, and its bytes are
unchanged; read-only files and directories open for reading; a full disk is a clear error
and nothing of the failed write is kept."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from pytest_graphflow import (
    GraphRuntime,
    SQLiteCheckpointStore,
    StoreFileError,
    UnsupportedFormat,
    VirtualClock,
)
from pytest_graphflow._cli._main import main
from pytest_graphflow._records._checkpoint import Checkpoint
from pytest_graphflow._stores.sqlite import _file as _sqlite_file
from pytest_graphflow._stores.sqlite import _rows as _sqlite_rows
from pytest_graphflow._stores.sqlite._schema import APPLICATION_ID, SCHEMA_VERSION
from pytest_graphflow._stores.sqlite._tail import unpack_events

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def cp(cid: str, *, run: str = "run-a", visited: tuple[str, ...] = ("a",), n: int = 0
       ) -> Checkpoint:
    return Checkpoint(id=cid, run_id=run, thread_id=f"t-{run}", graph_id="g", revision="r",
                      step=n, timestamp=T0, state={"n": n}, visited=visited)


def files(path: Path) -> dict[str, bytes]:
    """The bytes of the file and its journal (the -shm index is not data)."""
    return {p.name: p.read_bytes() for p in (path, path.with_name(path.name + "-wal"))
            if p.exists()}


def make_store(path: Path) -> None:
    """A store file with two checkpoints and one event of run ``run-a``."""
    with SQLiteCheckpointStore(path) as store:
        db = store._conn
        for n, visited in ((1, ("a",)), (2, ("a", "b"))):
            checkpoint = cp(f"cp-{n}", visited=visited, n=n)
            with store._tx():
                store._write(db, checkpoint, checkpoint.model_dump_json(exclude={"visited"}))
        with store._tx():
            db.execute("INSERT INTO events VALUES ('run-a', 0, 'run_start', ?)",
                       (json.dumps({"seq": 0, "type": "run_start"}),))


# -- files that are not a store of a version we can write: refused, bytes unchanged -------------


def _foreign(path: Path) -> None:
    db = sqlite3.connect(path)
    with db:
        db.execute("CREATE TABLE things (x)")
        db.execute("INSERT INTO things VALUES (1)")
    db.close()


def _newer(path: Path) -> None:
    make_store(path)
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                   (str(SCHEMA_VERSION + 1),))
    db.close()


def _other_layout(path: Path) -> None:
    db = sqlite3.connect(path)
    with db:
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        db.execute("CREATE TABLE checkpoints (id TEXT PRIMARY KEY, blob TEXT)")
    db.close()


def _corrupt(path: Path) -> None:
    make_store(path)
    data = bytearray(path.read_bytes())
    data[100:4096] = b"\xde\xad" * ((4096 - 100) // 2)  # page 1 after the header: the schema
    path.write_bytes(bytes(data))


def _text(path: Path) -> None:
    path.write_text("a plain text file, " * 30)


REFUSED: list[tuple[str, Callable[[Path], None], type[Exception], str]] = [
    ("foreign-sqlite-file", _foreign, StoreFileError, "not a pytest-graphflow store"),
    ("newer-store-version", _newer, UnsupportedFormat, "Upgrade pytest-graphflow"),
    ("other-table-layout", _other_layout, StoreFileError, "another layout"),
    ("corrupt-bytes", _corrupt, StoreFileError, "damaged"),
    ("not-sqlite-at-all", _text, StoreFileError, "not a SQLite database"),
]


@pytest.mark.parametrize(("build", "error", "says"), [r[1:] for r in REFUSED],
                         ids=[r[0] for r in REFUSED])
@pytest.mark.parametrize("readonly", [False, True], ids=["read-write", "read-only"])
def test_a_file_that_is_not_a_writable_store_is_refused_and_unchanged(
    tmp_path: Path, build: Callable[[Path], None], error: type[Exception], says: str,
    readonly: bool,
) -> None:
    path = tmp_path / "file.db"
    build(path)
    before = files(path)
    with pytest.raises(error) as caught:
        SQLiteCheckpointStore(path, readonly=readonly)
    message = str(caught.value)
    assert str(path) in message
    assert says in message
    assert files(path) == before
    assert main(["runs", str(path)]) == 2  # the CLI refuses it too, and changes nothing
    assert files(path) == before


def test_the_cli_names_the_file_and_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "other.db"
    _foreign(path)
    assert main(["runs", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err
    assert "pass the path of a file written by SQLiteCheckpointStore" in err


def test_a_new_file_becomes_a_store_that_identifies_itself(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    SQLiteCheckpointStore(path).close()
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA application_id").fetchone() == (APPLICATION_ID,)
        assert db.execute("PRAGMA auto_vacuum").fetchone() == (2,)  # incremental
        assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() \
            == (str(SCHEMA_VERSION),)
    finally:
        db.close()


@pytest.mark.parametrize(("synchronous", "pragma"), [("normal", 1), ("full", 2), ("off", 0)])
def test_synchronous_sets_how_commits_reach_the_disk(
    tmp_path: Path, synchronous: str, pragma: int
) -> None:
    path = tmp_path / "store.db"
    SQLiteCheckpointStore(path).close()  # the file does not keep it: each connection sets it
    with SQLiteCheckpointStore(path, synchronous=synchronous) as store:
        assert store.synchronous == synchronous
        assert store._conn.execute("PRAGMA synchronous").fetchone() == (pragma,)
        assert store._conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        token = anyio.run(lambda: store.claim("t", "run-a", now=T0))
        anyio.run(lambda: store.commit("t", token, run_id="run-a", events=[{"seq": 0}]))
    with SQLiteCheckpointStore(path, readonly=True) as reader:
        assert anyio.run(lambda: reader.events("run-a")) == [{"seq": 0}]


def test_an_empty_file_becomes_a_store(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    SQLiteCheckpointStore(path).close()
    assert path.read_bytes().startswith(b"SQLite format 3\x00")


def test_a_missing_file_opened_read_only_is_refused_and_not_created(tmp_path: Path) -> None:
    path = tmp_path / "missing.db"
    with pytest.raises(StoreFileError, match="does not exist"):
        SQLiteCheckpointStore(path, readonly=True)
    assert not path.exists()


# -- read-only: the store opens for reading ------------------------------------------------------


@pytest.mark.anyio
async def test_a_store_opened_read_only_reads_and_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    make_store(path)
    before = files(path)
    with SQLiteCheckpointStore(path, readonly=True) as store:
        assert store.readonly
        assert [c.id for c in await store.list("run-a")] == ["cp-1", "cp-2"]
        assert (await store.events("run-a"))[0]["type"] == "run_start"
        with pytest.raises(StoreFileError, match="is open read-only"):
            await store.save(cp("cp-3"))
        with pytest.raises(StoreFileError, match="is open read-only"):
            await store.prune("run-a", 0)
    assert files(path) == before


_READER = """
import anyio, json, sys
from pytest_graphflow._stores.sqlite import _file as _sqlite_file
from pytest_graphflow._stores.sqlite import _rows as _sqlite_rows
from pytest_graphflow import SQLiteCheckpointStore
from pytest_graphflow._records._checkpoint import Checkpoint
from pytest_graphflow import StoreFileError

async def main():
    with SQLiteCheckpointStore(sys.argv[1]) as store:
        out = {"readonly": store.readonly,
               "ids": [c.id for c in await store.list("run-a")],
               "visited": list((await store.get("cp-2")).visited),
               "events": len(await store.events("run-a"))}
        cp = (await store.get("cp-2")).clone(id="cp-9")
        try:
            await store.save(cp)
            out["save"] = "saved"
        except StoreFileError as exc:
            out["save"] = str(exc)
    print(json.dumps(out))

anyio.run(main)
"""


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory an unprivileged user can enter (tmp_path is private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="graphflow-ro-"))
    folder.chmod(0o755)
    yield folder
    folder.chmod(0o755)
    shutil.rmtree(folder)


_NO_OVERRIDE = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner",
                "--inh-caps=-all"]


def _as_reader(args: list[str], env: dict[str, str] | None = None
               ) -> subprocess.CompletedProcess[str]:
    """Run ``args`` in a process that file permissions bind: as root, without the
    capabilities that override them (root may write any file otherwise)."""
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.fail("running as root without setpriv: cannot make a file read-only for "
                        "the test process; run the tests as a normal user")
        args = [*_NO_OVERRIDE, *args]
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False,
                          env=env)


@pytest.mark.parametrize("what", ["read-only-file", "read-only-directory"])
def test_a_read_only_store_opens_for_reading(shared_dir: Path, what: str) -> None:
    path = shared_dir / "store.db"
    make_store(path)
    if what == "read-only-file":
        path.chmod(0o444)
        shared_dir.chmod(0o777)
    else:
        path.chmod(0o666)
        shared_dir.chmod(0o555)
    before = files(path)
    done = _as_reader([sys.executable, "-c", _READER, str(path)])
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["readonly"] is True
    assert out["ids"] == ["cp-1", "cp-2"]
    assert out["visited"] == ["a", "b"]
    assert out["events"] == 1
    assert str(path) in out["save"]
    assert "read-only" in out["save"]
    cli = _as_reader([sys.executable, "-c", "import sys; from pytest_graphflow._cli._main "
                      "import main; sys.exit(main())", "runs", str(path)])
    assert cli.returncode == 0, cli.stderr
    assert "run-a" in cli.stdout
    assert files(path) == before


_KILLED_WRITER = """
import anyio, sys
from datetime import UTC, datetime
from pytest_graphflow._records._checkpoint import Checkpoint
from pytest_graphflow import SQLiteCheckpointStore

async def fill(store):
    for n, visited in ((1, ("a",)), (2, ("a", "b"))):
        await store.save(Checkpoint(id=f"cp-{n}", run_id="run-a", thread_id="t-run-a",
                                    graph_id="g", revision="r", step=n,
                                    timestamp=datetime(2025, 1, 1, tzinfo=UTC),
                                    state={"n": n}, visited=visited))
    await store.record_events("run-a", [{"seq": 0, "type": "run_start"}])

store = SQLiteCheckpointStore(sys.argv[1])  # left open: its writes stay in the -wal
anyio.run(fill, store)
print("written", flush=True)
sys.stdin.read()  # until killed
"""


def _killed_writer(path: Path) -> None:
    """A store whose writer was killed: its committed writes are only in ``-wal``."""
    with subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(path)],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as writer:
        try:
            assert writer.stdout is not None
            assert writer.stdout.readline() == "written\n"
        finally:
            writer.kill()
            writer.wait(timeout=60)


def test_a_killed_writers_journal_in_a_read_only_directory_is_read(shared_dir: Path) -> None:
    # A writer was killed (its -wal holds every committed write) and its -shm index is gone
    # (copied without it, or cleaned away); the directory is read-only: SQLite cannot
    # rebuild the index in place, so the store reads a private copy of file and journal.
    path = shared_dir / "store.db"
    _killed_writer(path)
    Path(f"{path}-shm").unlink()
    probe = sqlite3.connect(f"{path.absolute().as_uri()}?immutable=1", uri=True)
    try:  # the main file alone has no checkpoint: reading it without the -wal would be wrong
        assert probe.execute("SELECT COUNT(*) FROM checkpoints").fetchone() == (0,)
    finally:
        probe.close()
    path.chmod(0o644)
    shared_dir.chmod(0o555)
    scratch = Path(tempfile.mkdtemp(prefix="graphflow-tmp-"))
    scratch.chmod(0o777)
    before = files(path)
    try:
        env = {**os.environ, "TMPDIR": str(scratch)}
        done = _as_reader([sys.executable, "-c", _READER, str(path)], env=env)
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout)
        assert out["readonly"] is True
        assert out["ids"] == ["cp-1", "cp-2"]
        assert out["visited"] == ["a", "b"]
        assert out["events"] == 1
        assert str(path) in out["save"]
        assert "read-only" in out["save"]
        cli = _as_reader([sys.executable, "-c", "import sys; from pytest_graphflow._cli._main "
                          "import main; sys.exit(main())", "runs", str(path)], env=env)
        assert cli.returncode == 0, cli.stderr
        assert "run-a" in cli.stdout
        assert list(scratch.iterdir()) == []  # the private copies are gone
    finally:
        shutil.rmtree(scratch)
    assert files(path) == before
    assert not Path(f"{path}-shm").exists()


def test_a_journal_that_changes_while_it_is_copied_is_not_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "store.db"
    make_store(path)
    Path(f"{path}-wal").write_bytes(b"")  # stands for a killed writer's journal
    monkeypatch.setattr(_sqlite_file, "_stranded_journal", lambda _path: True)
    copy = shutil.copyfile

    def copy_while_a_writer_appends(src: str, dst: str) -> str:
        if src.endswith("-wal"):
            with open(src, "ab") as journal:
                journal.write(b"x")
        return copy(src, dst)

    monkeypatch.setattr(shutil, "copyfile", copy_while_a_writer_appends)
    with pytest.raises(StoreFileError, match="changed while it was being copied") as caught:
        SQLiteCheckpointStore(path)
    assert str(path) in str(caught.value)
    assert "retry" in str(caught.value)


# -- full disk: a clear error, nothing of the failed write kept ----------------------------------


@pytest.mark.anyio
async def test_a_full_disk_is_a_clear_error_and_keeps_the_store_readable(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    make_store(path)
    with SQLiteCheckpointStore(path) as store:
        before = [c.model_dump() for c in await store.list()]
        # The file may not grow by a single page: SQLite reports SQLITE_FULL as on a full disk.
        (pages,) = store._conn.execute("PRAGMA page_count").fetchone()
        store._conn.execute(f"PRAGMA max_page_count = {pages}")
        big = cp("cp-big", n=3).clone(state={"n": 3, "blob": "x" * 200_000})
        with pytest.raises(StoreFileError) as caught:
            await store.save(big)
        assert str(path) in str(caught.value)
        assert "full" in str(caught.value)
        with pytest.raises(StoreFileError, match="full"):
            await store.record_events("run-a", [{"seq": n, "blob": "y" * 10_000}
                                                for n in range(1, 40)])
        assert [c.model_dump() for c in await store.list()] == before
        assert len(await store.events("run-a")) == 1
    with SQLiteCheckpointStore(path) as reopened:
        assert [c.model_dump() for c in await reopened.list()] == before


# -- damaged rows: an error naming the file and the checkpoint -----------------------------------


def _count(state: dict[str, int]) -> dict[str, int]:
    return {"n": state["n"] + 1}


def test_a_damaged_checkpoint_row_is_a_clear_error_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pydantic import BaseModel

    from pytest_graphflow import END, START, Graph

    class S(BaseModel):
        n: int = 0

    g = Graph("count", S)
    g.node("a", lambda s: {"n": s.n + 1}).node("b", lambda s: {"n": s.n + 1})
    graph = g.edge(START, "a").edge("a", "b").edge("b", END).compile()
    path = tmp_path / "store.db"
    with SQLiteCheckpointStore(path) as store:
        result = GraphRuntime(store, clock=VirtualClock(), seed=1).invoke(graph)
        run_id = result.run_id
        import anyio

        latest = anyio.run(store.latest, run_id)
        assert latest is not None
        for table in ("checkpoints", "log"):  # wherever the row is (see sqlite/_tail.py)
            store._conn.execute(f"UPDATE {table} SET data = '{{\"id\": 5}}' WHERE id = ?",
                                (latest.id,))
        with pytest.raises(StoreFileError, match=f"damaged checkpoint '{latest.id}'"):
            anyio.run(store.get, latest.id)
        rt = GraphRuntime(store, clock=VirtualClock(), seed=2)
        with pytest.raises(StoreFileError, match=str(path)):
            rt.resume(run_id, graph=graph)
    assert main(["show", str(path), latest.id]) == 2
    err = capsys.readouterr().err
    assert f"damaged checkpoint '{latest.id}'" in err
    assert f"store.delete('{latest.id}')" in err


# -- migration from schema version 1 -------------------------------------------------------------

_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE checkpoints (id TEXT PRIMARY KEY, run_id TEXT NOT NULL, thread_id TEXT NOT NULL,
    graph_id TEXT NOT NULL, node_id TEXT, node_ids TEXT NOT NULL, step INTEGER NOT NULL,
    timestamp TEXT NOT NULL, ts_us INTEGER NOT NULL, save_order INTEGER NOT NULL,
    status TEXT NOT NULL, tenant_id TEXT, format_version INTEGER NOT NULL, data TEXT NOT NULL);
CREATE INDEX checkpoints_run ON checkpoints (run_id, ts_us, save_order);
CREATE INDEX checkpoints_thread ON checkpoints (thread_id, ts_us, save_order);
CREATE INDEX checkpoints_order ON checkpoints (ts_us, save_order);
CREATE TABLE checkpoint_nodes (checkpoint_id TEXT NOT NULL, run_id TEXT NOT NULL,
    node TEXT NOT NULL, PRIMARY KEY (checkpoint_id, node));
CREATE INDEX checkpoint_nodes_run ON checkpoint_nodes (run_id, node);
CREATE TABLE events (run_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT,
    data TEXT NOT NULL, PRIMARY KEY (run_id, seq)) WITHOUT ROWID;
CREATE TABLE event_compactions (run_id TEXT PRIMARY KEY, earliest_seq INTEGER NOT NULL);
CREATE TABLE runs (run_id TEXT PRIMARY KEY, thread_id TEXT, graph_id TEXT, status TEXT,
    tenant_id TEXT, updated_at TEXT, data TEXT NOT NULL);
CREATE TABLE artifacts (run_id TEXT NOT NULL, name TEXT NOT NULL, media_type TEXT NOT NULL,
    size INTEGER NOT NULL, content BLOB NOT NULL, PRIMARY KEY (run_id, name));
CREATE TABLE claims (thread_id TEXT PRIMARY KEY, run_id TEXT, token INTEGER NOT NULL,
    expires_us INTEGER, ttl REAL);
INSERT INTO meta VALUES ('schema_version', '1');
"""


def _v1_store(path: Path) -> None:
    db = sqlite3.connect(path)
    db.executescript(_V1)
    for order, (cid, visited, nodes) in enumerate(
        [("cp-1", ["a"], ["a"]), ("cp-2", ["a", "b", "c"], ["b", "c"]), ("cp-3", [], [])], 1
    ):
        row = cp(cid, visited=tuple(visited), n=order).model_copy(update={"node_ids": nodes})
        db.execute("INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (cid, "run-a", "t-run-a", "g", nodes[-1] if nodes else None,
                    json.dumps(nodes), order, T0.isoformat(), 0, order, "running", None, 1,
                    row.model_dump_json()))
        db.executemany("INSERT INTO checkpoint_nodes VALUES (?, ?, ?)",
                       [(cid, "run-a", node) for node in nodes])
    db.execute("INSERT INTO events VALUES ('run-a', 0, 'run_start', ?)",
               (json.dumps({"seq": 0, "type": "run_start"}),))
    db.commit()
    db.close()


@pytest.mark.anyio
async def test_a_version_1_store_is_migrated_when_opened_for_writing(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _v1_store(path)
    with SQLiteCheckpointStore(path) as store:
        found = await store.list("run-a")
        assert [c.id for c in found] == ["cp-1", "cp-2", "cp-3"]
        assert [c.visited for c in found] == [("a",), ("a", "b", "c"), ()]
        assert (await store.load("run-a", "b")) is not None
        assert (await store.load("run-a", "b")).id == "cp-2"  # type: ignore[union-attr]
        assert [e["type"] for e in await store.events("run-a")] == ["run_start"]
    db = sqlite3.connect(path)
    try:
        assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() \
            == (str(SCHEMA_VERSION),)
        assert db.execute("PRAGMA auto_vacuum").fetchone() == (2,)
    finally:
        db.close()


def _v2_store(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store as schema version 2 wrote it: a path segment per checkpoint, no tail, events
    in a ``WITHOUT ROWID`` table."""
    with monkeypatch.context() as patch:
        patch.setattr(_sqlite_rows, "TAIL", 1)
        make_store(path)
    with SQLiteCheckpointStore(path) as store:
        store.vacuum()  # the log folded into the tables: version 2 had no log
        db = store._conn  # nor event_pieces: an event a row
        db.execute("BEGIN IMMEDIATE")
        for (run,) in db.execute("SELECT DISTINCT run_id FROM event_pieces").fetchall():
            unpack_events(db, run)
        db.execute("COMMIT")
    db = sqlite3.connect(path)
    db.executescript("""
        BEGIN;
        DROP TABLE event_pieces;
        DROP TABLE log;
        DELETE FROM meta WHERE key = 'log_folded';
        ALTER TABLE events RENAME TO events_new;
        CREATE TABLE events (run_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT,
            data TEXT NOT NULL, PRIMARY KEY (run_id, seq)) WITHOUT ROWID;
        INSERT INTO events SELECT run_id, seq, type, data FROM events_new;
        DROP TABLE events_new;
        UPDATE meta SET value = '2' WHERE key = 'schema_version';
        COMMIT;
    """)
    db.close()


@pytest.mark.anyio
async def test_a_version_2_store_reads_as_it_is_and_is_migrated_when_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "v2.db"
    _v2_store(path, monkeypatch)
    before = files(path)
    with SQLiteCheckpointStore(path, readonly=True) as reader:
        assert [c.visited for c in await reader.list("run-a")] == [("a",), ("a", "b")]
        assert [e["type"] for e in await reader.events("run-a")] == ["run_start"]
    assert files(path) == before
    with SQLiteCheckpointStore(path) as store:
        cp3 = cp("cp-3", visited=("a", "b", "c"), n=3)
        await store.save(cp3)  # a version-3 row (its short path kept as its tail)
        found = await store.list("run-a")
        assert [c.visited for c in found] == [("a",), ("a", "b"), ("a", "b", "c")]
        await store.record_events("run-a", [{"seq": 1, "type": "run_end"}])
        assert [e["type"] for e in await store.events("run-a")] == ["run_start", "run_end"]
    db = sqlite3.connect(path)
    try:
        assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() \
            == (str(SCHEMA_VERSION),)
        (sql,) = db.execute("SELECT sql FROM sqlite_master WHERE name = 'events'").fetchone()
        assert "WITHOUT ROWID" not in sql  # the events table was rebuilt with a row id
    finally:
        db.close()
    with SQLiteCheckpointStore(path, readonly=True) as reader:
        assert await reader.list("run-a") == found


def test_a_version_1_store_opened_read_only_says_how_to_migrate(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _v1_store(path)
    before = files(path)
    with pytest.raises(UnsupportedFormat, match="Open it once with write access"):
        SQLiteCheckpointStore(path, readonly=True)
    assert files(path) == before


def test_graph_runtime_over_a_read_only_store_reads_history(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    make_store(path)
    with SQLiteCheckpointStore(path, readonly=True) as store:
        rt = GraphRuntime(store, clock=VirtualClock(), seed=1)
        import anyio

        history = anyio.run(rt.history, "run-a")
        assert [c.id for c in history] == ["cp-1", "cp-2"]
