"""What a durable SQLite step costs, counted without noise (the machine may be shared).

    .venv/bin/python benchmarks/bench_sqlite_counts.py [--nodes 50] [--runs 20]

Runs ``--runs`` chains of ``--nodes`` nodes and as many one-node chains on one store file
(real clock, ``synchronous="normal"``, three warm-up runs each) and prints, a step (the
difference of the two, over ``runs * (nodes - 1)`` steps, so a run's fixed part is left
out and the log's folds are in, as often as a user's runs pay them):

- Python calls (cProfile's total, the store's callbacks off);
- SQL statements SQLite ran (its trace callback: ``executemany`` counts each row);
- SQLite virtual-machine instructions (its progress handler, called at every one);
- WAL pages written (frames added to the ``-wal`` file, auto-checkpoint off);

and, for the folds among those runs (see ``_stores/sqlite/_tail.py``), how many there were
and the statements and VM instructions of one. Nothing here is timed.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from chains import gf_chain

from pytest_graphflow import GraphRuntime, SQLiteCheckpointStore
from pytest_graphflow._stores.sqlite import _tail, _tx

_FRAME = 24  # bytes of a WAL frame's header, before its page


class _Counts:
    """Statements and VM instructions, in all and inside folds."""

    def __init__(self) -> None:
        self.sql = self.ops = self.fold_sql = self.fold_ops = self.folds = 0
        self.in_fold = False

    def statement(self, _sql: str) -> None:
        self.sql += 1
        self.fold_sql += self.in_fold

    def instruction(self) -> int:
        self.ops += 1
        self.fold_ops += self.in_fold
        return 0


@contextmanager
def _folds_counted(counts: _Counts) -> Iterator[None]:
    """Count the folds (``_tail.fold``, as the store's modules call it) while inside."""
    original = _tail.fold

    def fold(*args: Any, **kwargs: Any) -> Any:
        counts.in_fold = True
        counts.folds += 1
        try:
            return original(*args, **kwargs)
        finally:
            counts.in_fold = False

    modules: list[Any] = [_tail, _tx]  # where the store's code looks ``fold`` up
    for module in modules:
        module.fold = fold
    try:
        yield
    finally:
        for module in modules:
            module.fold = original


def _measure(store: SQLiteCheckpointStore, run: Callable[[], object], runs: int
             ) -> tuple[int, _Counts, int]:
    """Calls, counts and WAL frames of ``runs`` calls of ``run`` (after three warm-ups)."""
    for _ in range(3):
        run()
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(runs):
        run()
    profile.disable()
    calls = pstats.Stats(profile).total_calls  # type: ignore[attr-defined]
    db: sqlite3.Connection = store._conn
    wal = f"{store.path}-wal"
    page_size = db.execute("PRAGMA page_size").fetchone()[0]
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = os.path.getsize(wal)
    counts = _Counts()
    db.set_trace_callback(counts.statement)
    db.set_progress_handler(counts.instruction, 1)
    with _folds_counted(counts):
        for _ in range(runs):
            run()
    db.set_trace_callback(None)
    db.set_progress_handler(None, 1)
    frames = (os.path.getsize(wal) - max(before, 32)) // (page_size + _FRAME)
    return calls, counts, frames


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteCheckpointStore(Path(tmp) / "counts.db")
        try:
            store._conn.execute("PRAGMA wal_autocheckpoint = 0")  # every frame stays
            runtime = GraphRuntime(store, max_supersteps=100_000)
            long, short = gf_chain(args.nodes, "long"), gf_chain(1, "short")
            a = _measure(store, lambda: runtime.invoke(long), args.runs)
            b = _measure(store, lambda: runtime.invoke(short), args.runs)
        finally:
            store.close()
    steps = args.runs * (args.nodes - 1)
    (calls_a, counts_a, frames_a), (calls_b, counts_b, frames_b) = a, b
    print(f"a step, over {steps} steps ({args.runs} runs of {args.nodes} nodes minus "
          f"{args.runs} of 1):")
    print(f"  Python calls      {(calls_a - calls_b) / steps:8.1f}")
    print(f"  SQL statements    {(counts_a.sql - counts_b.sql) / steps:8.2f}")
    print(f"  SQLite VM ops     {(counts_a.ops - counts_b.ops) / steps:8.0f}")
    print(f"  WAL pages         {(frames_a - frames_b) / steps:8.3f}")
    folds = counts_a.folds
    if folds:
        print(f"folds in the {args.runs} long runs: {folds}; a fold: "
              f"{counts_a.fold_sql / folds:.0f} statements, "
              f"{counts_a.fold_ops / folds:.0f} VM ops")


if __name__ == "__main__":
    main()
