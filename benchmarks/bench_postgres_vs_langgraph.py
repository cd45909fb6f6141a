"""Per-step cost of a durable run on PostgreSQL: pytest-graphflow's PostgresCheckpointStore
against LangGraph's AsyncPostgresSaver, on the same server, in one run.

    .venv/bin/pip install -e ".[bench]"     # langgraph, langgraph-checkpoint-postgres
    .venv/bin/python benchmarks/bench_postgres_vs_langgraph.py [--nodes 50] [--repeat 15]
        [--dsn DSN] [--sync]

The server: ``--dsn``, else ``$GRAPHFLOW_POSTGRES_DSN``, else a throwaway cluster started
for the run (needs the PostgreSQL server package: ``apt-get install postgresql``).

Graph: a chain of N sequential nodes (each increments a counter), one checkpoint per
superstep on both sides, each run on a new thread, both through their async APIs on one
asyncio loop with an async connection pool (graphflow: ``async with PostgresCheckpointStore``
; LangGraph: ``AsyncPostgresSaver`` over a psycopg ``AsyncConnectionPool``). graphflow also
records each run's events and run record in the same database (what its durable stores do);
LangGraph writes its checkpoints, blobs and pending writes. The two take turns, run by run
(a busy moment of the machine slows one run of each, not all runs of one). Reported: the
best time per node-step of R runs each, and the ratio LangGraph / graphflow, and how many
of graphflow's statements a step were answered within the store's quick wait (without a turn
of the loop: on a busy host fewer are, and the step waits on the loop). No timing is
asserted anywhere.

LangGraph runs twice a round: as shipped (its default ``durability="async"``: a step's
checkpoint is written by a task of its own while the next step runs, so LangGraph's Python
and the server work at once) and with ``durability="sync"`` (the checkpoint written before
the next step runs, as graphflow's always is: like with like). Two ratios are printed.

``--sync`` also measures the sync API, the default user path: ``runtime.invoke(graph)``
(the store's connection per thread) against LangGraph's ``PostgresSaver`` over a psycopg
``ConnectionPool`` with ``app.invoke``, taking turns the same way.

``--explain`` prints instead what the server does for a step, counted (noise-free on a
shared machine, unlike time): each step statement of graphflow's chain (sync API) is first
run under ``EXPLAIN (ANALYZE, BUFFERS, WAL)`` in a transaction rolled back, then for real;
the medians of its WAL records, WAL bytes and shared buffers touched are printed (the
commit's own WAL record not included), with its planning and execution times when planned
afresh (the times are noisy; the real step does not plan: see the next counts). Then, on
real steps: statements sent a step (each one round trip) and how the server ran the step's
prepared statement (``pg_prepared_statements``: runs a step of its kept generic plan, and of
a plan made for the call). It reaches into the store's internals (the step's one call to the
server) to see the statement.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, ExitStack, contextmanager
from pathlib import Path
from typing import Any

from chains import gf_chain, lg_chain

from pytest_graphflow import GraphRuntime, PostgresCheckpointStore


async def interleaved(
    repeat: int, runs: dict[str, Callable[[], Awaitable[Any]]]
) -> dict[str, float]:
    """The best wall time of each run, the runs taking turns (so both sides see the same
    machine: a busy moment slows one round of each, not all rounds of one)."""
    for fn in runs.values():
        await fn()  # warm-up: connections, prepared plans
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeat):
        for label, fn in runs.items():
            t0 = time.perf_counter()
            await fn()
            best[label] = min(best[label], time.perf_counter() - t0)
    return best


DURABLE = 'durability="sync"'
"""LangGraph's runs that save each step's checkpoint before the next step runs, as
graphflow's always do (LangGraph's default, ``"async"``, saves it while the next step runs)."""

LG_RUNS = ((None, ""), ("sync", f" {DURABLE}"))
"""LangGraph's two runs a round: its ``durability`` argument (``None``: its default, as
shipped) and what its label adds."""


def lg_schema_for(stack: ExitStack | AsyncExitStack, dsn: str, schema: str) -> dict[str, Any]:
    """Create LangGraph's schema ``schema`` (dropped when ``stack`` closes) and return the
    connection settings of a pool whose connections use it."""
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")

    def drop() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")

    stack.callback(drop)
    return {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row,
            "options": f"-c search_path={schema}"}


async def measure(dsn: str, nodes: int, repeat: int) -> dict[str, float]:
    runs: dict[str, Callable[[], Awaitable[Any]]] = {}
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    lg_schema = f"bench_lg_{uuid.uuid4().hex[:8]}"
    async with AsyncExitStack() as stack:
        store = await stack.enter_async_context(PostgresCheckpointStore(dsn, schema=schema))
        stack.callback(store.drop)  # runs before the store closes
        runtime = GraphRuntime(store, max_supersteps=100_000)
        graph = gf_chain(nodes, "pgchain")

        async def run_gf() -> None:
            result = await runtime.ainvoke(graph, {})
            assert result.data["n"] == nodes

        runs["graphflow+PostgresCheckpointStore"] = run_gf
        pg = store._pg  # how many statements were answered within the quick wait (a count)
        if hasattr(pg, "quick_answers"):
            stack.callback(lambda: print(
                f"graphflow: {pg.quick_answers / (nodes * (repeat + 1)):.2f} statements a "
                "step answered without a turn of the loop"))
        try:
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
            from psycopg_pool import AsyncConnectionPool
        except ImportError:
            print("langgraph-checkpoint-postgres is not installed: pip install -e '.[bench]'")
        else:
            pool = await stack.enter_async_context(AsyncConnectionPool(
                dsn, min_size=1, max_size=4, open=False,
                kwargs=lg_schema_for(stack, dsn, lg_schema)))
            saver = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
            await saver.setup()
            app = lg_chain(nodes, saver)

            for durability, label in LG_RUNS:
                async def run_lg(durability: Any = durability) -> None:
                    config = {"configurable": {"thread_id": uuid.uuid4().hex},
                              "recursion_limit": 100_000}
                    out = await app.ainvoke({"n": 0}, config, durability=durability)
                    assert out["n"] == nodes

                runs[f"langgraph+AsyncPostgresSaver{label}"] = run_lg
        best = await interleaved(repeat, runs)
    return {label: t / nodes * 1e6 for label, t in best.items()}


def measure_sync(dsn: str, nodes: int, repeat: int) -> dict[str, float]:
    """The same chain through both sync APIs: ``invoke`` against ``PostgresSaver``."""
    runs: dict[str, Callable[[], Any]] = {}
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    lg_schema = f"bench_lg_{uuid.uuid4().hex[:8]}"
    with ExitStack() as stack:
        store = stack.enter_context(PostgresCheckpointStore(dsn, schema=schema))
        stack.callback(store.drop)
        runtime = GraphRuntime(store, max_supersteps=100_000)
        graph = gf_chain(nodes, "pgchain")

        def run_gf() -> None:
            assert runtime.invoke(graph).data["n"] == nodes

        runs["graphflow+PostgresCheckpointStore (sync)"] = run_gf
        try:
            from langgraph.checkpoint.postgres import PostgresSaver
            from psycopg_pool import ConnectionPool
        except ImportError:
            print("langgraph-checkpoint-postgres is not installed: pip install -e '.[bench]'")
        else:
            pool = stack.enter_context(ConnectionPool(
                dsn, min_size=1, max_size=4, open=True,
                kwargs=lg_schema_for(stack, dsn, lg_schema)))
            saver = PostgresSaver(pool)  # type: ignore[arg-type]
            saver.setup()
            app = lg_chain(nodes, saver)

            for durability, label in LG_RUNS:
                def run_lg(durability: Any = durability) -> None:
                    config = {"configurable": {"thread_id": uuid.uuid4().hex},
                              "recursion_limit": 100_000}
                    assert app.invoke({"n": 0}, config, durability=durability)["n"] == nodes

                runs[f"langgraph+PostgresSaver (sync){label}"] = run_lg
        for fn in runs.values():
            fn()  # warm-up
        best = dict.fromkeys(runs, float("inf"))
        for _ in range(repeat):
            for label, fn in runs.items():
                t0 = time.perf_counter()
                fn()
                best[label] = min(best[label], time.perf_counter() - t0)
    return {label: t / nodes * 1e6 for label, t in best.items()}


def explain_counts(dsn: str, nodes: int, runs: int = 5) -> dict[str, float]:
    """The medians, over the step statements of ``runs`` chains, of what ``EXPLAIN (ANALYZE,
    BUFFERS, WAL)`` reports for them: WAL records, WAL bytes, shared buffers touched, and the
    planning and execution times of the statement planned afresh (what an unprepared text
    costs every step); then what the real steps did: statements sent a step, and how the
    server ran the step's prepared statement (``pg_prepared_statements``: executions with
    its kept generic plan, and with a plan made for the call)."""
    import statistics

    found: list[tuple[float, ...]] = []
    sent = [0]
    # Each step's statement through fetch_one (not sent ahead: StoreFeatures.sent_commits),
    # so each one is explained and counted here; the statements are the same either way.
    PostgresCheckpointStore.features = dataclasses.replace(
        PostgresCheckpointStore.features, sent_commits=False)
    with PostgresCheckpointStore(dsn, schema=f"bench_{uuid.uuid4().hex[:8]}") as store:
        pg = store._pg
        real = pg.fetch_one

        async def explained(sql: str, params: Any) -> Any:
            conn = pg.sync_connection()
            with conn.transaction(force_rollback=True):
                row = conn.execute("EXPLAIN (ANALYZE, BUFFERS, WAL, FORMAT JSON) " + sql,
                                   params).fetchone()
            assert row is not None
            top = row[0][0]["Plan"]
            # The data-modifying CTEs run after the top node: their counts are their own.
            parts = [top, *(p for p in top.get("Plans", []) if p["Node Type"] == "ModifyTable")]
            found.append((*(float(sum(p.get(k, 0) for p in parts)) for k in (
                "WAL Records", "WAL Bytes", "Shared Hit Blocks")),
                1000 * row[0][0]["Planning Time"], 1000 * row[0][0]["Execution Time"]))
            return await real(sql, params)

        async def counted(sql: str, params: Any) -> Any:
            sent[0] += 1
            return await real(sql, params)

        try:
            runtime = GraphRuntime(store, max_supersteps=100_000)
            graph = gf_chain(nodes, "pgchain")
            pg.fetch_one = explained  # type: ignore[method-assign]
            runtime.invoke(graph)  # warm-up
            found.clear()
            for _ in range(runs):
                runtime.invoke(graph)
            pg.fetch_one = counted  # type: ignore[method-assign]
            conn = pg.sync_connection()
            for _ in range(5):  # prepared at its fifth use on the connection
                runtime.invoke(graph)
            before = _prepared_step(conn)
            sent[0] = 0
            for _ in range(runs):
                runtime.invoke(graph)
            after = _prepared_step(conn)
        finally:
            pg.fetch_one = real  # type: ignore[method-assign]
            store.drop()
    counts = {label: statistics.median(f[i] for f in found) for i, label in
              enumerate(("WAL records", "WAL bytes", "shared buffers", "planning us (afresh)",
                         "execution us"))}
    steps = runs * nodes
    counts["step statements"] = sent[0] / steps
    counts["generic plan runs"] = (after[0] - before[0]) / steps
    counts["custom plan runs"] = (after[1] - before[1]) / steps
    return counts


def _prepared_step(conn: Any) -> tuple[int, int]:
    """The generic and custom plan executions of the prepared step statement(s) (a step with
    a checkpoint and events) on ``conn``."""
    rows = conn.execute(
        "SELECT COALESCE(SUM(generic_plans), 0), COALESCE(SUM(custom_plans), 0) FROM "
        "pg_prepared_statements WHERE statement LIKE 'WITH claim AS%%' AND statement LIKE "
        "'%%INSERT INTO checkpoints%%' AND statement LIKE '%%INSERT INTO events%%'").fetchone()
    return int(rows[0]), int(rows[1])


@contextmanager
def server(dsn: str | None) -> Iterator[str]:
    """``dsn``, or else a throwaway cluster's, started for the block and stopped after it
    (it needs the PostgreSQL server package)."""
    if dsn:
        yield dsn
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from graphflow_pgcluster import ThrowawayCluster

    cluster = ThrowawayCluster().start()
    try:
        yield cluster.dsn
    finally:
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--dsn", default=os.environ.get("GRAPHFLOW_POSTGRES_DSN"))
    parser.add_argument("--sync", action="store_true",
                        help="also measure the sync API (invoke against PostgresSaver)")
    parser.add_argument("--explain", action="store_true",
                        help="print what the server does for a step (counted), not times")
    args = parser.parse_args()
    with server(args.dsn) as dsn:
        if args.explain:
            for label, value in explain_counts(dsn, args.nodes).items():
                print(f"a step's statement: {label:20s} {value:8.2f}")
            return
        results = asyncio.run(measure(dsn, args.nodes, args.repeat))
        if args.sync:
            results.update(measure_sync(dsn, args.nodes, args.repeat))
    for label, us in results.items():
        print(f"chain   {label:62s} {us:8.1f} us/step")
    ours = "graphflow+PostgresCheckpointStore"
    for gf, lg in ((ours, "langgraph+AsyncPostgresSaver"),
                   (f"{ours} (sync)", "langgraph+PostgresSaver (sync)")):
        for lg_run in (lg, f"{lg} {DURABLE}"):
            if gf in results and lg_run in results:
                print(f"chain   {lg_run} / {gf}: {results[lg_run] / results[gf]:5.2f}x")


if __name__ == "__main__":
    main()
