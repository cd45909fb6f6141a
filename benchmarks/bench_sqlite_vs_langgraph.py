"""Per-step cost of a durable SQLite chain: pytest-graphflow against LangGraph's SqliteSaver.

    .venv/bin/pip install -e ".[bench]"      # langgraph + langgraph-checkpoint-sqlite
    .venv/bin/python benchmarks/bench_sqlite_vs_langgraph.py [--nodes 50] [--repeat 20]

Both run a chain of ``--nodes`` nodes (each increments a counter), checkpointing after
every step into one SQLite file each, reused across the repeats (a new thread per run).
The sides take turns run by run (the machine may be shared). Reported: the best time per
step of the repeats (wall and CPU), and the ratio LangGraph / graphflow, for LangGraph as
shipped (WAL, SQLite's default ``synchronous=FULL``: an fsync per commit) and with
graphflow's durability setting (WAL, ``synchronous=NORMAL``). No timing is asserted anywhere.
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from chains import gf_chain, lg_chain

from pytest_graphflow import GraphRuntime
from pytest_graphflow._stores._sqlite import SQLiteCheckpointStore


def timed(fn: Any) -> tuple[float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t0, time.process_time() - c0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    n = args.nodes
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        store = SQLiteCheckpointStore(folder / "graphflow.db")
        rt = GraphRuntime(store, max_supersteps=100_000)
        graph = gf_chain(n)
        counter = iter(range(10**9))
        runs["graphflow SQLiteCheckpointStore"] = lambda: rt.invoke(
            graph, thread_id=f"t{next(counter)}")
        conns: list[sqlite3.Connection] = []
        try:
            from langgraph.checkpoint.sqlite import SqliteSaver
        except ImportError:
            print("langgraph-checkpoint-sqlite is not installed: pip install -e '.[bench]'")
        else:
            # As shipped, SqliteSaver puts the file in WAL mode with SQLite's default
            # synchronous=FULL (an fsync per commit); graphflow uses WAL with
            # synchronous=NORMAL. The second LangGraph row uses graphflow's setting.
            for sync in ("FULL", "NORMAL"):
                conn = sqlite3.connect(folder / f"langgraph-{sync}.db", check_same_thread=False)
                conns.append(conn)
                saver = SqliteSaver(conn)
                saver.setup()
                conn.execute(f"PRAGMA synchronous = {sync}")
                app = lg_chain(n, saver)

                def run(app: Any = app, sync: str = sync) -> None:
                    config = {"configurable": {"thread_id": f"t{next(counter)}"},
                              "recursion_limit": 100_000}
                    app.invoke({"n": 0}, config)

                runs[f"langgraph SqliteSaver, {sync.lower()}"] = run
        best = {label: (float("inf"), float("inf")) for label in runs}
        for round_ in range(args.repeat + 2):  # the sides take turns; two warm-up rounds
            for label, fn in runs.items():
                wall, cpu = timed(fn)
                if round_ >= 2:
                    best[label] = (min(best[label][0], wall), min(best[label][1], cpu))
        store.close()
        for conn in conns:
            conn.close()
    ours = best.pop("graphflow SQLiteCheckpointStore")
    print(f"{'':36s} {'wall':>14s} {'cpu':>14s}   LangGraph / graphflow")
    print(f"{'graphflow SQLiteCheckpointStore':36s} {ours[0] / n * 1e6:9.1f} us/st "
          f"{ours[1] / n * 1e6:9.1f} us/st")
    for label, (wall, cpu) in best.items():
        print(f"{label:36s} {wall / n * 1e6:9.1f} us/st {cpu / n * 1e6:9.1f} us/st   "
              f"{wall / ours[0]:.1f}x wall, {cpu / ours[1]:.1f}x cpu")


if __name__ == "__main__":
    main()
