"""The ``graphflow`` command: inspect a store and draw graphs (SPEC §5).

::

    graphflow runs STORE [--json]                # the runs a store recorded
    graphflow events STORE RUN_ID [--json]       # a run's event log, one event a line
    graphflow checkpoints STORE RUN_ID [--json]  # a run's checkpoints, oldest first
    graphflow waiting STORE [--json]             # runs paused at an interrupt (for a human)
    graphflow show STORE CHECKPOINT_ID           # one checkpoint as JSON
    graphflow mermaid MODULE:GRAPH [--run STORE RUN_ID]  # a Mermaid diagram of a graph
    graphflow artifacts STORE RUN_ID             # the artifacts a run attached
    graphflow delete-thread STORE THREAD_ID [--yes] [--tenant T]
                                                 # delete a thread (asks first; _delete)
    graphflow export STORE RUN_ID OUT [--force] [--seed N] [--clock-start ISO] [--graph M:G]
                                                 # a run as a history file
    graphflow html STORE RUN_ID -o OUT [--graph M:G] [--force]
    graphflow html HISTORY_FILE -o OUT [--graph M:G] [--force]
                                                 # a run as one HTML page (_html)
    graphflow worker DSN MODULE:GRAPH ...        # take queued runs from PostgreSQL (_worker)
    graphflow --version

``STORE`` is a SQLite store file or a PostgreSQL DSN (``postgresql://USER@HOST/DB`` or
``host=HOST dbname=DB``) with ``--schema SCHEMA`` (default ``graphflow``); a DSN's password is
never printed (:mod:`._source`). ``python -m pytest_graphflow`` runs the same command.
``MODULE:GRAPH`` names a ``Graph``, a ``CompiledGraph``, or a function of no arguments that
returns one (a factory such as ``myapp:build``). ``--color=yes|no|auto`` (anywhere on the
line) colours errors, event lines and run statuses (:mod:`._colour`).

Stores are opened read-only: no command but ``delete-thread`` changes one (a PostgreSQL schema
that holds no store is refused, never created).
Everything printed is escaped (:mod:`._output`): control characters in ids or messages never
reach the terminal. A problem (missing file, a file that is not a store, unknown run or
checkpoint, bad ``MODULE:GRAPH``) prints one line to stderr naming the object and the fix,
and exits with status 2.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from .._records._json import to_json_value
from ..errors import EventsCompacted, GraphflowError
from ._artifacts import add_parser as add_artifacts
from ._colour import Colour, add_colour_option
from ._delete import add_parser as add_delete_thread
from ._dsn import scrub
from ._output import clean, table, to_json
from ._source import Source, add_schema_option, add_store_argument, open_source

__all__ = ["main"]

T = TypeVar("T")

_COMMON = frozenset({"seq", "run_id", "step", "time", "node", "task_id", "type"})


class _Fail(Exception):
    """A user-facing problem: printed as one line, exit status 2."""


def main(argv: list[str] | None = None) -> int:
    """Run the ``graphflow`` command.

    Args:
        argv: the arguments (without the program name); ``sys.argv[1:]`` when ``None``.

    Returns:
        The exit status: 0 on success, 2 on a usage error or a problem with the input.
    """
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help, --version and on usage errors
        return exc.code if isinstance(exc.code, int) else 2
    dsns = _sources(args)
    args.colour = Colour(args.color, sys.stdout)
    try:
        text: str = args.command(args)
    except _Fail as exc:
        message = clean(str(exc))
        for dsn in dsns:  # a driver's message may quote the DSN: never print its password
            message = scrub(message, dsn)
        err = Colour(args.color, sys.stderr)
        print(f"{err('graphflow: error:', red=True, bold=True)} {message}", file=sys.stderr)
        return 2
    if text:
        try:
            print(text)
            sys.stdout.flush()
        except BrokenPipeError:  # `graphflow ... | head`: the reader left, that is fine
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
    return 0


def _sources(args: argparse.Namespace) -> list[str]:
    """Turn the stores ``args`` names into :class:`Source` values (their text hides a DSN's
    password); return the DSNs given, to hide from every error."""
    schema = getattr(args, "schema", None)
    dsns: list[str] = []
    for name in ("file", "source"):
        value = getattr(args, name, None)
        if isinstance(value, str):
            source = Source(value, schema)
            setattr(args, name, source)
            dsns += [source.raw] if source.postgres else []
    run = getattr(args, "run", None)
    if isinstance(run, list) and run:
        run[0] = Source(run[0], schema)
        dsns += [run[0].raw] if run[0].postgres else []
    if isinstance(getattr(args, "dsn", None), str):
        dsns.append(args.dsn)
    return dsns


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="graphflow",
        description="Inspect pytest-graphflow stores (SQLite files or PostgreSQL databases), "
                    "draw graphs, write a run as a history file or an HTML page, run workers.",
    )
    parser.add_argument("--version", action="version",
                        version=f"graphflow (pytest-graphflow) {_version()}")
    add_colour_option(parser, argparse.SUPPRESS)
    parser.set_defaults(color="auto")
    sub = parser.add_subparsers(dest="name", metavar="COMMAND", required=True)

    runs = sub.add_parser("runs", help="list the runs a store file recorded")
    add_store_argument(runs)
    runs.add_argument("--json", action="store_true", help="print JSON for scripts")
    runs.set_defaults(command=_runs)

    events = sub.add_parser("events", help="print a run's events, one a line")
    add_store_argument(events)
    events.add_argument("run_id", metavar="RUN_ID")
    events.add_argument("--json", action="store_true", help="print JSON for scripts")
    events.set_defaults(command=_events)

    checkpoints = sub.add_parser("checkpoints", help="list a run's checkpoints, oldest first")
    add_store_argument(checkpoints)
    checkpoints.add_argument("run_id", metavar="RUN_ID")
    checkpoints.add_argument("--json", action="store_true",
                             help="one JSON object a line (id, step, status, node, time, "
                                  "pending interrupt keys)")
    checkpoints.set_defaults(command=_checkpoints)

    waiting = sub.add_parser("waiting", help="list the runs paused at an interrupt, waiting "
                                             "for an answer")
    add_store_argument(waiting)
    waiting.add_argument("--json", action="store_true",
                         help="one JSON object a line, with each interrupt's payload")
    waiting.set_defaults(command=_waiting)

    show = sub.add_parser("show", help="print a checkpoint as JSON")
    add_store_argument(show)
    show.add_argument("checkpoint_id", metavar="CHECKPOINT_ID")
    show.set_defaults(command=_show)

    mermaid = sub.add_parser("mermaid", help="print a graph as a Mermaid flowchart")
    mermaid.add_argument("target", metavar="MODULE:GRAPH",
                         help="an importable module and the Graph or CompiledGraph in it, "
                              "or a function of no arguments returning one")
    mermaid.add_argument("--run", nargs=2, metavar=("STORE", "RUN_ID"),
                         help="draw the edges this run took in bold (STORE: a SQLite file or "
                              "a PostgreSQL DSN)")
    add_schema_option(mermaid)
    mermaid.set_defaults(command=_mermaid)
    add_artifacts(sub, sys.modules[__name__])
    add_delete_thread(sub, sys.modules[__name__])

    from ._export import add_export

    add_export(sub, {"fail": _Fail, "load_graph": _load_graph, "with_store": _with_store})

    from ._html import add_html

    add_html(sub, {"fail": _Fail, "load_graph": _load_graph, "with_store": _with_store,
                   "all_events": _all_events})

    from ._worker import add_worker_parser

    add_worker_parser(sub, _load_graph, _Fail)
    for command in sub.choices.values():  # `graphflow events ... --color=no` works too
        add_colour_option(command, argparse.SUPPRESS)
    return parser


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pytest-graphflow")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree, not installed
        return "unknown"


# -- the store --------------------------------------------------------------------------------


def _with_store(source: str, action: Callable[[Any], Awaitable[T]], *,
                write: bool = False) -> T:
    """Open the store ``source`` (a :class:`Source`: a SQLite file or a PostgreSQL DSN)
    read-only unless ``write``, run ``action``; the store is never changed otherwise."""
    found = source if isinstance(source, Source) else Source(source)
    return open_source(found, action, _Fail, write=write)


async def _run_exists(store: Any, run_id: str) -> bool:
    return await store.run(run_id) is not None or await store.latest(run_id) is not None


async def _all_events(store: Any, run_id: str) -> tuple[list[dict[str, Any]], int]:
    """The run's events, from the earliest kept one; and how many seqs were compacted."""
    try:
        return await store.events(run_id), 0
    except EventsCompacted as exc:
        earliest: int = getattr(exc, "earliest_seq", 0)
        return await store.events(run_id, after_seq=earliest - 1), earliest


