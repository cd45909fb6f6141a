"""The PostgreSQL store's path blocks (schema version 4, ``_stores/postgres/_paths.py``,
issue 29): a checkpoint's row keeps only the tail of its ``visited`` path, the rest is a
chain of ``paths`` blocks written once every ``TAIL`` steps in the step's own statement. A
row's bytes stay flat as the run grows (data 684 -> 7,632 -> 35,637 B at steps 10 / 1,000 /
5,000 before; 684 / 688 / 693 after), every read gives the checkpoints the old layout gives,
and a version-3 schema migrates in place and reads the same."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from graphflow_chains import ring
from graphflow_postgres import stored_rows, watch_statements
from pytest_graphflow import (
    GraphRuntime,
    PostgresCheckpointStore,
    VirtualClock,
)
from pytest_graphflow._graph._node import Visited
from pytest_graphflow._records._checkpoint import Checkpoint
from pytest_graphflow._stores._wire import nodes_array
from pytest_graphflow._stores.postgres import _paths
from pytest_graphflow._stores.postgres import _schema as _pgschema
from pytest_graphflow._stores.postgres._paths import TAIL, PathBlocks

MakeStore = Callable[..., PostgresCheckpointStore]
T0 = datetime(2025, 1, 1, tzinfo=UTC)


NODES = ("n0.a-b_c", "_", "9", "a.b", "Z-z", "x_1", "q")
"""A graph's node names (letters, digits, ``_``, ``.``, ``-``)."""

ODD = ('a"b', "c\\d", "é✓😀", "x,y", "{z}", "sp ace", "[q]", "\\u0000", "\u2028", "null")
"""Path nodes of checkpoints committed by hand: what a JSON array must carry as it is."""


def _loop(name: str = "loop") -> Any:
    """A ring of the :data:`NODES`, one a step, until ``n`` reaches ``limit``."""
    return ring(name, NODES)


