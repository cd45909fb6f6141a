"""A plain step's commit on PostgreSQL is sent, and the next step's ``pure`` node runs while the
server writes it (``StoreFeatures.sent_commits``, issue 29): the same rows and events as when
each commit is waited for, a rejected commit raised where it was asked for (C6: "a ``save``
the store rejects ends the run: the stream raises that same exception where the runtime asked
for the checkpoint"), and no node of another effect class run before its predecessor's
commit returned.

Every test runs against a real server and compares with the same run whose commits are each
waited for (the feature turned off on the store's class, as a store without it runs)."""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest

from graphflow_chains import Count
from graphflow_postgres import stored_rows, watch_statements
from pytest_graphflow import (
    END,
    START,
    FaultyStore,
    Graph,
    GraphRuntime,
    PostgresCheckpointStore,
    StaleClaim,
    VirtualClock,
)
from pytest_graphflow._stores._features import features_of
from pytest_graphflow._stores.postgres._conn import run_now

HERE = Path(__file__).parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
import sent_worker  # noqa: E402

MakeStore = Callable[..., PostgresCheckpointStore]

NODES = ("a", "b", "c", "d", "e", "f")


def _each_commit_waited(monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's class without ``sent_commits`` (until ``monkeypatch`` undoes it): each
    commit waited for, as a store without the feature runs."""
    monkeypatch.setattr(PostgresCheckpointStore, "features", dataclasses.replace(
        PostgresCheckpointStore.features, sent_commits=False))


def _both_ways(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A test's rounds: ``"sent"`` (the store as shipped), then ``"waited"`` (each commit
    waited for, from then on)."""
    yield "sent"
    _each_commit_waited(monkeypatch)
    yield "waited"


@pytest.fixture(params=["sent", "waited"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """``sent``: the store as shipped; ``waited``: each commit waited for."""
    if request.param == "waited":
        _each_commit_waited(monkeypatch)
    return str(request.param)


def _chain(name: str, hooks: dict[str, Callable[[Count], None]],
           effects: dict[str, str] | None = None) -> Any:
    """``NODES`` in a row, each adding one to ``n`` after its hook (if any) ran."""
    g = Graph(name, Count)
    prev = START

    def node(hook: Callable[[Count], None] | None) -> Callable[[Count], dict[str, int]]:
        def run(s: Count) -> dict[str, int]:
            if hook is not None:
                hook(s)
            return {"n": s.n + 1}
        return run

    for name_ in NODES:
        g.node(name_, node(hooks.get(name_)), effect=(effects or {}).get(name_, "pure"))
        g.edge(prev, name_)
        prev = name_
    return g.edge(prev, END).compile(checkpoint_policy="every_step")


@contextmanager
def _fresh(make_pg_store: MakeStore, schema: str) -> Iterator[PostgresCheckpointStore]:
    """A store in a schema of its own, dropped after."""
    store = make_pg_store(schema=schema)
    try:
        yield store
    finally:
        store.drop()


def _sent_count(monkeypatch: pytest.MonkeyPatch, store: PostgresCheckpointStore) -> list[int]:
    """How many step commits went on the wire without their answer read (``send_one``
    taking them), and how many of those with their statement made ahead (while the commit
    before was on the wire), as a two-item list the run fills."""
    sent = [0, 0]
    real = store._pg.send_one

    def send_one(sql: str, params: Any, ready: Any = None) -> Any:
        found = real(sql, params, ready)
        sent[0] += found is not None
        sent[1] += found is not None and ready is not None
        return found

    monkeypatch.setattr(store._pg, "send_one", send_one)
    return sent


def test_a_run_writes_the_same_rows_with_its_commits_sent(
    make_pg_store: MakeStore, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = {}
    for name in _both_ways(monkeypatch):
        with _fresh(make_pg_store, f"{pg_schema}_{name}") as store:
            sent = _sent_count(monkeypatch, store)
            runtime = GraphRuntime(store, clock=VirtualClock(), seed=3)
            for i in range(3):
                assert runtime.invoke(_chain("g", {}), thread_id=f"t{i}").data == {"n": 6}
            rows[name] = stored_rows(store)
            # Each step but the run's last (nothing runs after it) and the first run's
            # first (its statement not prepared yet on the connection) goes on the wire
            # while the next node runs.
            assert sent[0] == (3 * 5 - 1 if name == "sent" else 0), sent
            assert sent[1] == sent[0], sent  # each made while the one before was on the wire
    assert rows["sent"] == rows["waited"]
    assert len(rows["sent"]["checkpoints"]) == 3 * 7


def test_a_commit_made_ahead_is_made_again_when_the_one_before_wrote_a_path_block(
    make_pg_store: MakeStore, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step's statement is made (its path placed, its parameters dumped) while the commit
    before it is on the wire; a path placed by the chain that commit extends (a block every
    16 steps, ``_paths``) is placed again once it is written. The rows are those of each
    commit waited for."""
    long = Graph("long", Count)
    prev = START
    for i in range(40):
        long.node(f"n{i}", lambda s: {"n": s.n + 1}, effect="pure")
        long.edge(prev, f"n{i}")
        prev = f"n{i}"
    graph = long.edge(prev, END).compile(checkpoint_policy="every_step")
    rows = {}
    for name in _both_ways(monkeypatch):
        with _fresh(make_pg_store, f"{pg_schema}_{name}") as store:
            sent = _sent_count(monkeypatch, store)
            runtime = GraphRuntime(store, clock=VirtualClock(), seed=3)
            for i in range(2):
                assert runtime.invoke(graph, thread_id=f"t{i}").data == {"n": 40}
            rows[name] = stored_rows(store)
            if name == "sent":
                # 2 runs of 40 steps, each step's commit sent but the run's last and, in
                # the first run, those of a statement the connection had not prepared yet
                # (the first step's, the first block's, the first new chain's: 3); each
                # made ahead but the step after a block, in the second run (2; in the
                # first the block's commit was waited for, its path written before)
                assert sent == [2 * 39 - 3, 2 * 39 - 3 - 2], sent
    assert rows["sent"] == rows["waited"]
    assert [n for n in rows["sent"] if n == "paths"] == ["paths"]
    assert len(rows["sent"]["paths"]) == 2 * 2


class _Thief:
    """Takes the thread's claim from under the run (a new token, as another process's claim
    would be) the first time node ``c`` runs: that step's commit is refused (``StaleClaim``).
    Not a pure node's doing: ``c`` is declared ``write``, so it starts once ``b``'s commit
    returned (a pure node runs while it is on the wire: the theft could beat it)."""

    def __init__(self, store: PostgresCheckpointStore) -> None:
        self.store = store
        self.done = False

    def __call__(self, _s: Count) -> None:
        if self.done:
            return
        self.done = True
        with psycopg.connect(self.store.dsn, autocommit=True) as conn:
            conn.execute(f"UPDATE {self.store.schema}.claims SET token = token + 100")


class _Trigger:
    """A server-side refusal: a trigger raising for the checkpoint of step 2 (node ``c``'s;
    the run's first is step -1), dropped before the run is resumed."""

    def __init__(self, store: PostgresCheckpointStore) -> None:
        self.store = store
        with psycopg.connect(store.dsn, autocommit=True) as conn:
            conn.execute(f"""
                CREATE OR REPLACE FUNCTION {store.schema}.refuse() RETURNS trigger AS $$
                BEGIN
                    IF NEW.step = 2 THEN RAISE EXCEPTION 'refused: step %', NEW.step; END IF;
                    RETURN NEW;
                END $$ LANGUAGE plpgsql""")
            conn.execute(f"CREATE TRIGGER refuse BEFORE INSERT ON {store.schema}.checkpoints "
                         f"FOR EACH ROW EXECUTE FUNCTION {store.schema}.refuse()")

    def __call__(self, _s: Count) -> None:
        pass

    def drop(self) -> None:
        with psycopg.connect(self.store.dsn, autocommit=True) as conn:
            conn.execute(f"DROP TRIGGER refuse ON {self.store.schema}.checkpoints")
            conn.execute(f"DROP FUNCTION {self.store.schema}.refuse()")


@pytest.mark.parametrize("refusal", ["stale_claim", "server_error"])
@pytest.mark.parametrize("next_effect", ["pure", "write"])
def test_a_refused_commit_ends_the_run_where_it_was_asked_for_and_changes_nothing(
    make_pg_store: MakeStore, pg_schema: str, monkeypatch: pytest.MonkeyPatch,
    refusal: str, next_effect: str
) -> None:
    """Node ``c``'s commit is refused. The run raises the store's own exception, and the
    store holds exactly what the same run holds when each commit is waited for; resumed, the
    run ends with the same rows too. The node after ``c`` (``d``) may have run once while the
    commit was on the wire when it is ``pure`` (a pure node may run again: C9), never when
    it is of another effect class."""
    seen: dict[str, Any] = {}
    for name in _both_ways(monkeypatch):
        with _fresh(make_pg_store, f"{pg_schema}_{name}") as store:
            calls = {"d": 0}

            def count(_s: Count, calls: dict[str, int] = calls) -> None:
                calls["d"] += 1

            refuse = _Thief(store) if refusal == "stale_claim" else _Trigger(store)
            graph = _chain(f"g-{refusal}-{next_effect}", {"c": refuse, "d": count},
                           {"c": "write", "d": next_effect})
            runtime = GraphRuntime(store, clock=VirtualClock(), seed=5)
            expected = StaleClaim if refusal == "stale_claim" \
                else psycopg.errors.RaiseException
            with pytest.raises(expected) as caught:
                runtime.invoke(graph, thread_id="t")
            run_id = store.checkpointed_runs()[0]
            seen[name] = {"error": (type(caught.value), str(caught.value)),
                          "rows": stored_rows(store), "d": calls["d"]}
            # Resumed (the thread's claim freed, the trigger dropped): the same end.
            with psycopg.connect(store.dsn, autocommit=True) as conn:
                conn.execute(f"DELETE FROM {store.schema}.claims")
            if isinstance(refuse, _Trigger):
                refuse.drop()
            assert runtime.resume(run_id).data == {"n": 6}
            seen[name]["resumed"] = stored_rows(store)
    sent, waited = seen["sent"], seen["waited"]
    assert sent["error"] == waited["error"]
    assert sent["rows"] == waited["rows"]
    assert sent["resumed"] == waited["resumed"]
    # Nothing of c's step or after it was written: its checkpoint is not there.
    assert len(sent["rows"]["checkpoints"]) == 3  # a, b and the run's first (START)
    assert waited["d"] == 0
    if next_effect == "pure":
        assert sent["d"] == 1  # ran while c's commit was on the wire, its step undone
    else:
        assert sent["d"] == 0


def test_a_node_of_another_effect_class_sees_its_predecessors_commit(
    make_pg_store: MakeStore, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every node that is not ``pure`` starts after the commit of the step before it
    returned: another connection already reads that step's checkpoint."""
    store = make_pg_store()
    sent = _sent_count(monkeypatch, store)
    found: list[tuple[int, int]] = []

    def look(s: Count) -> None:
        with psycopg.connect(store.dsn, autocommit=True) as conn:
            row = conn.execute(f"SELECT count(*) FROM {store.schema}.checkpoints").fetchone()
        assert row is not None
        found.append((s.n, row[0]))

    effects = {"b": "read", "d": "write", "f": "human"}
    graph = _chain("g-effects", {"b": look, "d": look, "f": look}, effects)
    runtime = GraphRuntime(store, clock=VirtualClock(), seed=1)
    assert runtime.invoke(graph, thread_id="t").data == {"n": 6}
    # n steps run before the node: the run's first checkpoint and one a step, all committed
    assert found == [(1, 2), (3, 4), (5, 6)]
    # (the pure nodes before b, d and f ran with their predecessor's commit on the wire)
    assert sent[0] == (2 if mode == "sent" else 0)


def test_a_pure_node_may_read_the_store_while_the_commit_before_it_is_on_the_wire(
    make_pg_store: MakeStore, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection carries one statement at a time: a node reading the store through it
    (``checkpointed_runs`` runs on this thread's connection) reads the step's answer first,
    and sees the store with that commit in it."""
    store = make_pg_store()
    sent = _sent_count(monkeypatch, store)
    runs: list[list[str]] = []
    graph = _chain("g-reads", {n: lambda _s: runs.append(store.checkpointed_runs())
                               for n in NODES})
    runtime = GraphRuntime(store, clock=VirtualClock(), seed=2)
    result = runtime.invoke(graph, thread_id="t")
    assert result.data == {"n": 6}
    assert runs == [[result.run_id]] * len(NODES)
    assert sent[0] == (4 if mode == "sent" else 0)
    assert len(stored_rows(store)["checkpoints"]) == 7


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_on_the_async_pool_a_refused_commit_changes_nothing(
    make_pg_store: MakeStore, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same on the async pool's hot connection (``ainvoke`` on the loop the store was
    opened on)."""
    seen = {}
    for name in _both_ways(monkeypatch):
        async with make_pg_store(schema=f"{pg_schema}_{name}") as store:
            sent = _sent_count(monkeypatch, store)
            calls = {"d": 0}

            def count(_s: Count, calls: dict[str, int] = calls) -> None:
                calls["d"] += 1

            graph = _chain("g-pool", {"c": _Thief(store), "d": count}, {"c": "write"})
            runtime = GraphRuntime(store, seed=5)
            assert (await runtime.ainvoke(_chain("g-warm", {}), thread_id="w")).data["n"] == 6
            with pytest.raises(StaleClaim):
                await runtime.ainvoke(graph, thread_id="t")
            rows = stored_rows(store)
            seen[name] = (len(rows["checkpoints"]), calls["d"], sent[0])
            store.drop()
    # The warm run's 7 checkpoints and a, b's and the first of the refused run.
    assert seen["sent"][:1] == seen["waited"][:1] == (10,)
    # d ran once, its step undone; the warm run's commits sent but its first (not prepared
    # yet) and last, and a's (not b's: c is not pure) and c's (refused)
    assert seen["sent"][1:] == (1, 4 + 2)
    assert seen["waited"][1:] == (0, 0)


def test_a_faulty_store_over_postgres_waits_for_each_commit(
    make_pg_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wrapper does not pass the feature on: its rules see every commit as it is made."""
    store = make_pg_store()
    assert features_of(store).sent_commits
    faulty = FaultyStore(store)
    assert not features_of(faulty).sent_commits
    sent = _sent_count(monkeypatch, store)
    statements: list[str] = []
    watch_statements(monkeypatch, store._pg, lambda sql, _p: statements.append(sql))
    assert GraphRuntime(faulty, clock=VirtualClock(), seed=1).invoke(
        _chain("g-faulty", {}), thread_id="t").data == {"n": 6}
    assert sent[0] == 0
    assert statements


def _killed_and_recovered(dsn: str, schema: str, tmp_path: Path, die_at: int, graph: str,
                          unread: int) -> list[Any]:
    """Run ``sent_worker.py`` with ``graph`` until it SIGKILLs itself in its ``die_at``-th
    run with ``unread`` commits on the wire; then recover that thread (its claim deleted, as
    if it expired) and check every run completed whole and ``charge`` (external) ran exactly
    once a run. Returns the killed thread's checkpoints before recovery."""
    log = tmp_path / "effects.log"
    log.touch()
    proc = subprocess.run(
        [sys.executable, str(HERE / "sent_worker.py"), dsn, schema, str(log), str(die_at), "4",
         graph], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    closes = [line.split("\t") for line in Path(f"{log}.close").read_text().splitlines()]
    assert closes == [[f"t{n}", str(unread)] for n in range(die_at)]
    killed = f"t{die_at - 1}"
    with PostgresCheckpointStore(dsn, schema=schema) as store:
        with psycopg.connect(dsn, autocommit=True) as conn:  # as if it expired
            conn.execute(f"DELETE FROM {schema}.claims")
        before = anyio.run(lambda: store.list(thread_id=killed))
        result = GraphRuntime(store).recover(killed, graph=getattr(sent_worker, graph))
        assert result.status == "completed"
        assert result.data["closed"]
        assert result.data["settled"]
        assert result.data["effect"] == f"{killed}:{die_at - 1}"
        for n in range(die_at):
            cps = anyio.run(lambda n=n: store.list(thread_id=f"t{n}"))
            assert cps[-1].status == "completed"
            events = anyio.run(store.events, cps[-1].run_id)
            assert [e["seq"] for e in events] == list(range(len(events)))
            assert events[-1]["type"] == "run_end"
    effects = Counter(line.split("\t")[0] for line in log.read_text().splitlines())
    assert effects == Counter(f"t{n}" for n in range(die_at))  # once a run, none twice
    return before


@pytest.mark.parametrize("die_at", [1, 2, 3])
def test_a_process_killed_while_a_commit_is_on_the_wire_loses_nothing(
    postgres_dsn: str, fresh_pg_schema: str, tmp_path: Path, die_at: int
) -> None:
    """A real process SIGKILLs itself in ``close`` (pure) of its ``die_at``-th run, while
    ``settle``'s commit is on the wire, its answer never read. Whatever the server made of
    it, the thread recovers from the last checkpoint written and completes, the runs before
    are intact, and ``charge`` (external, checkpointed before) ran exactly once a run."""
    before = _killed_and_recovered(postgres_dsn, fresh_pg_schema, tmp_path, die_at, "tail", 1)
    # The statement was on the wire whole when the process died: the server wrote it (its
    # answer went nowhere), so the run recovers after settle, not before it.
    assert before[-1].node_id == "settle"
    assert before[-1].state["settled"]


@pytest.mark.parametrize("die_at", [1, 2, 3])
def test_a_process_killed_with_two_commits_on_the_wire_loses_nothing(
    postgres_dsn: str, fresh_pg_schema: str, tmp_path: Path, die_at: int
) -> None:
    """The same with two commits on the wire, the second sent behind the first (a pure
    node's step, PostgreSQL's pipeline): the process dies in ``tidy`` (pure) with
    ``settle``'s and ``close``'s answers unread. The server wrote what it had whole in
    order — ``close``'s only if ``settle``'s, both or neither or ``settle``'s alone (a
    statement still in the server's socket when the dead client's reset reached it is
    not run) — so the thread's checkpoints are the run's steps in order up to one, with no
    gap; the thread recovers from the last, completes, and ``charge`` (external, its commit
    answered before anything was sent behind it) ran exactly once a run."""
    before = _killed_and_recovered(postgres_dsn, fresh_pg_schema, tmp_path, die_at, "behind",
                                   2)
    steps = [cp.node_id for cp in before]
    assert steps in ([None, "prepare", "charge"], [None, "prepare", "charge", "settle"],
                     [None, "prepare", "charge", "settle", "close"]), steps


def test_a_sent_statements_answer_is_read_on_the_thread_that_sent_it(
    make_pg_store: MakeStore
) -> None:
    """A sync connection is its thread's: asked for from another thread, the answer is
    refused with an error saying where to read it (not mistaken for a missing row), and it
    is still there for the thread that sent it."""
    store = make_pg_store()
    pg = store._pg
    sql = "SELECT %s::int + 1"
    assert run_now(pg.fetch_one(sql, [1])) == (2,)  # prepared on this thread's connection
    sent = pg.send_one(sql, [41])
    assert sent is not None
    errors: list[BaseException] = []

    def elsewhere() -> None:
        try:
            run_now(pg.answer(sent))
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=elsewhere)
    thread.start()
    thread.join()
    assert len(errors) == 1
    assert isinstance(errors[0], RuntimeError)
    assert "another thread" in str(errors[0])
    assert run_now(pg.answer(sent)) == (42,)
    assert pg.unread == 0


def test_an_interrupt_after_sent_commits_pauses_and_resumes_as_when_each_is_waited_for(
    make_pg_store: MakeStore, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pure node that interrupts runs while its predecessor's commit is on the wire; the
    pause is saved after that commit was answered (C5), and the paused run, its resume and
    the rows are those of the run whose commits are each waited for."""
    from pytest_graphflow import Resume, interrupt

    seen = {}
    for name in _both_ways(monkeypatch):
        with _fresh(make_pg_store, f"{pg_schema}_{name}") as store:
            sent = _sent_count(monkeypatch, store)

            def ask(s: Count) -> None:
                if interrupt({"n": s.n}, id="ok") != "yes":
                    raise AssertionError("not approved")

            runtime = GraphRuntime(store, clock=VirtualClock(), seed=9)
            graph = _chain("g-ask", {"d": ask})
            for i in range(2):  # (the first run prepares the statement)
                paused = runtime.invoke(graph, thread_id=f"t{i}")
                assert paused.status == "interrupted"
                assert [p.payload for p in paused.interrupts.values()] == [{"n": 3}]
                done = runtime.resume(paused.run_id, Resume("yes"))
                assert done.status == "completed"
                assert done.data == {"n": 6}
            seen[name] = (stored_rows(store), sent[0])
    assert seen["sent"][0] == seen["waited"][0]
    assert seen["sent"][1] > 0
    assert seen["waited"][1] == 0


def _two_in_flight(pg: Any, sql: str, first: Any, second: Any) -> tuple[Any, Any]:
    """Send ``sql`` with ``[first]`` and then ``[second]`` behind it on one connection;
    a third is declined (two at most on the wire)."""
    a = pg.send_one(sql, [first])
    b = pg.send_one(sql, [second])
    assert a is not None
    assert b is not None
    assert pg.send_one(sql, [0]) is None
    return a, b


async def _pipeline_cases(pg: Any, conn: Any, dealloc: Callable[[], Any]) -> None:
    """Two statements on the wire at once: each its own transaction, answered in order
    (the second read first reads the first), an error in one not the other's, the server's
    forgetting of the prepared statement (``DEALLOCATE ALL``) met by preparing it again
    and running both again in order; then the connection out of pipeline mode, usable by
    psycopg's own operations."""
    sql = "SELECT 100 / %s::int"
    assert await pg.fetch_one(sql, [1]) == (100,)  # prepared on this connection
    a, b = _two_in_flight(pg, sql, 50, 20)
    assert await pg.answer(b) == (5,)  # (a read first, kept)
    assert a.done
    assert await pg.answer(a) == (2,)
    a, b = _two_in_flight(pg, sql, 0, 25)
    with pytest.raises(psycopg.errors.DivisionByZero):
        await pg.answer(a)
    assert await pg.answer(b) == (4,)
    await dealloc()
    a, b = _two_in_flight(pg, sql, 10, 4)
    assert await pg.answer(a) == (10,)
    assert await pg.answer(b) == (25,)
    assert conn.pgconn.pipeline_status == psycopg.pq.PipelineStatus.OFF
    assert pg.unread == 0


def test_two_statements_on_the_wire_on_a_threads_connection(make_pg_store: MakeStore) -> None:
    store = make_pg_store()
    pg = store._pg
    conn = pg.sync_connection()

    async def dealloc() -> None:
        conn.execute("DEALLOCATE ALL")

    run_now(_pipeline_cases(pg, conn, dealloc))
    assert conn.execute("SELECT 7").fetchone() == (7,)  # psycopg's own cursor


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_two_statements_on_the_wire_on_the_pools_hot_connection(
    make_pg_store: MakeStore, anyio_backend: str
) -> None:
    async with make_pg_store() as store:
        pg = store._pg
        assert await pg.fetch_one("SELECT %s::int", [1]) == (1,)  # the hot connection
        hot = pg._hot
        assert hot is not None

        async def dealloc() -> None:
            await hot[0].execute("DEALLOCATE ALL")

        await _pipeline_cases(pg, hot[0], dealloc)
        assert pg._hot is not None
        assert pg._hot[0] is hot[0]  # given back once both were read
        assert await (await hot[0].execute("SELECT 7")).fetchone() == (7,)
