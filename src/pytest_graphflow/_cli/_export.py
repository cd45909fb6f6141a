"""``graphflow export FILE RUN_ID OUT``: a run of a store file written as a history file."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

__all__ = ["add_export", "export_command"]


def add_export(sub: Any, helpers: dict[str, Callable[..., Any]]) -> None:
    """Register the ``export`` subcommand; ``helpers`` are the CLI's ``fail`` (an exception
    class), ``with_store`` and ``load_graph``."""
    export = sub.add_parser(
        "export", help="write a run as a history file (replay it with assert_replays or "
        "--graphflow-replay; check it with check_upgrade)")
    export.add_argument("file", metavar="FILE", help="a SQLite store file")
    export.add_argument("run_id", metavar="RUN_ID")
    export.add_argument("out", metavar="OUT", help="the history file to write "
                        "(name it *.history.json for --graphflow-replay)")
    export.add_argument("--seed", type=int, default=None,
                        help="the seed of the runtime that ran it, if it had one")
    export.add_argument("--clock-start", default=None, metavar="ISO",
                        help="the virtual clock's start, for a run on a virtual clock "
                        "(without it, a replay compares everything but times)")
    export.add_argument("--graph", default=None, metavar="MODULE:GRAPH",
                        help="where the graph is, recorded for --graphflow-replay")
    export.set_defaults(command=lambda args: export_command(args, helpers))


def export_command(args: argparse.Namespace, helpers: dict[str, Callable[..., Any]]) -> str:
    """Run ``graphflow export``."""
    from .._replay._export import export_history

    fail, load_graph, with_store = (helpers["fail"], helpers["load_graph"],
                                       helpers["with_store"])

    start: datetime | None = None
    if args.clock_start is not None:
        try:
            start = datetime.fromisoformat(args.clock_start)
        except ValueError:
            raise fail(f"--clock-start={args.clock_start!r} is not an ISO-8601 date-time "
                        "such as 2025-01-01T00:00:00+00:00") from None
        if start.tzinfo is None:
            start = start.replace(tzinfo=UTC)
    graph = load_graph(args.graph) if args.graph is not None else None

    async def read(store: Any) -> Any:
        return await export_history(store, args.run_id, seed=args.seed, clock_start=start,
                                    graph=graph, graph_ref=args.graph)

    history = with_store(args.file, read)
    history = history.model_copy(update={"source": f"{args.file} (graphflow export)"})
    try:
        path = history.save(args.out)
    except OSError as exc:
        raise fail(f"cannot write {args.out!r}: {exc}") from None
    legs = sum(1 for e in history.events if e.get("type") == "run_start")
    return (f"wrote {path}: run {history.run_id} of graph {history.graph_id!r} "
            f"({len(history.events)} events in {legs} leg(s), {len(history.checkpoints)} "
            f"checkpoints, status {history.status})")