# -- commands ---------------------------------------------------------------------------------


def _runs(args: argparse.Namespace) -> str:
    async def read(store: Any) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = await store.runs()
        known = {r.get("run_id") for r in records}
        for run_id in store.checkpointed_runs():  # runs with checkpoints but no record
            if run_id not in known:
                known.add(run_id)
                records.append({"run_id": run_id})
        for record in records:
            latest = await store.latest(record["run_id"])
            if latest is not None:
                record.setdefault("thread_id", latest.thread_id)
                record.setdefault("graph_id", latest.graph_id)
                record.setdefault("status", latest.status)
                record.setdefault("updated_at", to_json_value(latest.timestamp))
        return records

    records = _with_store(args.file, read)
    if args.json:
        return to_json(records)
    if not records:
        return f"no runs recorded in {clean(args.file)}"
    header = ("RUN ID", "THREAD", "GRAPH", "STATUS", "UPDATED")
    text = table(header, [[r.get(k) for k in ("run_id", "thread_id", "graph_id", "status",
                                              "updated_at")] for r in records])
    head, *rows = text.splitlines()
    return "\n".join([args.colour(head, bold=True), *(
        args.colour(row, **_STATUS_MARKUP.get(str(r.get("status")), {}))
        for row, r in zip(rows, records, strict=True))])


