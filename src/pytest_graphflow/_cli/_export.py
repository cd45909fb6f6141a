"""``graphflow export STORE RUN_ID OUT``: a run of a store written as a history file.

``OUT`` must be a new file in an existing folder: the command never writes onto the store
(or its journal), even with ``--force``, replaces an existing file only with ``--force``,
and creates no folder. A replaced file is written beside ``OUT`` first and moved into place,
so a failed write leaves it as it was.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["add_export", "export_command"]

_JOURNALS = ("-wal", "-shm", "-journal")
"""SQLite's files beside a database (its write-ahead log, its index, its rollback journal)."""


def add_export(sub: Any, helpers: dict[str, Callable[..., Any]]) -> None:
    """Register the ``export`` subcommand; ``helpers`` are the CLI's ``fail`` (an exception
    class), ``with_store`` and ``load_graph``."""
    export = sub.add_parser(
        "export", help="write a run as a history file (replay it with assert_replays or "
        "--graphflow-replay; check it with check_upgrade)")
    from ._source import add_store_argument

    add_store_argument(export)
    export.add_argument("run_id", metavar="RUN_ID")
    export.add_argument("out", metavar="OUT", help="the history file to write, a new file in "
                        "an existing folder (name it *.history.json for --graphflow-replay)")
    export.add_argument("--force", action="store_true",
                        help="replace OUT if it exists (never the store itself)")
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
    problem = _out_problem(getattr(args.file, "raw", args.file), args.out, force=args.force)
    if problem is not None:
        raise fail(problem)
    graph = load_graph(args.graph) if args.graph is not None else None

    async def read(store: Any) -> Any:
        return await export_history(store, args.run_id, seed=args.seed, clock_start=start,
                                    graph=graph, graph_ref=args.graph)

    history = with_store(args.file, read)
    history = history.model_copy(update={"source": f"{args.file} (graphflow export)"})
    try:
        _write(Path(args.out), history.dumps(), replace=args.force)
    except FileExistsError:
        raise fail(_exists(args.out)) from None
    except OSError as exc:
        raise fail(f"cannot write {args.out!r}: {exc.strerror or exc}") from None
    legs = sum(1 for e in history.events if e.get("type") == "run_start")
    return (f"wrote {args.out}: run {history.run_id} of graph {history.graph_id!r} "
            f"({len(history.events)} events in {legs} leg(s), {len(history.checkpoints)} "
            f"checkpoints, status {history.status})")


def _exists(out: str) -> str:
    return f"{out!r} already exists; pass another path, or --force to replace it"


def _out_problem(file: str, out: str, *, force: bool) -> str | None:
    """Why the history may not be written to ``out`` (``None`` if it may): it is the store
    ``file`` (by any name) or one of its journals, a directory, an existing file without
    ``force``, or in a folder that does not exist."""
    target, store = Path(out), Path(file)
    if _same_file(target, store):
        return (f"{out!r} is the store file {file!r}; the history would overwrite the store. "
                "Pass another path for the history file")
    for suffix in _JOURNALS:
        journal = store.with_name(store.name + suffix)
        if target.resolve() == journal.resolve() or _same_file(target, journal):
            return (f"{out!r} is the journal of the store file {file!r} (SQLite reads it "
                    "with the store); pass another path for the history file")
    if target.is_dir():
        return f"{out!r} is a directory; pass the path of a file to write, inside it or elsewhere"
    if target.exists() or target.is_symlink():
        return None if force else _exists(out)
    parent = target.parent
    if not parent.is_dir():
        return (f"{out!r} is in a folder that does not exist ({str(parent)!r}); create the "
                "folder first, or pass a path in an existing one")
    return None


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and a.samefile(b)
    except OSError:
        return False


def _write(target: Path, text: str, *, replace: bool) -> None:
    """Write ``text`` to ``target``. A new file is created exclusively (``FileExistsError``
    if one appeared meanwhile) and removed if the write fails; with ``replace``, the text
    goes to a temporary file beside ``target``, which then takes its place (and its
    permissions), so a failed write leaves the old file as it was."""
    if not replace or not target.exists():
        try:
            with open(target, "x", encoding="utf-8") as f:
                f.write(text)
        except FileExistsError:
            raise
        except BaseException:
            target.unlink(missing_ok=True)
            raise
        return
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        shutil.copymode(target, temp)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
