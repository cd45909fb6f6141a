"""What a PostgreSQL checkpoint costs at step k of one long run (issue 29: flat per step?)

    GRAPHFLOW_POSTGRES_DSN=... .venv/bin/python benchmarks/bench_pg_step_bytes.py \
        [--steps 5000] [--at 10,1000,5000] [--width 1] [--schema bench_pg8]

One run of a ring of ``--width`` nodes (a checkpoint a step, every step the runtime's plain
step). At the commits named by ``--at`` the step's statement is first run once under
``EXPLAIN (ANALYZE, WAL)`` in a transaction rolled back (on a connection of its own: the
statement's own WAL, whatever else the shared server writes), then as usual. Printed for
each: the bytes of the statement's parameters, of the checkpoint's ``data`` column as
stored, and the WAL records/bytes the statement wrote, averaged over ``--window`` commits
from there (a b-tree page split lands on one of them). Counts, not times.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

import psycopg

from pytest_graphflow import GraphRuntime, PostgresCheckpointStore

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from graphflow_chains import ring


def loop(width: int) -> Any:
    """A ring of ``width`` nodes (``node-0``, ...; one: ``step``), one a step, until ``n`` reaches
    ``limit`` (one node: its path compresses well in TOAST; many: as a long chain's)."""
    return ring("loop", ["step"] if width == 1 else [f"node-{i}" for i in range(width)])


def _size(value: Any) -> int:
    return len(value.encode()) if isinstance(value, str) else len(str(value).encode())


def _wal(node: dict[str, Any], key: str) -> int:
    """A plan's ``key`` count: the sum over the nodes that write (each node's counts include
    its children's, and the data-modifying CTEs and the claim's row lock are nodes of their
    own, under the top node or beside it)."""
    own = int(node.get(key, 0)) if node.get("Node Type") in ("ModifyTable", "LockRows") else 0
    return own + sum(_wal(c, key) for c in node.get("Plans", ()))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--at", default="10,1000,5000")
    parser.add_argument("--schema", default="bench_pg8")
    parser.add_argument("--width", type=int, default=1, help="nodes in the ring")
    parser.add_argument("--window", type=int, default=64,
                        help="WAL averaged over this many commits from each --at")
    args = parser.parse_args()
    dsn = os.environ["GRAPHFLOW_POSTGRES_DSN"]
    at = {int(a) for a in args.at.split(",")}
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {args.schema} CASCADE")
    spy = psycopg.connect(dsn)
    spy.execute(f"SET search_path = {args.schema}")
    spy.commit()
    found: dict[int, dict[str, Any]] = {}
    # Each step's statement through fetch_one (not sent ahead: StoreFeatures.sent_commits),
    # so each one is explained here; the statements are the same either way.
    PostgresCheckpointStore.features = dataclasses.replace(
        PostgresCheckpointStore.features, sent_commits=False)
    store = PostgresCheckpointStore(dsn, schema=args.schema)
    real = store._pg.fetch_one
    commits = 0

    async def fetch_one(query: str, params: Any) -> Any:
        nonlocal commits
        if "INSERT INTO checkpoints" in query:
            commits += 1
            start = next((a for a in at if a <= commits < a + args.window), None)
            if start is not None:
                plan = spy.execute("EXPLAIN (ANALYZE, WAL, FORMAT JSON) " + query,
                                   params).fetchone()[0]
                spy.rollback()
                if os.environ.get("PLAN"):
                    print(json.dumps(plan, indent=1))
                top = plan[0]["Plan"]
                seen = found.setdefault(start, {
                    "params": sum(_size(p) for p in params if p is not None), "id": None,
                    "wal_records": 0, "wal_bytes": 0, "wal_fpi": 0})
                for k, w in (("wal_records", "Records"), ("wal_bytes", "Bytes"),
                             ("wal_fpi", "FPI")):
                    seen[k] += _wal(top, f"WAL {w}") / args.window
        return await real(query, params)

    store._pg.fetch_one = fetch_one  # type: ignore[method-assign]
    rt = GraphRuntime(store, max_supersteps=args.steps + 10)
    rt.invoke(loop(args.width), {"limit": args.steps}, thread_id="t-long")
    for k in sorted(found):
        row = spy.execute("SELECT octet_length(data), id FROM checkpoints WHERE thread_id = "
                          "'t-long' ORDER BY ts_us, save_order OFFSET %s LIMIT 1",
                          (k - 1,)).fetchone()
        found[k]["data_bytes"] = row[0]
        found[k].pop("id")
        print(json.dumps({"commit": k, **found[k]}))
    total = spy.execute("SELECT pg_total_relation_size('checkpoints'), count(*) FROM "
                        "checkpoints").fetchone()
    paths = spy.execute("SELECT to_regclass('paths')").fetchone()[0]
    extra = spy.execute("SELECT pg_total_relation_size('paths')").fetchone()[0] if paths else 0
    print(json.dumps({"steps": args.steps, "width": args.width, "checkpoints_bytes": total[0],
                      "rows": total[1], "paths_bytes": extra}))
    spy.close()
    store.close()


if __name__ == "__main__":
    main()
