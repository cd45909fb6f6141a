"""``graphflow delete-thread STORE THREAD_ID``: delete a thread from a store (seed 004).

The one ``graphflow`` command that changes a store (a SQLite file or a PostgreSQL schema).
It reads the store first (it must be a store, and hold the thread), then asks for
confirmation on a terminal: a ``y`` (or ``yes``) read from stdin deletes; anything else, or a
stdin that is not a terminal (a pipe, a closed stdin, a CI job), refuses unless ``--yes`` was
given. A refusal deletes nothing and exits with status 2 and one line saying why and how to go on.

A claim is live or not by the real clock (the production runtime's): a thread a run holds
right now is refused (``ThreadBusy``), one whose holder died is deleted once its claim
expired.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .._records._checks import check_id
from ..errors import InvalidArgument

if TYPE_CHECKING:
    from .._stores._deletion import DeletedThread

__all__ = ["add_parser"]


def add_parser(sub: Any, tools: Any) -> None:
    """Add the ``delete-thread`` command to the ``graphflow`` subcommands ``sub``.

    ``tools`` is the CLI module (its ``_Fail`` and ``_with_store``), passed in so that this
    module does not import it back.
    """
    cmd = sub.add_parser(
        "delete-thread", help="delete a thread: its checkpoints, events, run records and "
                              "artifacts (asks first)")
    from ._source import add_store_argument

    add_store_argument(cmd)
    cmd.add_argument("thread_id", metavar="THREAD_ID")
    cmd.add_argument("--yes", action="store_true",
                     help="delete without asking (needed when stdin is not a terminal)")
    cmd.add_argument("--tenant", default=None, metavar="TENANT",
                     help="the tenant the thread belongs to (default: none)")
    cmd.set_defaults(command=lambda args: _delete_thread(args, tools))


def _describe(runs: int, checkpoints: int) -> str:
    return (f"{runs} run{'s' if runs != 1 else ''}, {checkpoints} "
            f"checkpoint{'s' if checkpoints != 1 else ''}")


def _delete_thread(args: argparse.Namespace, tools: Any) -> str:
    _Fail, _with_store = tools._Fail, tools._with_store
    thread, file = args.thread_id, args.file
    try:
        check_id(thread, "THREAD_ID", "graphflow delete-thread")
    except InvalidArgument as exc:
        raise _Fail(f"{exc}; pass a thread id as `graphflow runs {file.as_argument}` lists "
                    "them") from None

    async def read(store: Any) -> tuple[int, int]:
        found = await store.list(thread_id=thread)
        return len({cp.run_id for cp in found}), len(found)

    runs, checkpoints = _with_store(file, read)  # a store that holds the thread, or a _Fail
    if not checkpoints:
        raise _Fail(f"no thread {thread!r} in {file}; list the runs and their threads with "
                    f"`graphflow runs {file.as_argument}`. Nothing was deleted")
    if not args.yes:
        _confirm(f"delete thread {thread!r} ({_describe(runs, checkpoints)}) from {file}? "
                 "This cannot be undone. [y/N] ", thread, file, _Fail)

    async def delete(store: Any) -> DeletedThread:
        deleted: DeletedThread = await store.delete_thread(thread, tenant_id=args.tenant,
                                                           now=datetime.now(UTC))
        return deleted

    try:
        deleted = _with_store(file, delete, write=True)
    except _Fail as exc:  # busy, another tenant, a locked file
        raise _Fail(f"{exc} Nothing was deleted") from None
    return (f"deleted thread {thread!r}: {_describe(len(deleted.run_ids), deleted.checkpoints)}"
            f", {deleted.events} events, {deleted.runs} run records, {deleted.artifacts} "
            "artifacts")


def _confirm(question: str, thread: str, file: str, fail: type[Exception]) -> None:
    """Ask ``question`` on a terminal; raise ``fail`` unless the answer is yes."""
    stdin = sys.stdin
    if stdin is None or stdin.closed or not stdin.isatty():
        raise fail(f"not deleting thread {thread!r} of {file}: stdin is not a terminal to "
                   "confirm on; pass --yes to delete it. Nothing was deleted")
    print(question, end="", file=sys.stderr, flush=True)
    answer = stdin.readline()
    if answer.strip().lower() not in ("y", "yes"):
        raise fail(f"not deleting thread {thread!r} of {file}: not confirmed (answer y to "
                   "delete, or pass --yes). Nothing was deleted")
