"""``graphflow artifacts STORE RUN_ID``: the artifacts a run (or its nodes) attached (seed 002).

Kept apart from :mod:`._main` so that other commands can be added there without touching it.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_parser"]


def add_parser(sub: Any, tools: Any) -> None:
    """Add the ``artifacts`` command to the ``graphflow`` subcommands ``sub``.

    ``tools`` is the CLI module (its ``_Fail``, ``_with_store``, ``_run_exists`` and
    ``_table``), passed in so that this module does not import it back.
    """
    cmd = sub.add_parser("artifacts", help="list the artifacts a run attached")
    from ._source import add_store_argument

    add_store_argument(cmd)
    cmd.add_argument("run_id", metavar="RUN_ID")
    cmd.set_defaults(command=lambda args: _artifacts(args, tools))


def _artifacts(args: argparse.Namespace, tools: Any) -> str:
    _Fail, _run_exists, _table, _with_store = (
        tools._Fail, tools._run_exists, tools._table, tools._with_store)

    async def read(store: Any) -> list[dict[str, Any]] | None:
        found: list[dict[str, Any]] = await store.artifacts(args.run_id)
        if not found and not await _run_exists(store, args.run_id):
            return None
        return found

    found = _with_store(args.file, read)
    if found is None:
        raise _Fail(f"no run {args.run_id!r} in {args.file}; list the runs with "
                    f"`graphflow runs {args.file.as_argument}`")
    if not found:
        return f"no artifacts attached to run {args.run_id}"
    rows = [(str(a["name"]), str(a["media_type"]), str(a["size"])) for a in found]
    return str(_table(("NAME", "MEDIA TYPE", "SIZE"), rows))
