"""Per-step cost of a durable SQLite chain: pytest-graphflow against LangGraph's SqliteSaver.

    .venv/bin/pip install -e ".[bench]"      # langgraph + langgraph-checkpoint-sqlite
    .venv/bin/python benchmarks/bench_sqlite_vs_langgraph.py [--nodes 50] [--repeat 20]

Both run a chain of ``--nodes`` nodes (each increments a counter), checkpointing after
every step into one SQLite file each, reused across the repeats (a new thread per run).
Reported: the best time per step of the repeats (wall and CPU), and the ratio
LangGraph / graphflow. No timing is asserted anywhere.
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from typing_extensions import TypedDict

from pytest_graphflow import END, START, Graph, GraphRuntime
from pytest_graphflow._stores._sqlite import SQLiteCheckpointStore


class GFState(BaseModel):
    n: int = 0


class LGState(TypedDict):
    n: int


def gf_chain(n: int) -> Any:
    g = Graph("chain", GFState)
    prev = START
    for i in range(n):
        g.node(f"n{i}", lambda s: {"n": s.n + 1})
        g.edge(prev, f"n{i}")
        prev = f"n{i}"
    return g.edge(prev, END).compile(checkpoint_policy="every_step")


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


def best_of(repeat: int, fn: Any) -> tuple[float, float]:
    wall = cpu = float("inf")
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall = min(wall, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    n = args.nodes
    results: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        with SQLiteCheckpointStore(folder / "graphflow.db") as store:
            rt = GraphRuntime(store, max_supersteps=100_000)
            graph = gf_chain(n)
            counter = iter(range(10**9))
            wall, cpu = best_of(args.repeat, lambda: rt.invoke(
                graph, thread_id=f"t{next(counter)}"))
            results["graphflow SQLiteCheckpointStore"] = (wall / n * 1e6, cpu / n * 1e6)
        try:
            from langgraph.checkpoint.sqlite import SqliteSaver
        except ImportError:
            print("langgraph-checkpoint-sqlite is not installed: pip install -e '.[bench]'")
        else:
            conn = sqlite3.connect(folder / "langgraph.db", check_same_thread=False)
            app = lg_chain(n, SqliteSaver(conn))
            counter = iter(range(10**9))

            def run() -> None:
                config = {"configurable": {"thread_id": f"t{next(counter)}"},
                          "recursion_limit": 100_000}
                app.invoke({"n": 0}, config)

            wall, cpu = best_of(args.repeat, run)
            results["langgraph SqliteSaver"] = (wall / n * 1e6, cpu / n * 1e6)
            conn.close()
    for label, (wall, cpu) in results.items():
        print(f"{label:34s} {wall:8.1f} us/step wall {cpu:8.1f} us/step cpu")
    if len(results) == 2:
        (gw, gc), (lw, lc) = results.values()
        print(f"LangGraph / graphflow per step: {lw / gw:.1f}x wall, {lc / gc:.1f}x cpu")


if __name__ == "__main__":
    main()