def _old_layout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every row keeps its whole path in its data (schema version 3's layout)."""
    def place(self: PathBlocks, run_id: str, visited: Any) -> Any:
        nodes = tuple(visited)
        return nodes, 0, 0, nodes, (0, [], [0, 0])

    def shape(visited: Any) -> Any:  # (a plain step's: its row, before its block)
        return tuple(visited), 0, ""

    monkeypatch.setattr(PathBlocks, "place", place)
    monkeypatch.setattr(PathBlocks, "shape", staticmethod(shape))


def _dumps(cps: list[Checkpoint | None]) -> list[dict[str, Any] | None]:
    return [None if cp is None else cp.model_dump(mode="json") for cp in cps]


async def _reads(store: PostgresCheckpointStore, runtime: GraphRuntime) -> dict[str, Any]:
    """What every read of the store gives."""
    runs = store.checkpointed_runs()
    out: dict[str, Any] = {"runs": runs, "all": _dumps(await store.list())}
    for run in runs:
        every = await store.list(run)
        out[run] = _dumps(every)
        middle = every[len(every) // 2].id
        out[f"{run}/page"] = _dumps(await store.list(run, limit=5, before=middle))
        out[f"{run}/latest"] = _dumps([await store.latest(run)])
        out[f"{run}/load"] = _dumps([await store.load(run, NODES[2])])
        out[f"{run}/get"] = _dumps([await store.get(cp.id) for cp in every[::9]])
        out[f"{run}/history"] = _dumps(await runtime.history(run, limit=30))
    out["threads"] = _dumps(await store.list(thread_id="kept"))
    out["waiting"] = [w.thread_id for w in await store.waiting(any_tenant=True)]
    return out


async def _write(store: PostgresCheckpointStore) -> GraphRuntime:
    runtime = GraphRuntime(store, clock=VirtualClock(), seed=7, max_supersteps=500)
    await runtime.ainvoke(_loop(), {"limit": 75})  # 75 steps: blocks at 16, 32, 48, 64
    first = await runtime.ainvoke(_loop("again"), {"limit": 40}, thread_id="kept")
    history = await runtime.history(first.run_id)
    # Time travel: a new run from a checkpoint read back (a tuple path: a chain of its own).
    await runtime.afork(history[20].id)
    # Checkpoints committed by hand: tuple paths of odd node ids, growing, then cut back.
    token = await store.claim("thread-odd", "run-odd", now=T0)
    parent = None
    for i, n in enumerate((3, 17, 20, 33, 40, 12, 50)):
        cp = _cp(f"cp-odd-{i}", i, parent, tuple(ODD[j % len(ODD)] for j in range(n)))
        await store.commit("thread-odd", token, run_id="run-odd", checkpoints=[cp],
                           events=[{"seq": i, "run_id": "run-odd", "type": "x"}])
        parent = cp.id
    return runtime


def _cp(cid: str, step: int, parent: str | None, visited: tuple[str, ...]) -> Checkpoint:
    return Checkpoint(id=cid, run_id="run-odd", thread_id="thread-odd", graph_id="g",
                      revision="r", step=step, parent_id=parent,
                      timestamp=T0 + timedelta(seconds=step), state={"n": step},
                      node_id=visited[-1], visited=visited)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_every_read_gives_the_checkpoints_the_old_layout_gives(
    make_pg_store: MakeStore, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = []
    for name in ("old", "new"):
        if name == "old":
            _old_layout(monkeypatch)
        store = make_pg_store(schema=f"{pg_schema}_{name}")
        try:
            runtime = await _write(store)
            found.append(await _reads(store, runtime))
            blocks = stored_rows(store)["paths"]
        finally:
            store.drop()
        monkeypatch.undo()
        assert bool(blocks) is (name == "new")
    assert found[0] == found[1]
    assert len(found[1]["all"]) > 100


def _sizes(dsn: str, schema: str, thread: str) -> list[int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(f"SELECT octet_length(data) FROM {schema}.checkpoints WHERE "
                            "thread_id = %s ORDER BY ts_us, save_order", (thread,)).fetchall()
    return [r[0] for r in rows]


def test_a_rows_bytes_stay_flat_as_the_run_grows_in_one_statement_a_step(
    make_pg_store: MakeStore, postgres_dsn: str, pg_schema: str,
    monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_pg_store()
    sent: list[str] = []
    watch_statements(monkeypatch, store._pg, lambda sql, _params: sent.append(sql))
    runtime = GraphRuntime(store, clock=VirtualClock(), seed=3, max_supersteps=2000)
    steps = 7 * 150
    runtime.invoke(_loop(), {"limit": steps}, thread_id="long")
    sizes = _sizes(postgres_dsn, pg_schema, "long")
    assert len(sizes) == steps + 1
    # Step 10 against steps 1,000 to 1,050: the same bytes but for the digits of numbers
    # that grew (step, seq, ids) and a tail of up to TAIL - 1 nodes (before: +7 B a step).
    early = max(sizes[10:10 + TAIL])
    assert max(sizes[1000:]) - early < 40 + TAIL * 10, (early, max(sizes[1000:]))
    # One statement a step: the step statement, a block every TAIL steps in it.
    blocks = [s for s in sent if "INSERT INTO paths" in s]
    assert len(blocks) == steps // TAIL
    assert len(sent) == steps + 1 + 1  # the claim's ... and one statement a step
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        (chains, nodes) = conn.execute(
            f"SELECT count(DISTINCT chain), sum(upto - lag) FROM (SELECT chain, upto, "
            f"coalesce(lag(upto) OVER (PARTITION BY chain ORDER BY upto), 0) AS lag FROM "
            f"{pg_schema}.paths) b").fetchone()
    assert (chains, nodes) == (1, steps - steps % TAIL)  # each node kept once
    # Deleting the thread deletes its blocks.
    runtime.delete_thread("long")
    assert stored_rows(store)["paths"] == []


def _version(dsn: str, schema: str) -> str:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(f"SELECT value FROM {schema}.meta WHERE key = 'schema_version'"
                           ).fetchone()
    assert row is not None
    return str(row[0])


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_a_version_3_schema_migrates_in_place_and_reads_the_same(
    postgres_dsn: str, fresh_pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A version-3 schema (whole paths in every row, no ``paths``) becomes version 4 when a
    store opens, in the transaction that checks the version: no row rewritten, every read
    the same, and new steps of its threads keep their paths in blocks. A migration that
    fails leaves version 3 as it was."""
    schema = fresh_pg_schema
    _old_layout(monkeypatch)
    store = PostgresCheckpointStore(postgres_dsn, schema=schema)
    runtime = await _write(store)
    before = await _reads(store, runtime)
    store.close()
    monkeypatch.undo()
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:  # as a version-3 build left it
        conn.execute(f"SET search_path = {schema}")
        conn.execute("DROP TABLE paths")
        conn.execute("DROP SEQUENCE path_chains")
        conn.execute("ALTER TABLE checkpoints DROP COLUMN path_chain, DROP COLUMN path_len")
        conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
        rows = conn.execute("SELECT id, data FROM checkpoints ORDER BY id").fetchall()
    monkeypatch.setitem(_pgschema.MIGRATIONS, 3, [*_pgschema.MIGRATIONS[3], "SELECT 1/0"])
    with pytest.raises(psycopg.errors.DivisionByZero):
        PostgresCheckpointStore(postgres_dsn, schema=schema)
    assert _version(postgres_dsn, schema) == "3"
    monkeypatch.undo()

    store = PostgresCheckpointStore(postgres_dsn, schema=schema)
    try:
        assert _version(postgres_dsn, schema) == str(_pgschema.SCHEMA_VERSION) == "4"
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            assert conn.execute(f"SELECT id, data FROM {schema}.checkpoints ORDER BY id"
                                ).fetchall() == rows  # no row rewritten
        runtime = GraphRuntime(store, clock=VirtualClock(), seed=7, max_supersteps=500)
        assert await _reads(store, runtime) == before
        result = await runtime.ainvoke(_loop("again"), {"limit": 40}, thread_id="after")
        visited = (await runtime.history(result.run_id))[-1].visited
        assert visited == tuple(NODES[i % len(NODES)] for i in range(len(visited)))
        assert len(visited) >= 40
        assert len(stored_rows(store)["paths"]) == len(visited) // TAIL
    finally:
        store.close()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_a_step_that_falls_back_to_the_transaction_keeps_its_whole_path(
    make_pg_store: MakeStore, postgres_dsn: str, pg_schema: str
) -> None:
    """A step whose statement fails (here: its checkpoint id is taken, a rewrite of the
    latest) is written by the transaction path with its whole path in its row; the store
    forgets the run's chain and the next step starts a new one: every read is right."""
    store = make_pg_store()
    token = await store.claim("thread-odd", "run-odd", now=T0)
    path = tuple(ODD[j % len(ODD)] for j in range(40))
    steps = [("cp-0", 0, None, 3), ("cp-1", 1, "cp-0", 17), ("cp-1", 1, "cp-0", 33),
             ("cp-2", 2, "cp-1", 40)]
    for i, (cid, step, parent, n) in enumerate(steps):
        await store.commit("thread-odd", token, run_id="run-odd",
                           checkpoints=[_cp(cid, step, parent, path[:n])],
                           events=[{"seq": i, "run_id": "run-odd", "type": "x"}])
    assert [cp.visited for cp in await store.list("run-odd")] == [path[:3], path[:33],
                                                                   path[:40]]
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        rows = conn.execute(f"SELECT id, path_chain <> 0, path_len FROM {pg_schema}."
                            "checkpoints ORDER BY id").fetchall()
        chains = conn.execute(f"SELECT chain, upto FROM {pg_schema}.paths ORDER BY chain, "
                              "upto").fetchall()
    assert rows == [("cp-0", False, 0), ("cp-1", False, 0), ("cp-2", True, 32)]
    assert [upto for _, upto in chains] == [16, 32]  # cp-1's first chain, cp-2's own
    assert chains[0][0] != chains[1][0]


@pytest.mark.parametrize("names", [NODES, ODD, ("é✓😀", "\udc80", "a"), ("\udc80",)])
def test_a_tails_json_is_nodes_arrays_text(names: tuple[str, ...]) -> None:
    """The tail a row keeps is built from its names' JSON texts, noted once (pg9: no
    ``to_json`` call a step): the same text as ``nodes_array`` gives, cold or warm, from the
    runtime's ``Visited`` log or a tuple; a tail holding a name ``to_json`` refuses (a lone
    surrogate) is written by ``nodes_array`` whole, as before, however many of its other
    names were noted."""
    _paths._NAME_JSON.clear()
    path = tuple(names[i % len(names)] for i in range(3 * TAIL + 5))
    for visited in (path, Visited(list(path))):
        for n in range(1, len(path) + 1):
            nodes = visited[:n] if type(visited) is tuple else Visited(list(path), n)
            cut = n - n % TAIL
            tail = PathBlocks().place("run", nodes)[3]
            assert tail == (nodes_array(path[cut:n]) if cut and cut < n else ""), n
    assert ("\udc80" in names) is not all(name in _paths._NAME_JSON for name in names)


class _Counted:
    """The store's rows made, counted by the commit that made them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.made = 0
        row = PostgresCheckpointStore._checkpoint_row

        def counted(cp: Checkpoint, exclude: set[str] | None = None) -> Any:
            self.made += 1
            return row(cp, exclude)

        monkeypatch.setattr(PostgresCheckpointStore, "_checkpoint_row", staticmethod(counted))


@pytest.mark.parametrize("fallback", [False, True])
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_a_commit_with_a_run_record_past_the_first_block_serialises_once(
    make_pg_store: MakeStore, monkeypatch: pytest.MonkeyPatch, fallback: bool
) -> None:
    """The runtime's last commit of a leg (a run record with its one checkpoint) past step
    ``TAIL`` serialises the checkpoint once, as its lean row (twice before pg9: the whole row
    first); when its statement fails, the transaction path writes the whole row: either
    way the checkpoint reads back as the runtime made it."""
    store = make_pg_store()
    counted = _Counted(monkeypatch)
    made: list[tuple[int, int]] = []
    commit = store.commit

    async def watched(*args: Any, **kwargs: Any) -> None:
        before = counted.made
        await commit(*args, **kwargs)
        if kwargs.get("run") is not None:
            made.append((len(kwargs["checkpoints"][0].visited), counted.made - before))

    real = store._pg.fetch_one

    async def failing(sql: str, params: Any) -> Any:
        if fallback and "INSERT INTO runs" in sql and "INSERT INTO checkpoints" in sql:
            raise psycopg.errors.UniqueViolation("as if the checkpoint's id were taken")
        return await real(sql, params)

    monkeypatch.setattr(store, "commit", watched)
    monkeypatch.setattr(store._pg, "fetch_one", failing)
    runtime = GraphRuntime(store, clock=VirtualClock(), seed=3, max_supersteps=500)
    result = await runtime.ainvoke(_loop(), {"limit": TAIL + 9})
    monkeypatch.undo()
    last = made[-1]
    assert last[0] >= TAIL
    assert last[1] == (2 if fallback else 1)  # the transaction path: its whole row too
    latest = await store.latest(result.run_id)
    assert latest is not None
    assert len(latest.visited) >= TAIL + 9
    assert latest.visited == tuple(itertools.islice(itertools.cycle(NODES), len(latest.visited)))
    assert latest.model_dump() == (await runtime.history(result.run_id))[-1].model_dump()
    store.drop()


def test_a_long_runs_steps_never_build_its_path_as_a_tuple(
    make_pg_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store takes a checkpoint's path as the run's snapshot of its log
    (``StoreFeatures.visited_snapshots``) and places it in O(1): no step past the first
    block builds the tuple of every node so far (before: one a step, and the chains'
    prefixes compared as tuples — a run's cost a step grew with its length, ~140 µs at
    10,000 steps to ~500 at 100,000). The number of tuples built is the same for a run of
    100 steps and one of 1,000, and the rows are those a tuple path gives."""
    built = [0]
    real = Visited.as_tuple

    def as_tuple(self: Visited) -> tuple[str, ...]:
        built[0] += 1
        return real(self)

    monkeypatch.setattr(Visited, "as_tuple", as_tuple)
    store = make_pg_store()
    runtime = GraphRuntime(store, clock=VirtualClock(), seed=3, max_supersteps=5000)
    counts = []
    for steps in (100, 1000):
        built[0] = 0
        assert runtime.invoke(_loop(), {"limit": steps}).data["n"] >= steps
        counts.append(built[0])
    assert counts[0] == counts[1] <= TAIL + 2, counts
