"""SQLite's own floor for one write transaction, by the number of b-trees it writes.

    .venv/bin/python benchmarks/bench_sqlite_floor.py [--rounds 100]
    .venv/bin/python benchmarks/bench_sqlite_floor.py --step [--rounds 30]

With ``--step``: a graphflow step's own SQLite statements alone (``BEGIN IMMEDIATE``,
``PRAGMA data_version``, the log row's insert with its id check, ``COMMIT``; a fold every 64
steps left out), replayed with the bytes of a real step's row on a store file a 50-node
chain filled, next to a whole step of that chain over ``SQLiteCheckpointStore`` and over the
in-memory store; the three take turns, and the median and best CPU time per step are
printed. The first is what SQLite costs a step whatever the Python around it does.

Each transaction is ``BEGIN IMMEDIATE``, one ``INSERT`` of a 900-byte row, ``COMMIT``, in WAL
mode with ``synchronous=NORMAL`` (the store's setting), into a table with 0 to 5 secondary
indexes, so it writes 1 to 6 b-trees. A graphflow step over ``SQLiteCheckpointStore`` writes
six (the checkpoint row and its id, run and thread indexes; the events and their
``(run_id, seq)`` index) in one such transaction. The median CPU time per transaction of
rounds of 50 is printed. No Python of graphflow runs here: this is what SQLite costs.
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from pathlib import Path

COLUMNS = ["c1", "c2", "c3", "c4", "c5"]


def make(folder: Path, indexes: int) -> sqlite3.Connection:
    db = sqlite3.connect(folder / f"floor-{indexes}.db", isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute("CREATE TABLE t (seq INTEGER PRIMARY KEY, c1 TEXT, c2 TEXT, c3 INTEGER, "
               "c4 TEXT, c5 INTEGER, data TEXT)")
    for i in range(indexes):
        db.execute(f"CREATE INDEX i{i} ON t ({COLUMNS[i]}, seq)")
    return db


def step_floor(rounds: int) -> None:
    """A step's SQLite statements alone against whole steps (see the module's docstring)."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from chains import gf_chain

    from pytest_graphflow import GraphRuntime, SQLiteCheckpointStore
    from pytest_graphflow._stores.sqlite._tail import FOLD_AT, PUT_NEW

    n = 50
    graph = gf_chain(n)
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteCheckpointStore(Path(tmp) / "floor.db")
        durable = GraphRuntime(store, max_supersteps=100_000)
        memory = GraphRuntime(max_supersteps=100_000)
        for i in range(10):
            durable.invoke(graph, thread_id=f"warm-{i}")
        db: sqlite3.Connection = store._conn
        # the row as the store wrote it, less ``slots`` (a literal of the insert)
        row = db.execute("SELECT * FROM log WHERE id IS NOT NULL ORDER BY seq DESC LIMIT 1"
                         ).fetchone()
        db.execute("CREATE TABLE floor AS SELECT * FROM log WHERE 0")  # the store's log stays
        put = PUT_NEW.replace("INTO log", "INTO floor")
        times: dict[str, list[float]] = {"SQLite statements of a step alone": [],
                                          "a step over SQLiteCheckpointStore": [],
                                          "a step over the in-memory store": []}
        seq = 0
        for r in range(rounds):
            t0 = time.process_time()
            for _ in range(n):
                seq += 1
                db.execute("BEGIN IMMEDIATE")
                db.execute("PRAGMA data_version").fetchone()
                db.execute(put, (seq % FOLD_AT, seq, row[2], f"floor-{seq}", *row[4:-2], row[-1]))
                db.execute("COMMIT")
            times["SQLite statements of a step alone"].append(time.process_time() - t0)
            t0 = time.process_time()
            durable.invoke(graph, thread_id=f"t{r}")
            times["a step over SQLiteCheckpointStore"].append(time.process_time() - t0)
            t0 = time.process_time()
            memory.invoke(graph, thread_id=f"m{r}")
            times["a step over the in-memory store"].append(time.process_time() - t0)
        store.close()
    print(f"{'CPU per step (50-node chain)':>36s} {'median':>9s} {'best':>9s}")
    for label, ts in times.items():
        ts.sort()
        print(f"{label:>36s} {ts[len(ts) // 2] / n * 1e6:6.1f} µs {ts[0] / n * 1e6:6.1f} µs")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--step", action="store_true",
                        help="a step's own SQLite statements against whole steps")
    args = parser.parse_args()
    if args.step:
        step_floor(args.rounds)
        return
    data = "x" * 900
    with tempfile.TemporaryDirectory() as tmp:
        dbs = {n: make(Path(tmp), n) for n in range(6)}
        times: dict[int, list[float]] = {n: [] for n in dbs}
        for r in range(args.rounds):
            for n, db in dbs.items():  # the variants take turns (the machine may be shared)
                t0 = time.process_time()
                for i in range(50):
                    db.execute("BEGIN IMMEDIATE")
                    db.execute("INSERT INTO t (c1, c2, c3, c4, c5, data) VALUES (?, ?, ?, ?, ?, ?)",
                               (f"id-{r}-{i}-{n}", f"run-{r}", i, f"thread-{r}", i, data))
                    db.execute("COMMIT")
                times[n].append((time.process_time() - t0) / 50)
        for db in dbs.values():
            db.close()
    print(f"{'b-trees written':>16s} {'CPU per transaction':>22s}")
    for n, ts in times.items():
        ts.sort()
        print(f"{n + 1:16d} {ts[len(ts) // 2] * 1e6:19.1f} µs")


if __name__ == "__main__":
    main()
