"""Per-step cost of a durable SQLite chain: pytest-graphflow against LangGraph's SqliteSaver.

    .venv/bin/pip install -e ".[bench]"      # langgraph + langgraph-checkpoint-sqlite
    .venv/bin/python benchmarks/bench_sqlite_vs_langgraph.py [--nodes 50] [--repeat 20]

Both run a chain of ``--nodes`` nodes (each increments a counter), checkpointing after
every step into one SQLite file each, reused across the repeats (a new thread per run). Each
side runs at two durability settings, both in WAL mode: ``synchronous=NORMAL`` (graphflow's
default; a commit survives a process crash) and ``FULL`` (an fsync per commit; SqliteSaver's
default, as shipped). The runs take turns (the machine may be shared). Reported: the best
time per step of the repeats (wall and CPU), and the ratios LangGraph / graphflow like with
like and as shipped; then the same from each side's median run. The median is the figure a
user's runs average out to: graphflow's store folds its step log into the indexed table every
64 pieces, so most 50-step runs pay one fold and the best run is one of the few that pay none
(SqliteSaver has nothing alike). No timing is asserted anywhere.
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from chains import gf_chain, lg_chain

from pytest_graphflow import GraphRuntime, SQLiteCheckpointStore


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
    runs: dict[tuple[str, str], Any] = {}
    counter = iter(range(10**9))
    graph = gf_chain(n)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        stores: list[SQLiteCheckpointStore] = []
        conns: list[sqlite3.Connection] = []
        # Each side at each durability setting, one file each, reused by every run. graphflow
        # ships synchronous="normal"; SqliteSaver ships SQLite's default, FULL.
        for sync in ("normal", "full"):
            store = SQLiteCheckpointStore(folder / f"graphflow-{sync}.db", synchronous=sync)
            stores.append(store)
            rt = GraphRuntime(store, max_supersteps=100_000)
            runs[("graphflow", sync)] = lambda rt=rt: rt.invoke(
                graph, thread_id=f"t{next(counter)}")
        try:
            from langgraph.checkpoint.sqlite import SqliteSaver
        except ImportError:
            print("langgraph-checkpoint-sqlite is not installed: pip install -e '.[bench]'")
        else:
            for sync in ("normal", "full"):
                conn = sqlite3.connect(folder / f"langgraph-{sync}.db", check_same_thread=False)
                conns.append(conn)
                saver = SqliteSaver(conn)
                saver.setup()
                conn.execute(f"PRAGMA synchronous = {sync.upper()}")
                app = lg_chain(n, saver)

                def run(app: Any = app) -> None:
                    config = {"configurable": {"thread_id": f"t{next(counter)}"},
                              "recursion_limit": 100_000}
                    app.invoke({"n": 0}, config)

                runs[("langgraph", sync)] = run
        taken: dict[tuple[str, str], list[tuple[float, float]]] = {key: [] for key in runs}
        for round_ in range(args.repeat + 2):  # the sides take turns; two warm-up rounds
            for key, fn in runs.items():
                wall, cpu = timed(fn)
                if round_ >= 2:
                    taken[key].append((wall, cpu))
        for store in stores:
            store.close()
        for conn in conns:
            conn.close()
    best = {key: (min(w for w, _ in times), min(c for _, c in times))
            for key, times in taken.items()}
    median = {key: (statistics.median(w for w, _ in times),
                    statistics.median(c for _, c in times)) for key, times in taken.items()}
    for name, figures in (("best of the repeats", best), ("median run", median)):
        print(f"{'per step (' + name + ')':44s} {'wall':>10s} {'cpu':>10s}")
        for (side, sync), (wall, cpu) in figures.items():
            shipped = " (as shipped)" if (side, sync) in (("graphflow", "normal"),
                                                          ("langgraph", "full")) else ""
            label = f"{side} synchronous={sync}{shipped}"
            print(f"{label:44s} {wall / n * 1e6:7.1f} us {cpu / n * 1e6:7.1f} us")
        print(f"\n{'LangGraph / graphflow (' + name + ')':44s} {'wall':>10s} {'cpu':>10s}")
        pairs = [("like with like, normal", "normal", "normal"),
                 ("like with like, full", "full", "full"),
                 ("as shipped (full / normal)", "full", "normal")]
        for label, theirs, ours in pairs:
            if ("langgraph", theirs) in figures:
                (tw, tc), (ow, oc) = figures[("langgraph", theirs)], figures[("graphflow", ours)]
                print(f"{label:44s} {tw / ow:9.1f}x {tc / oc:9.1f}x")
        print()


if __name__ == "__main__":
    main()
