"""SQLite's own floor for one write transaction, by the number of b-trees it writes.

    .venv/bin/python benchmarks/bench_sqlite_floor.py [--rounds 100]

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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args()
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
