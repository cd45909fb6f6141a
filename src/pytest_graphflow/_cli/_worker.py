"""``graphflow worker``: run a worker process over a PostgreSQL store.

::

    graphflow worker DSN MODULE:GRAPH [MODULE:GRAPH ...] [--schema S] [--claim-ttl SECONDS]
                     [--poll SECONDS] [--name NAME] [--max-jobs N] [--max-attempts N]
                     [--until-done]

SIGTERM or SIGINT stops it gracefully: the current step finishes, its checkpoint is saved,
the thread's claim is released and the job handed back. It prints one summary line at exit.
A bad argument prints one line (or argparse's usage) and exits with status 2; the DSN is
shown with its password hidden (:mod:`._dsn`).
"""

from __future__ import annotations

import argparse
import logging
import math
from collections.abc import Callable
from typing import Any

from ._dsn import redact, scrub

__all__ = ["add_worker_parser"]


def _positive(kind: type[float] | type[int], what: str) -> Callable[[str], float | int]:
    """An argparse type: a finite number > 0 of ``kind``."""

    def parse(text: str) -> float | int:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value) or value <= 0:
            raise argparse.ArgumentTypeError(f"{text} is not a positive {what}")
        return value

    return parse


def add_worker_parser(sub: Any, load_graph: Callable[[str], Any], fail: type[Exception]) -> None:
    """Add the ``worker`` subcommand to the ``graphflow`` parser."""
    from .._workers._worker import DEFAULT_MAX_ATTEMPTS

    seconds = _positive(float, "number of seconds")
    count = _positive(int, "whole number")
    worker = sub.add_parser(
        "worker", help="take queued runs from a PostgreSQL store and run them",
        description="Take queued runs (store.enqueue(...)) from a PostgreSQL store and run them; "
                    "start several, on several machines. SIGTERM stops after the current step.")
    worker.add_argument("dsn", metavar="DSN", help="the PostgreSQL server (libpq DSN or URI)")
    worker.add_argument("graphs", metavar="MODULE:GRAPH", nargs="+",
                        help="the graphs this worker serves (it takes only their jobs)")
    worker.add_argument("--schema", default="graphflow", help="the store's schema")
    worker.add_argument("--claim-ttl", type=seconds, default=30.0, metavar="SECONDS",
                        help="thread claim time to live (a dead worker's runs are taken over "
                             "after it; a job that raised is retried after it)")
    worker.add_argument("--poll", type=seconds, default=0.2, metavar="SECONDS",
                        help="wait between looks at an empty queue")
    worker.add_argument("--name", default=None, help="the worker's name (default host:pid)")
    worker.add_argument("--max-jobs", type=count, default=None, metavar="N",
                        help="exit after N runs ended")
    worker.add_argument("--max-attempts", type=count, default=DEFAULT_MAX_ATTEMPTS,
                        metavar="N", help="fail a job with its reason once it was taken N "
                        f"times without its run ending (default {DEFAULT_MAX_ATTEMPTS})")
    worker.add_argument("--until-done", action="store_true",
                        help="exit once no job of its graphs is queued (finished or waiting "
                             "for answers)")

    def command(args: argparse.Namespace) -> str:
        graphs = [load_graph(target) for target in args.graphs]
        store = _open_store(args, fail)
        try:
            return _serve(store, graphs, args, fail)
        finally:
            store.close()

    worker.set_defaults(command=command)


def _open_store(args: argparse.Namespace, fail: type[Exception]) -> Any:
    try:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict

        from .._stores.postgres._store import PostgresCheckpointStore
    except ImportError as exc:
        raise fail(f"graphflow worker needs the postgres extra ({exc}); install it with "
                   "pip install 'pytest-graphflow[postgres]'") from None
    from ..errors import GraphflowError

    shown = redact(args.dsn)
    try:
        conninfo_to_dict(args.dsn)
    except psycopg.Error as exc:
        raise fail(f"DSN {shown!r} is not a libpq connection string or URI "
                   f"({scrub(str(exc), args.dsn)}); write it as 'host=HOST dbname=DB user=USER' "
                   "or 'postgresql://USER@HOST/DB'") from None
    try:
        return PostgresCheckpointStore(args.dsn, schema=args.schema, claim_ttl=args.claim_ttl)
    except psycopg.Error as exc:
        raise fail(f"cannot open the store on {shown!r}: {scrub(str(exc), args.dsn)}") from None
    except GraphflowError as exc:
        raise fail(scrub(str(exc), args.dsn)) from None


def _serve(store: Any, graphs: list[Any], args: argparse.Namespace,
           fail: type[Exception]) -> str:
    import psycopg

    from .._workers._worker import Worker
    from ..errors import GraphflowError

    try:
        worker = Worker(store, graphs, name=args.name, poll_interval=args.poll,
                        max_attempts=args.max_attempts)
    except GraphflowError as exc:
        raise fail(str(exc)) from None
    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    try:
        stats = worker.serve(max_jobs=args.max_jobs, until_done=args.until_done)
    except psycopg.Error as exc:
        raise fail(f"lost the store on {redact(args.dsn)!r}: {scrub(str(exc), args.dsn)}; "
                   "the jobs it held are taken over once their claims expire") from None
    return (f"worker {args.name or ''}: {stats.runs} runs ended ({stats.started} started, "
            f"{stats.continued} continued), {stats.handed_back} handed back, "
            f"{stats.busy} busy, {stats.errors} errors, {stats.gave_up} failed after "
            f"{args.max_attempts} attempts").replace("worker : ", "worker: ")
