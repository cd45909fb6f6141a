"""The PostgreSQL step statement's plan (``_stores/postgres/_commit.py``, issue 29): what the
server sets up afresh every step (its executor builds every node of the prepared plan each
execution). The fence reads the claim row share-locked with the step's other reads in one
row, and a checkpoint's ``node_ids`` arrive as an array literal (no JSON function scan):
28 plan nodes a step -> 15, server instructions a step ~480-503 k -> ~431-439 k (callgrind, see
docs/performance.md). The same reads, locks and rows as before; these tests pin them."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from graphflow_chains import counting_chain
from graphflow_postgres import stored_rows, watch_statements
from pytest_graphflow import GraphRuntime, PostgresCheckpointStore, StaleClaim, VirtualClock
from pytest_graphflow._records._checkpoint import Checkpoint
from pytest_graphflow._records._json import DumpedEvents
from pytest_graphflow._stores.postgres import _commit
from pytest_graphflow._stores.postgres._commit import array_literal

MakeStore = Callable[..., PostgresCheckpointStore]
MakeCheckpoint = Callable[..., Checkpoint]
T0 = datetime(2025, 1, 1, tzinfo=UTC)

ODD_NODE_IDS = [
    [], ["a"], ['q"uote'], ["back\\slash"], ["{brace}", "com,ma"], [" spaced "], ["NULL"],
    ["null", "NULL", "Null"], ["é✓😀", "tab\there"], ['\\"', '"\\', "\\\\"], ["a"] * 3,
]
"""Lists of node ids an array literal must quote and escape right."""


def _old_node_ids(conn: psycopg.Connection[Any], ids: list[str]) -> Any:
    """The column the statement built before (from the JSON list, in its order)."""
    return conn.execute("SELECT ARRAY(SELECT t FROM json_array_elements_text(%s::json) WITH "
                        "ORDINALITY AS x(t, i) ORDER BY i)::text[]",
                        (json.dumps(ids),)).fetchone()


@pytest.mark.parametrize("ids", ODD_NODE_IDS)
def test_the_array_literal_is_the_column_the_json_list_gave(postgres_dsn: str,
                                                            ids: list[str]) -> None:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        new = conn.execute(f"SELECT {_commit.NODE_IDS}", (array_literal(ids),)).fetchone()
        assert new == _old_node_ids(conn, ids)
        assert new == (ids,)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_odd_node_ids_are_stored_and_found_as_saved(
    make_pg_store: MakeStore, make_cp: MakeCheckpoint
) -> None:
    store = make_pg_store()
    token = await store.claim("thread-a", "run-a", now=T0)
    parent = None
    for i, ids in enumerate(ODD_NODE_IDS):  # fenced commits: the step statement
        cp = make_cp(f"cp-{i}", at=i, nodes=ids, parent_id=parent)
        await store.commit("thread-a", token, run_id="run-a", checkpoints=[cp],
                           events=[{"seq": i, "type": "checkpoint_saved",
                                    "checkpoint_id": cp.id}])
        parent = cp.id
    await store.save(make_cp("cp-saved", run="run-b", thread="thread-b", nodes=ODD_NODE_IDS[9]))
    with psycopg.connect(store.dsn, autocommit=True) as conn:
        rows = dict(conn.execute(f"SELECT id, node_ids FROM {store.schema}.checkpoints")
                    .fetchall())
    assert rows == {**{f"cp-{i}": ids for i, ids in enumerate(ODD_NODE_IDS)},
                    "cp-saved": ODD_NODE_IDS[9]}
    for i, ids in enumerate(ODD_NODE_IDS):
        found = await store.get(f"cp-{i}")
        assert found is not None
        assert found.node_ids == ids
    # The read by node (``node_id = x OR x = ANY(node_ids)``) finds the odd ones.
    for node, cid in (("com,ma", "cp-4"), ('"\\', "cp-9"), ("NULL", "cp-7")):
        found = await store.load("run-a", node)
        assert found is not None
        assert found.id == cid


def _step_plans(store: PostgresCheckpointStore, monkeypatch: pytest.MonkeyPatch
                ) -> list[dict[str, Any]]:
    """The plan of every step statement (a checkpoint and events) a run sends, explained in
    a transaction rolled back before the statement runs for real (whole-table reads off)."""
    plans: list[dict[str, Any]] = []
    pg = store._pg

    def explained(sql: str, params: Any) -> None:
        if sql is _commit._STEP:
            conn = pg.sync_connection()
            with conn.transaction(force_rollback=True):
                # The plan the prepared statement runs reads by the indexes; the custom plan
                # explained here would read a table of a few rows whole once analysed.
                conn.execute("SET LOCAL enable_seqscan = off")
                conn.execute("SET LOCAL enable_bitmapscan = off")
                row = conn.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, FORMAT JSON) "
                                   + sql, params).fetchone()
            assert row is not None
            plans.append(row[0][0]["Plan"])

    watch_statements(monkeypatch, pg, explained)
    return plans


def _nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    return [plan, *(n for p in plan.get("Plans", []) for n in _nodes(p))]


def test_the_step_statement_plan_stays_small_and_reads_what_it_read(
    make_pg_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_pg_store()
    plans = _step_plans(store, monkeypatch)
    GraphRuntime(store, clock=VirtualClock(), seed=3).invoke(counting_chain("chain", 4))
    assert len(plans) >= 3
    for plan in plans:
        nodes = _nodes(plan)
        # Ceiling (history: 28 nodes a step -> 15 (tenth pass) -> 14, the save order the
        # column's default: no subquery scan for a ``nextval`` in the insert's select list).
        assert len(nodes) <= 14, [n["Node Type"] for n in nodes]
        # Every read the fence made before, each by its index: the claim row (share-locked)
        # and its snapshot version, the thread's latest, the run's event row before the
        # step's seqs and its compaction point; the two inserts.
        scans = sorted((n["Index Name"], n["Node Type"]) for n in nodes if "Index Name" in n)
        assert scans == [("checkpoints_thread", "Index Scan"), ("claims_pkey", "Index Scan"),
                         ("claims_pkey", "Index Scan"), ("event_compactions_pkey", "Index Scan"),
                         ("events_pkey", "Index Scan")]
        assert sum(n["Node Type"] == "LockRows" for n in nodes) == 1
        assert sorted(n.get("Relation Name", "") for n in nodes
                      if n["Node Type"] == "ModifyTable") == ["checkpoints", "events"]
        assert "json" not in json.dumps(plan)  # node_ids: no JSON function scan


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_a_plain_step_on_a_thread_without_a_claim_row_is_stale(
    make_pg_store: MakeStore, make_cp: MakeCheckpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The statement answers no row when the thread has no claim row (deleted under the
    # step): StaleClaim naming no current claim, as when its row was released; nothing
    # written, and the step went the plain way (its statement), not the transaction.
    sent: list[str] = []
    store = make_pg_store()
    real = store._pg.fetch_one

    async def logged(sql: str, params: Any) -> Any:
        sent.append(sql)
        return await real(sql, params)

    monkeypatch.setattr(store._pg, "fetch_one", logged)
    token = await store.claim("thread-a", "run-a", now=T0)
    await store.commit("thread-a", token, run_id="run-a",
                       checkpoints=[make_cp("cp-1", at=1, node="a")],
                       events=[{"seq": 0, "type": "checkpoint_saved", "checkpoint_id": "cp-1"}],
                       run={"run_id": "run-a"})
    with psycopg.connect(store.dsn, autocommit=True) as conn:
        conn.execute(f"DELETE FROM {store.schema}.claims")
    before = stored_rows(store)
    sent.clear()
    with pytest.raises(StaleClaim) as caught:
        await store.commit("thread-a", token, run_id="run-a",
                           checkpoints=[make_cp("cp-2", at=2, parent_id="cp-1", node="a")],
                           events=DumpedEvents([{"seq": 1, "type": "checkpoint_saved",
                                                 "checkpoint_id": "cp-2"}]))
    assert caught.value.current is None
    assert str(caught.value) == str(StaleClaim("thread-a", token, None))
    assert sent == [_commit._STEP]
    assert stored_rows(store) == before


def _has_default(dsn: str, schema: str) -> bool:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT atthasdef FROM pg_attribute WHERE attrelid = to_regclass(%s) "
                           "AND attname = 'save_order'", (f"{schema}.checkpoints",)).fetchone()
    assert row is not None
    return bool(row[0])


def test_a_schema_written_before_the_save_orders_default_gets_it_and_keeps_its_version(
    postgres_dsn: str, fresh_pg_schema: str
) -> None:
    """The step statement leaves ``save_order`` to the column's default. A schema an older
    build wrote (no default; same version) gets it when a store opens it; the rows written
    before keep their order, the old build's insert (naming ``nextval``) still runs, and the
    order of every checkpoint, whichever way it was written, is the order of the writes."""
    from pytest_graphflow._stores.postgres._schema import SCHEMA_VERSION

    graph = counting_chain("chain", 3)
    with PostgresCheckpointStore(postgres_dsn, schema=fresh_pg_schema) as store:
        assert _has_default(postgres_dsn, fresh_pg_schema)  # a new schema has it
        GraphRuntime(store, clock=VirtualClock(start=T0), seed=1).invoke(graph)
    with psycopg.connect(postgres_dsn) as conn:  # as an older build wrote it
        conn.execute(f"ALTER TABLE {fresh_pg_schema}.checkpoints ALTER save_order DROP DEFAULT")
    assert not _has_default(postgres_dsn, fresh_pg_schema)
    with PostgresCheckpointStore(postgres_dsn, schema=fresh_pg_schema) as store:
        assert _has_default(postgres_dsn, fresh_pg_schema)
        rt = GraphRuntime(store, clock=VirtualClock(start=T0), seed=2)
        rt.invoke(graph)
        with psycopg.connect(postgres_dsn) as conn:  # the old build's insert, save order named
            conn.execute(f"INSERT INTO {fresh_pg_schema}.checkpoints (id, run_id, thread_id, "
                         "graph_id, node_ids, step, ts_us, save_order, status, "
                         "format_version, data) SELECT 'cp-old', run_id, thread_id, graph_id, "
                         "node_ids, step, ts_us, nextval('" + fresh_pg_schema + ".save_order'), "
                         "status, format_version, data FROM " + fresh_pg_schema
                         + ".checkpoints ORDER BY save_order DESC LIMIT 1")
        rt.invoke(graph)
        with psycopg.connect(postgres_dsn) as conn:
            rows = conn.execute(f"SELECT run_id, id, save_order FROM {fresh_pg_schema}."
                                "checkpoints ORDER BY save_order").fetchall()
            (version,) = conn.execute(f"SELECT value FROM {fresh_pg_schema}.meta WHERE key = "
                                      "'schema_version'").fetchone() or (None,)
    assert version == str(SCHEMA_VERSION)
    orders = [r[2] for r in rows]
    assert orders == sorted(set(orders))  # distinct, every one drawn from the sequence
    # three runs of a start checkpoint and three steps each, and the old build's row, in
    # the order they were written: the runs one after another, the old row between
    runs = [r[0] for r in rows if r[1] != "cp-old"]
    assert len(runs) == 12
    assert len(set(runs)) == 3
    assert runs == sorted(runs, key=runs.index)  # each run's rows together
    assert [r[1] for r in rows].index("cp-old") == 8