def _events(args: argparse.Namespace) -> str:
    async def read(store: Any) -> tuple[list[dict[str, Any]], int] | None:
        events, compacted = await _all_events(store, args.run_id)
        if not events and not await _run_exists(store, args.run_id):
            return None
        return events, compacted

    found = _with_store(args.file, read)
    if found is None:
        raise _Fail(f"no run {args.run_id!r} in {args.file}; list the runs with "
                    f"`graphflow runs {args.file.as_argument}`")
    events, compacted = found
    if args.json:
        return to_json({"run_id": args.run_id, "earliest_seq": compacted, "events": events})
    lines = [f"(events before seq {compacted} were compacted away)"] if compacted else []
    width = max([12, *(len(_cell(e.get("node"))) + 1 for e in events)])
    own = _own_times(events)
    lines.extend(args.colour(clean(_event_line(e, width, own.get(i))), **_markup(e))
                 for i, e in enumerate(events))
    if not events:
        lines.append(f"no events recorded for run {clean(args.run_id)}")
    return "\n".join(lines)


def _checkpoint_row(cp: Any) -> dict[str, Any]:
    return {"checkpoint_id": cp.id, "step": cp.step, "status": cp.status,
            "node": cp.node_id, "time": to_json_value(cp.timestamp),
            "pending": [i.key for i in cp.interrupts]}


def _checkpoints(args: argparse.Namespace) -> str:
    async def read(store: Any) -> list[dict[str, Any]] | None:
        found = await store.list(args.run_id)
        if not found and not await _run_exists(store, args.run_id):
            return None
        return [_checkpoint_row(cp) for cp in found]

    rows = _with_store(args.file, read)
    if rows is None:
        raise _Fail(f"no run {args.run_id!r} in {args.file}; list the runs with "
                    f"`graphflow runs {args.file.as_argument}`")
    if args.json:
        return to_json(rows)
    if not rows:
        return f"no checkpoints saved for run {clean(args.run_id)}"
    header = ("CHECKPOINT", "STEP", "STATUS", "NODE", "TIME", "PENDING")
    return table(header, [(r["checkpoint_id"], str(r["step"]), _cell(r["status"]),
                            _cell(r["node"]), _cell(r["time"]),
                            ", ".join(r["pending"]) or "-") for r in rows])


