"""``graphflow worker``: run a worker process over a PostgreSQL store.

::

    graphflow worker DSN MODULE:GRAPH [MODULE:GRAPH ...] [--schema S] [--claim-ttl SECONDS]
                     [--poll SECONDS] [--name NAME] [--max-jobs N] [--max-attempts N]
                     [--until-done]

SIGTERM or SIGINT stops it gracefully: the current step finishes, its checkpoint is saved,
the thread's claim is released and the job handed back. It prints one summary line at exit.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from typing import Any

__all__ = ["add_worker_parser"]


def add_worker_parser(sub: Any, load_graph: Callable[[str], Any], fail: type[Exception]) -> None:
    """Add the ``worker`` subcommand to the ``graphflow`` parser."""
    from .._workers._worker import DEFAULT_MAX_ATTEMPTS

    worker = sub.add_parser(
        "worker", help="take queued runs from a PostgreSQL store and run them",
        description="Take queued runs (store.enqueue(...)) from a PostgreSQL store and run them; "
                    "start several, on several machines. SIGTERM stops after the current step.")
    worker.add_argument("dsn", metavar="DSN", help="the PostgreSQL server (libpq DSN or URI)")
    worker.add_argument("graphs", metavar="MODULE:GRAPH", nargs="+",
                        help="the graphs this worker serves (it takes only their jobs)")
    worker.add_argument("--schema", default="graphflow", help="the store's schema")
    worker.add_argument("--claim-ttl", type=float, default=30.0, metavar="SECONDS",
                        help="thread claim time to live (a dead worker's runs are taken over "
                             "after it; a job that raised is retried after it)")
    worker.add_argument("--poll", type=float, default=0.2, metavar="SECONDS",
                        help="wait between looks at an empty queue")
    worker.add_argument("--name", default=None, help="the worker's name (default host:pid)")
    worker.add_argument("--max-jobs", type=int, default=None, metavar="N",
                        help="exit after N runs ended")
    worker.add_argument("--max-attempts", type=int, default=DEFAULT_MAX_ATTEMPTS,
                        metavar="N", help="fail a job with its reason once it was taken N "
                        f"times without its run ending (default {DEFAULT_MAX_ATTEMPTS})")
    worker.add_argument("--until-done", action="store_true",
                        help="exit once no job of its graphs is queued (finished or waiting "
                             "for answers)")

    def command(args: argparse.Namespace) -> str:
        import psycopg

        from .._stores._postgres import PostgresCheckpointStore
        from .._workers._worker import Worker

        graphs = [load_graph(target) for target in args.graphs]
        logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
        try:
            store = PostgresCheckpointStore(args.dsn, schema=args.schema,
                                            claim_ttl=args.claim_ttl)
        except psycopg.Error as exc:
            raise fail(f"cannot open the store on {args.dsn!r}: {exc}") from None
        stats = Worker(store, graphs, name=args.name, poll_interval=args.poll,
                        max_attempts=args.max_attempts).serve(
            max_jobs=args.max_jobs, until_done=args.until_done)
        return (f"worker {args.name or ''}: {stats.runs} runs ended ({stats.started} started, "
                f"{stats.continued} continued), {stats.handed_back} handed back, "
                f"{stats.busy} busy, {stats.errors} errors, {stats.gave_up} failed after "
                f"{args.max_attempts} attempts").replace("worker : ", "worker: ")

    worker.set_defaults(command=command)
