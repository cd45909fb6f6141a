"""``graphflow html SOURCE [RUN_ID] -o OUT``: a run as one self-contained HTML page.

``SOURCE`` is a store (a SQLite file or a PostgreSQL DSN, with ``--schema``) with the run's
``RUN_ID``, or a history file (``graphflow
export``, ``--graphflow-record``) without one. The page draws the graph when it is known:
``--graph MODULE:GRAPH``, else a history file's recorded ``graph_ref`` if it imports; without
it, the drawing is the path the run took. ``OUT`` is written as ``graphflow export`` writes
(:mod:`._export`): never onto the source, an existing file only with ``--force``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["add_html"]


def add_html(sub: Any, helpers: dict[str, Callable[..., Any]]) -> None:
    """Register the ``html`` subcommand; ``helpers`` are the CLI's ``fail`` (an exception
    class), ``with_store``, ``load_graph`` and ``all_events``."""
    cmd = sub.add_parser(
        "html", help="write a run as one self-contained HTML page (graph, timeline, state "
        "diffs, events); no network needed to view it")
    cmd.add_argument("source", metavar="SOURCE",
                     help="a store, a SQLite file or a PostgreSQL DSN (then give RUN_ID), or "
                     "a history file")
    cmd.add_argument("run_id", metavar="RUN_ID", nargs="?", default=None,
                     help="the run, for a store file")
    cmd.add_argument("-o", "--output", required=True, metavar="OUT",
                     help="the HTML file to write, a new file in an existing folder")
    cmd.add_argument("--graph", default=None, metavar="MODULE:GRAPH",
                     help="the graph, to draw every node and edge (default: a history "
                     "file's recorded graph, if it imports)")
    cmd.add_argument("--force", action="store_true", help="replace OUT if it exists")
    from ._source import add_schema_option

    add_schema_option(cmd)
    cmd.set_defaults(command=lambda args: html_command(args, helpers))


def html_command(args: argparse.Namespace, helpers: dict[str, Callable[..., Any]]) -> str:
    """Run ``graphflow html``."""
    from .._html._page import render_run_html
    from ._export import _exists, _out_problem, _write

    fail: type[Exception] = helpers["fail"]  # type: ignore[assignment]
    load_graph = helpers["load_graph"]
    problem = _out_problem(getattr(args.source, "raw", args.source), args.output,
                           force=args.force)
    if problem is not None:
        raise fail(problem)
    graph = load_graph(args.graph) if args.graph is not None else None
    note = ""
    if args.run_id is None:
        if getattr(args.source, "postgres", False):
            raise fail(f"{args.source!r} is a PostgreSQL store; pass the RUN_ID of the run "
                       "to draw (list them with `graphflow runs "
                       f"{args.source.as_argument}`)")
        run = _from_history(args.source, fail)
        if graph is None and run["graph_ref"]:
            try:
                graph = load_graph(run["graph_ref"])
            except fail:
                note = (f" (the recorded graph {run['graph_ref']} does not import here: the "
                        "drawing shows the path taken; pass --graph MODULE:GRAPH)")
    else:
        run = _from_store(args.source, args.run_id, helpers)
    if graph is None and not note:
        note = " (without the graph: pass --graph MODULE:GRAPH to draw every node)"
    page = render_run_html(run["events"], graph=graph, checkpoints=run["checkpoints"],
                           initial_state=run["initial_state"], answers=run["answers"])
    try:
        _write(Path(args.output), page, replace=args.force)
    except FileExistsError:
        raise fail(_exists(args.output)) from None
    except OSError as exc:
        raise fail(f"cannot write {args.output!r}: {exc.strerror or exc}") from None
    return (f"wrote {args.output}: run {run['run_id']} ({len(run['events'])} events, "
            f"{len(page.encode()) // 1024 + 1} KiB){note}")


def _from_history(source: str, fail: Any) -> dict[str, Any]:
    from .._replay._history import load_history
    from ..errors import GraphflowError

    try:
        history = load_history(source)
    except GraphflowError as exc:
        raise fail(f"{exc} (graphflow html reads a history file, or a store file with a "
                   "RUN_ID)") from None
    answers: dict[str, Any] = {}
    for resume in history.resumes:
        answers.update(resume)
    return {"run_id": history.run_id, "events": history.events,
            "checkpoints": history.checkpoints, "initial_state": history.initial_state,
            "answers": answers, "graph_ref": history.graph_ref}


def _from_store(source: str, run_id: str, helpers: dict[str, Callable[..., Any]]
                ) -> dict[str, Any]:
    fail, with_store, all_events = helpers["fail"], helpers["with_store"], helpers["all_events"]

    async def read(store: Any) -> dict[str, Any] | None:
        events, _ = await all_events(store, run_id)
        checkpoints = await store.list(run_id)
        if not events and not checkpoints and await store.run(run_id) is None:
            return None
        return {"run_id": run_id, "events": events,
                "checkpoints": [c.model_dump(mode="json") for c in checkpoints],
                "initial_state": None, "answers": None, "graph_ref": None}

    found = with_store(source, read)
    if found is None:
        raise fail(f"no run {run_id!r} in {source}; list the runs with `graphflow runs "
                   f"{getattr(source, 'as_argument', source)}`")
    return dict(found)
