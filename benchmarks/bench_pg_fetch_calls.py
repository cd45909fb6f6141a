"""What the PostgreSQL store's client does for one prepared statement, counted (issue 29).

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        .venv/bin/python benchmarks/bench_pg_fetch_calls.py --calls 200 --ir [--pool] --dsn DSN
    (then --calls 1200: the difference / 1000 is one ``fetch_one``'s instructions)

Runs ``PgConnections.fetch_one`` (the path a step's statement takes: prepared, sent straight
through libpq) ``--calls`` times with a three-parameter statement, on the sync connection or
(``--pool``) the async pool's hot connection, and prints the Python calls a call (cProfile,
noise-free). Instructions need valgrind (their counts are noise-free; a shared host's times
are not). pg9's pass: 42.4 k -> 37.6 k instructions and 19 -> 9 calls sync, 53.4 k ->
47.0 k and 26 -> 15 on the pool (``run_now`` is one of the sync calls).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import uuid

from pytest_graphflow import PostgresCheckpointStore
from pytest_graphflow._stores.postgres import _conn
from pytest_graphflow._stores.postgres._conn import run_now

_SQL = "SELECT %s::bigint + 1, %s::text, %s::boolean"


def _sync(dsn: str, calls: int, profile: cProfile.Profile) -> None:
    with PostgresCheckpointStore(dsn, schema=f"bench_{uuid.uuid4().hex[:8]}") as store:
        try:
            fetch = store._pg.fetch_one
            run_now(fetch(_SQL, [0, "x", True]))  # prepared on the connection
            profile.enable()
            for i in range(calls):
                assert run_now(fetch(_SQL, [i, "x", True]))[0] == i + 1
            profile.disable()
        finally:
            store.drop()


async def _pool(dsn: str, calls: int, profile: cProfile.Profile) -> None:
    _conn._QUICK_WAIT = 30.0  # every answer waited for quickly, however slow the host
    _conn._MAX_BUSY = 3600.0
    async with PostgresCheckpointStore(dsn, schema=f"bench_{uuid.uuid4().hex[:8]}") as store:
        try:
            fetch = store._pg.fetch_one
            await fetch(_SQL, [0, "x", True])
            profile.enable()
            for i in range(calls):
                assert (await fetch(_SQL, [i, "x", True]))[0] == i + 1
            profile.disable()
        finally:
            store.drop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--pool", action="store_true")
    parser.add_argument("--ir", action="store_true",
                        help="no profiler (its own instructions would be counted)")
    parser.add_argument("--dsn", default=os.environ.get("GRAPHFLOW_POSTGRES_DSN"))
    args = parser.parse_args()
    if not args.dsn:
        parser.error("pass --dsn or set GRAPHFLOW_POSTGRES_DSN")
    profile = cProfile.Profile()
    if args.ir:
        profile.enable = profile.disable = lambda: None  # type: ignore[method-assign]
    if args.pool:
        asyncio.run(_pool(args.dsn, args.calls, profile))
    else:
        _sync(args.dsn, args.calls, profile)
    if args.ir:
        return
    calls = pstats.Stats(profile).total_calls  # type: ignore[attr-defined]
    print(f"{'pool' if args.pool else 'sync'}: {calls / args.calls:.1f} Python calls a fetch_one")


if __name__ == "__main__":
    main()
