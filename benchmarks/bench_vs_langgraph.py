"""Per-step cost of pytest-graphflow against LangGraph, on the same graphs, in one run.

    .venv/bin/pip install langgraph     # only for this benchmark
    .venv/bin/python benchmarks/bench_vs_langgraph.py [--nodes 200] [--repeat 15]

Graphs: a chain of N sequential nodes (each increments a counter) and a fan-out of 4
parallel nodes repeated N/4 times with a reducer. Reported: the best time per node-step of
several runs, and the ratio LangGraph / graphflow. No timing is asserted anywhere.
"""

from __future__ import annotations

import argparse
import asyncio
import operator
import time
from typing import Annotated, Any

from pydantic import BaseModel
from typing_extensions import TypedDict

from pytest_graphflow import END, START, Graph, GraphRuntime, Reducer, VirtualClock


class GFState(BaseModel):
    n: int = 0
    log: Annotated[list[int], Reducer(operator.add)] = []


def gf_chain(n: int, policy: str) -> Any:
    g = Graph("chain", GFState)
    prev = START
    for i in range(n):
        g.node(f"n{i}", lambda s: {"n": s.n + 1})
        g.edge(prev, f"n{i}")
        prev = f"n{i}"
    g.edge(prev, END)
    return g.compile(checkpoint_policy=policy)  # type: ignore[arg-type]


def gf_fanout(rounds: int, policy: str) -> Any:
    g = Graph("fanout", GFState)
    prev = START
    for r in range(rounds):
        names = [f"r{r}w{k}" for k in range(4)]
        for name in names:
            g.node(name, lambda s: {"log": [1]})
        g.edge(prev, names)
        g.node(f"j{r}", lambda s: {"n": s.n + 1})
        g.edge(names, f"j{r}")
        prev = f"j{r}"
    g.edge(prev, END)
    return g.compile(checkpoint_policy=policy)  # type: ignore[arg-type]


class LGState(TypedDict):
    n: int
    log: Annotated[list[int], operator.add]


def lg_chain(n: int, saver: bool) -> Any:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import StateGraph

    g = StateGraph(LGState)
    prev = "__start__"
    for i in range(n):
        g.add_node(f"n{i}", lambda s: {"n": s["n"] + 1})
        g.add_edge(prev, f"n{i}")
        prev = f"n{i}"
    g.add_edge(prev, "__end__")
    return g.compile(checkpointer=InMemorySaver() if saver else None)


def lg_fanout(rounds: int, saver: bool) -> Any:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import StateGraph

    g = StateGraph(LGState)
    prev = "__start__"
    for r in range(rounds):
        names = [f"r{r}w{k}" for k in range(4)]
        for name in names:
            g.add_node(name, lambda s: {"log": [1]})
            g.add_edge(prev, name)
        g.add_node(f"j{r}", lambda s: {"n": s["n"] + 1})
        g.add_edge(names, f"j{r}")
        prev = f"j{r}"
    g.add_edge(prev, "__end__")
    return g.compile(checkpointer=InMemorySaver() if saver else None)


def best_of(repeat: int, fn: Any) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    n, rounds = args.nodes, args.nodes // 5
    steps = {"chain": n, "fanout": rounds * 5}
    loop = asyncio.new_event_loop()
    results: dict[tuple[str, str], float] = {}

    for shape, build in (("chain", gf_chain), ("fanout", gf_fanout)):
        size = n if shape == "chain" else rounds
        for policy, label in (("every_step", "graphflow+checkpoints"), ("never", "graphflow")):
            graph = build(size, policy)
            rt = GraphRuntime(clock=VirtualClock(patch_wall_clock=False), seed=0,
                              max_supersteps=100_000)
            def run_gf(rt: Any = rt, graph: Any = graph) -> None:
                loop.run_until_complete(rt.ainvoke(graph, {}))

            t = best_of(args.repeat, run_gf)
            results[(shape, label)] = t / steps[shape] * 1e6
    try:
        for shape, build_lg in (("chain", lg_chain), ("fanout", lg_fanout)):
            size = n if shape == "chain" else rounds
            for saver, label in ((True, "langgraph+InMemorySaver"), (False, "langgraph")):
                app = build_lg(size, saver)
                counter = iter(range(10**9))

                def run(app: Any = app, counter: Any = counter) -> None:
                    config = {"configurable": {"thread_id": f"t{next(counter)}"},
                              "recursion_limit": 100_000}
                    app.invoke({"n": 0, "log": []}, config)

                t = best_of(args.repeat, run)
                results[(shape, label)] = t / steps[shape] * 1e6
    except ImportError:
        print("langgraph is not installed: pip install langgraph to compare")
    for (shape, label), us in sorted(results.items()):
        print(f"{shape:7s} {label:26s} {us:8.1f} us/step")
    for shape in ("chain", "fanout"):
        for lg, gf in (("langgraph+InMemorySaver", "graphflow+checkpoints"),
                       ("langgraph", "graphflow")):
            if (shape, lg) in results:
                ratio = results[(shape, lg)] / results[(shape, gf)]
                print(f"{shape:7s} {lg} / {gf}: {ratio:5.1f}x")


if __name__ == "__main__":
    main()
