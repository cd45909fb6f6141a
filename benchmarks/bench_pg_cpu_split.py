"""Where a durable PostgreSQL step's time goes, on each side: the client's CPU and the server
backend's CPU a step, for pytest-graphflow's store and LangGraph's ``PostgresSaver``, beside
the floor of one round trip.

    .venv/bin/pip install -e ".[bench]"     # langgraph, langgraph-checkpoint-postgres
    .venv/bin/python benchmarks/bench_pg_cpu_split.py [--nodes 200] [--repeat 5] [--dsn DSN]

The server must run on this machine (its backends' CPU time is read from ``/proc``): ``--dsn``,
else ``$GRAPHFLOW_POSTGRES_DSN``, else a throwaway cluster started for the run.

Both sides run the chain of ``benchmarks/chains.py`` through their sync APIs (``invoke``; one
connection each, so one backend does a side's work), LangGraph at its default durability
(``"async"``: a step's checkpoint is saved by a background thread while the next step runs,
so its client and its backend work at once) and at ``"sync"`` (saved before the next step
runs, as graphflow's always is), taking turns round by round; the best
round of each is printed as microseconds a step of wall time, of the client process's CPU
(``time.process_time``: the runtime, the store's code, psycopg and libpq, the kernel's socket
work) and of the backend's CPU (user + system, at the kernel's tick: 10 ms, so a round is
thousands of steps). Then the floor: ``SELECT 1`` prepared, alone, as a round trip costs the
same two processes. A step is a ping-pong between the two processes, so its wall time is
about the sum of the two CPU columns plus two wake-ups; a ratio of the sides' walls is bounded
by what each column can lose. Nothing is asserted; the times move with the machine's load
(docs/performance.md, "PostgreSQL").
"""

from __future__ import annotations

import argparse
import os
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from bench_postgres_vs_langgraph import LG_RUNS, lg_schema_for, server
from chains import gf_chain, lg_chain

from pytest_graphflow import GraphRuntime, PostgresCheckpointStore

_TICK = os.sysconf("SC_CLK_TCK")


def backend_cpu(pid: int) -> float:
    """The CPU seconds (user + system) the process ``pid`` has used."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def split(fn: Callable[[], Any], pid: int, units: int) -> tuple[float, float, float]:
    """Wall, client CPU and backend CPU, in microseconds a unit, of one call of ``fn``."""
    w0, c0, b0 = time.perf_counter(), time.process_time(), backend_cpu(pid)
    fn()
    return tuple(x / units * 1e6 for x in (  # type: ignore[return-value]
        time.perf_counter() - w0, time.process_time() - c0, backend_cpu(pid) - b0))


def measure(dsn: str, nodes: int, repeat: int) -> dict[str, tuple[float, float, float]]:
    """The best round (by wall time) of each side and of the floor."""
    rounds = 5  # chains a round: a round is thousands of steps, many kernel ticks
    sides: dict[str, tuple[Callable[[], Any], int, int]] = {}
    with ExitStack() as stack:
        store = stack.enter_context(PostgresCheckpointStore(
            dsn, schema=f"bench_{uuid.uuid4().hex[:8]}"))
        stack.callback(store.drop)
        runtime = GraphRuntime(store, max_supersteps=100_000)
        graph = gf_chain(nodes, "pgchain")

        def gf() -> None:
            for _ in range(rounds):
                runtime.invoke(graph)

        gf()  # warm-up: the connection, the prepared statement
        gf_pid = store._pg.sync_connection().info.backend_pid  # the thread's one connection
        sides["graphflow+PostgresCheckpointStore (sync)"] = (gf, gf_pid, rounds * nodes)
        try:
            import psycopg
            from langgraph.checkpoint.postgres import PostgresSaver
        except ImportError:
            print("langgraph-checkpoint-postgres is not installed: pip install -e '.[bench]'")
        else:
            settings = lg_schema_for(stack, dsn, f"bench_lg_{uuid.uuid4().hex[:8]}")
            conn = stack.enter_context(psycopg.connect(dsn, **settings))
            saver = PostgresSaver(conn)
            saver.setup()
            app = lg_chain(nodes, saver)

            for durability, label in LG_RUNS:
                def lg(durability: Any = durability) -> None:
                    for _ in range(rounds):
                        config = {"configurable": {"thread_id": uuid.uuid4().hex},
                                  "recursion_limit": 100_000}
                        out = app.invoke({"n": 0}, config, durability=durability)
                        assert out["n"] == nodes

                lg()
                sides[f"langgraph+PostgresSaver (sync){label}"] = (
                    lg, conn.info.backend_pid, rounds * nodes)
        floor = stack.enter_context(psycopg.connect(dsn, autocommit=True, prepare_threshold=0))
        trips = 10 * rounds * nodes  # a round trip is short: as many as make a round long

        def select_one() -> None:
            for _ in range(trips):
                floor.execute("SELECT 1").fetchone()

        select_one()
        sides["floor: SELECT 1, prepared (a round trip)"] = (select_one,
                                                             floor.info.backend_pid, trips)
        best: dict[str, tuple[float, float, float]] = {}
        for _ in range(repeat):
            for label, (fn, pid, units) in sides.items():
                found = split(fn, pid, units)
                if label not in best or found[0] < best[label][0]:
                    best[label] = found
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dsn", default=os.environ.get("GRAPHFLOW_POSTGRES_DSN"))
    args = parser.parse_args()
    with server(args.dsn) as dsn:
        results = measure(dsn, args.nodes, args.repeat)
    print(f"{'us a step (best round)':58s} {'wall':>8s} {'client':>8s} {'backend':>8s}")
    for label, (wall, client, backend) in results.items():
        print(f"{label:58s} {wall:8.1f} {client:8.1f} {backend:8.1f}")


if __name__ == "__main__":
    main()