def _waiting(args: argparse.Namespace) -> str:
    async def read(store: Any) -> list[dict[str, Any]]:
        return [{"run_id": w.run_id, "thread_id": w.thread_id, "graph_id": w.graph_id,
                 "since": to_json_value(w.since), "checkpoint_id": w.checkpoint_id,
                 "deadline": to_json_value(w.deadline),
                 "interrupts": [{"key": i.key, "node": i.node, "id": i.id,
                                 "payload": i.payload, "deadline": to_json_value(i.deadline)}
                                for i in w.interrupts]}
                for w in await store.waiting(any_tenant=True)]

    rows = _with_store(args.file, read)
    if args.json:
        return to_json(rows)
    if not rows:
        return f"no run in {clean(args.file)} is waiting at an interrupt"
    header = ("RUN ID", "THREAD", "GRAPH", "SINCE", "DEADLINE", "WAITING AT", "PAYLOAD")
    return table(header, [
        (r["run_id"], r["thread_id"], r["graph_id"], r["since"], _cell(r["deadline"]),
         ", ".join(f"{i['node']}:{i['id']}" for i in r["interrupts"]),
         "; ".join(_short(i["payload"], 40) for i in r["interrupts"]))
        for r in rows])


def _show(args: argparse.Namespace) -> str:
    async def read(store: Any) -> dict[str, Any] | None:
        cp = await store.get(args.checkpoint_id)
        return None if cp is None else dict(cp.model_dump(mode="json"))

    found = _with_store(args.file, read)
    if found is None:
        raise _Fail(f"no checkpoint {args.checkpoint_id!r} in {args.file}; find checkpoint ids "
                    f"with `graphflow events {args.file.as_argument} RUN_ID` (checkpoint_saved)")
    return to_json(found)


def _mermaid(args: argparse.Namespace) -> str:
    graph = _load_graph(args.target)
    path: list[tuple[str, str]] | None = None
    if args.run is not None:
        file, run_id = args.run

        async def read(store: Any) -> list[tuple[str, str]] | None:
            events, _ = await _all_events(store, run_id)
            if not events and not await _run_exists(store, run_id):
                return None
            return [(e["source"], e["target"]) for e in events
                    if e.get("type") == "edge_transition"]

        path = _with_store(file, read)
        if path is None:
            raise _Fail(f"no run {run_id!r} in {file}; list the runs with "
                        f"`graphflow runs {file.as_argument}`")
    return "\n".join(clean(line) for line in str(graph.mermaid(path=path)).splitlines())


def _load_graph(target: str) -> Any:
    """The compiled graph named by ``MODULE:GRAPH`` (a ``Graph`` is compiled)."""
    from .._graph._builder import CompiledGraph, Graph

    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise _Fail(f"{target!r} is not MODULE:GRAPH; name the module and the graph in it, "
                    "e.g. `graphflow mermaid myapp.graphs:checkout`")
    added = os.getcwd() not in sys.path
    if added:  # like `python -m`, find modules in the current directory
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise _Fail(f"cannot import module {module_name!r} ({type(exc).__name__}: {exc}); run "
                    "from the directory that contains it or add it to PYTHONPATH") from None
    finally:
        if added:
            sys.path.remove(os.getcwd())
    obj: Any = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise _Fail(f"module {module_name!r} has no attribute {attr!r}; name a Graph or "
                        "CompiledGraph defined in it") from None
    if callable(obj) and not isinstance(obj, Graph | CompiledGraph | type):
        try:  # a factory: `graphflow mermaid myapp:build`
            obj = obj()
        except TypeError as exc:
            raise _Fail(f"{target} is a function but calling it with no arguments failed "
                        f"({exc}); name a factory of no arguments or the graph itself") from None
        except Exception as exc:
            raise _Fail(f"{target}() raised {type(exc).__name__}: {exc}") from None
    if isinstance(obj, Graph):
        try:
            obj = obj.compile()
        except GraphflowError as exc:
            first = str(exc).splitlines()[0]
            raise _Fail(f"{target}: {first} (see Graph.compile() for the list)") from None
    if not isinstance(obj, CompiledGraph):
        raise _Fail(f"{target} is a {type(obj).__name__}, not a Graph or CompiledGraph; name "
                    "the graph object")
    return obj


