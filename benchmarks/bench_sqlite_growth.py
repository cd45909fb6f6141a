"""Does the SQLite store stay flat as it grows? (issue 12)

    .venv/bin/python benchmarks/bench_sqlite_growth.py [--runs 10000] [--steps 10000]

1. Per-run cost: ``--runs`` runs of a 3-node chain into one file, each on its own thread;
   the mean time per run of the first 100 against the last 100.
2. Per-step cost: one run of 100 steps and one of ``--steps`` steps (a node looping on
   itself), each in a fresh file; the time per step and the file size per step.
3. Reads of the long run: ``latest``, one page of ``history(limit=100)`` and the oldest page.

No timing is asserted anywhere; the figures go in docs/stores.md.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, GraphRuntime, SQLiteCheckpointStore


class S(BaseModel):
    n: int = 0
    limit: int = 0


def chain(n: int) -> Any:
    g = Graph("chain", S)
    prev = START
    for i in range(n):
        g.node(f"n{i}", lambda s: {"n": s.n + 1})
        g.edge(prev, f"n{i}")
        prev = f"n{i}"
    return g.edge(prev, END).compile()


def loop() -> Any:
    g = Graph("loop", S)
    g.node("step", lambda s: {"n": s.n + 1})
    g.edge(START, "step")
    g.branch("step", lambda s: "again" if s.n < s.limit else "done",
             {"again": "step", "done": END})
    return g.compile()


def size(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def per_run(folder: Path, runs: int) -> None:
    graph = chain(3)
    with SQLiteCheckpointStore(folder / "runs.db") as store:
        rt = GraphRuntime(store)
        wall: list[float] = []
        cpu: list[float] = []
        for i in range(runs):
            start, start_cpu = time.perf_counter(), time.process_time()
            rt.invoke(graph, thread_id=f"thread-{i}")
            wall.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
            rt._runs.clear()  # the runtime's own in-memory records are not the store's cost
    for label, times in (("wall", wall), ("cpu", cpu)):
        first = sum(times[:100]) / 100 * 1000
        last = sum(times[-100:]) / 100 * 1000
        print(f"per run ({label}): first 100 {first:.2f} ms, last 100 (of {runs}) "
              f"{last:.2f} ms, ratio {last / first:.2f}")


def per_step(folder: Path, steps: int) -> tuple[float, float, int, str, Path]:
    path = folder / f"steps-{steps}.db"
    graph = loop()
    with SQLiteCheckpointStore(path) as store:
        rt = GraphRuntime(store, max_supersteps=steps + 10)
        start, start_cpu = time.perf_counter(), time.process_time()
        result = rt.invoke(graph, {"limit": steps})
        elapsed, cpu = time.perf_counter() - start, time.process_time() - start_cpu
        assert result.status == "completed", result.error
    return elapsed / steps * 1000, cpu / steps * 1000, size(path), result.run_id, path


def reads(path: Path, run_id: str) -> None:
    async def main() -> None:
        with SQLiteCheckpointStore(path, readonly=True) as store:
            rt = GraphRuntime(store)
            for label, call in [
                ("latest", lambda: store.latest(run_id)),
                ("history(limit=100)", lambda: rt.history(run_id, limit=100)),
            ]:
                start = time.perf_counter()
                found = await call()
                print(f"  {label}: {(time.perf_counter() - start) * 1000:.1f} ms "
                      f"({len(found) if isinstance(found, list) else 1} checkpoint(s))")
            page = await rt.history(run_id, limit=100)
            pages = 1
            start = time.perf_counter()
            while len(page) == 100:
                page = await rt.history(run_id, limit=100, before=page[0].id)
                pages += 1
            print(f"  every page back to the first: {pages} pages in "
                  f"{time.perf_counter() - start:.2f} s")

    anyio.run(main)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        per_run(folder, args.runs)
        short, short_cpu, short_size, _, _ = per_step(folder, 100)
        long, long_cpu, long_size, run_id, path = per_step(folder, args.steps)
        print(f"per step (wall): 100-step run {short:.3f} ms, {args.steps}-step run "
              f"{long:.3f} ms, ratio {long / short:.2f}")
        print(f"per step (cpu): 100-step run {short_cpu:.3f} ms, {args.steps}-step run "
              f"{long_cpu:.3f} ms, ratio {long_cpu / short_cpu:.2f}")
        print(f"file size per step: {short_size / 100 / 1024:.2f} KiB (100 steps), "
              f"{long_size / args.steps / 1024:.2f} KiB ({args.steps} steps); "
              f"{long_size / 2**20:.1f} MiB in all")
        reads(path, run_id)
        print(f"(pid {os.getpid()})")


if __name__ == "__main__":
    main()
