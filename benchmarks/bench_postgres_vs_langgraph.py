"""Per-step cost of a durable run on PostgreSQL: pytest-graphflow's PostgresCheckpointStore
against LangGraph's AsyncPostgresSaver, on the same server, in one run.

    .venv/bin/pip install -e ".[bench]"     # langgraph, langgraph-checkpoint-postgres
    .venv/bin/python benchmarks/bench_postgres_vs_langgraph.py [--nodes 50] [--repeat 7]
        [--dsn DSN]

The server: ``--dsn``, else ``$GRAPHFLOW_POSTGRES_DSN``, else a throwaway cluster started
for the run (needs the PostgreSQL server package: ``apt-get install postgresql``).

Graph: a chain of N sequential nodes (each increments a counter), one checkpoint per
superstep on both sides, each run on a new thread, both through their async APIs on one
asyncio loop with an async connection pool (graphflow: ``async with PostgresCheckpointStore``
; LangGraph: ``AsyncPostgresSaver`` over a psycopg ``AsyncConnectionPool``). graphflow also
records each run's events and run record in the same database (what its durable stores do);
LangGraph writes its checkpoints, blobs and pending writes. Reported: the best time per
node-step of R runs, and the ratio LangGraph / graphflow. No timing is asserted anywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel
from typing_extensions import TypedDict

from pytest_graphflow import END, START, Graph, GraphRuntime, PostgresCheckpointStore


class GFState(BaseModel):
    n: int = 0


class LGState(TypedDict):
    n: int


def gf_chain(n: int) -> Any:
    g = Graph("pgchain", GFState)
    prev = START
    for i in range(n):
        g.node(f"n{i}", lambda s: {"n": s.n + 1})
        g.edge(prev, f"n{i}")
        prev = f"n{i}"
    g.edge(prev, END)
    return g.compile(checkpoint_policy="every_step")


def lg_chain(n: int, saver: Any) -> Any:
    from langgraph.graph import StateGraph

    g = StateGraph(LGState)
    prev = "__start__"
    for i in range(n):
        g.add_node(f"n{i}", lambda s: {"n": s["n"] + 1})
        g.add_edge(prev, f"n{i}")
        prev = f"n{i}"
    g.add_edge(prev, "__end__")
    return g.compile(checkpointer=saver)


async def best_of(repeat: int, fn: Callable[[], Awaitable[Any]]) -> float:
    await fn()  # warm-up: connections, prepared plans
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        await fn()
        best = min(best, time.perf_counter() - t0)
    return best


async def measure(dsn: str, nodes: int, repeat: int) -> dict[str, float]:
    results: dict[str, float] = {}
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    async with PostgresCheckpointStore(dsn, schema=schema) as store:
        try:
            runtime = GraphRuntime(store, max_supersteps=100_000)
            graph = gf_chain(nodes)

            async def run_gf() -> None:
                result = await runtime.ainvoke(graph, {})
                assert result.data["n"] == nodes

            results["graphflow+PostgresCheckpointStore"] = (
                await best_of(repeat, run_gf) / nodes * 1e6)
        finally:
            store.drop()
    try:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool
    except ImportError:
        print("langgraph-checkpoint-postgres is not installed: pip install -e '.[bench]'")
        return results
    import psycopg

    lg_schema = f"bench_lg_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {lg_schema}")
    try:
        async with AsyncConnectionPool(
            dsn, min_size=1, max_size=4, open=False,
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row,
                    "options": f"-c search_path={lg_schema}"},
        ) as pool:
            saver = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
            await saver.setup()
            app = lg_chain(nodes, saver)

            async def run_lg() -> None:
                config = {"configurable": {"thread_id": uuid.uuid4().hex},
                          "recursion_limit": 100_000}
                out = await app.ainvoke({"n": 0}, config)
                assert out["n"] == nodes

            results["langgraph+AsyncPostgresSaver"] = await best_of(repeat, run_lg) / nodes * 1e6
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {lg_schema} CASCADE")
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--dsn", default=os.environ.get("GRAPHFLOW_POSTGRES_DSN"))
    args = parser.parse_args()
    cluster = None
    dsn = args.dsn
    if not dsn:
        from pytest_graphflow._stores._pgcluster import ThrowawayCluster

        cluster = ThrowawayCluster().start()
        dsn = cluster.dsn
    try:
        results = asyncio.run(measure(dsn, args.nodes, args.repeat))
    finally:
        if cluster is not None:
            cluster.stop()
    for label, us in results.items():
        print(f"chain   {label:36s} {us:8.1f} us/step")
    gf, lg = "graphflow+PostgresCheckpointStore", "langgraph+AsyncPostgresSaver"
    if gf in results and lg in results:
        print(f"chain   {lg} / {gf}: {results[lg] / results[gf]:5.2f}x")


if __name__ == "__main__":
    main()