# -- formatting -------------------------------------------------------------------------------


_table = table
"""The escaped table of :mod:`._output` (the artifacts command prints through it)."""


_STATUS_MARKUP: dict[str, dict[str, bool]] = {
    "completed": {"green": True}, "failed": {"red": True}, "cancelled": {"red": True},
    "interrupted": {"yellow": True}, "timed_out": {"red": True}}
"""A run's status as ``graphflow`` colours it."""


def _markup(event: dict[str, Any]) -> dict[str, bool]:
    """How an event's line is coloured: errors red, interrupts yellow, a run's end by its
    status, the rest plain."""
    kind = event.get("type")
    if kind == "error":
        return {"red": True}
    if kind == "interrupt":
        return {"yellow": True}
    if kind == "run_end":
        return {**_STATUS_MARKUP.get(str(event.get("status")), {}), "bold": True}
    return {}


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def _short(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _own_times(events: list[dict[str, Any]]) -> dict[int, Any]:
    """The times ``events`` shows instead of when an event was yielded (its ``time``), by the
    event's index: a task's own start on its ``node_start`` and its own end on its
    ``node_end``, as its ``node_end`` recorded them (``started_at``, ``finished_at``).

    A batch yields its events when its last task ends, so every ``node_start`` of a batch
    has that time. A retry's ``node_start``, a replayed task's, and those of a task that
    ended otherwise (an interrupt, an error) have no recorded time of their own: they keep
    theirs.
    """
    own: dict[int, Any] = {}
    starts: dict[Any, int] = {}
    for index, event in enumerate(events):
        kind, task = event.get("type"), event.get("task_id")
        if kind == "node_start" and event.get("attempt", 1) == 1:
            starts[task] = index
        elif kind == "node_end" and not event.get("replayed"):
            own[index] = event.get("finished_at")
            if task in starts:  # started_at: when the first attempt began
                own[starts.pop(task)] = event.get("started_at")
    return own


def _time(event: dict[str, Any], raw: Any = None) -> str:
    """The event's time (or ``raw``) as ``HH:MM:SS.fff`` (its date is the run's, in
    ``graphflow runs``)."""
    raw = event.get("time") if raw is None else raw
    if not isinstance(raw, str) or "T" not in raw:
        return "-"
    clock = raw.split("T", 1)[1].rstrip("Z")
    for sign in ("+", "-"):
        clock = clock.split(sign, 1)[0]
    hms, _, frac = clock.partition(".")
    return f"{hms}.{(frac + '000')[:3]}"


def _event_line(event: dict[str, Any], width: int = 12, own_time: Any = None) -> str:
    """``seq  time  step N  type  node  key fields`` for one wire-form event; ``width``: the
    node column's (the longest node name of the log, so columns stay aligned); ``own_time``:
    the time to show instead of the event's (see :func:`_own_times`)."""
    kind = str(event.get("type", "?"))
    head = (f"{event.get('seq', '?'):>5}  {_time(event, own_time)}  "
            f"step {event.get('step', '?')!s:<3} "
            f"{kind:<18}{_cell(event.get('node')):<{width}}")
    fields: list[str] = []
    if kind == "edge_transition":
        fields.append(f"{event.get('source')} -> {event.get('target')}")
    elif kind == "error":
        fields.append(f"{event.get('error_type')}: {_short(event.get('message'), 80)}")
    elif kind == "interrupt":
        keys = [i.get("key") for i in event.get("interrupts", []) if isinstance(i, dict)]
        fields.append(f"keys={_short(keys)}")
    skip = _COMMON | {"source", "target", "error_type", "message", "interrupts", "state",
                      "started_at", "finished_at"}
    for key, value in event.items():
        if key in skip or value is None or value is False:
            continue
        if key == "attempt" and value == 1:
            continue
        fields.append(key if value is True else f"{key}={_short(value)}")
    if event.get("task_id"):
        fields.append(f"task={event['task_id']}")
    return f"{head} {' '.join(fields)}".rstrip()
