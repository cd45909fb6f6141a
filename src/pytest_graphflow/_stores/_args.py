"""The argument checks every store makes before it reads or writes anything: one rule per
argument, so the in-memory, SQLite and PostgreSQL stores refuse the same bad input with the
same :class:`~pytest_graphflow.errors.InvalidArgument` (naming the call, the argument and the
fix) and change nothing.

Ids (run, thread, checkpoint, node, tenant, artifact names) follow
:func:`~.._records._checks.check_id`; the claim, event-log and retention arguments the rules
of :mod:`._claims`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .._records._checkpoint import Checkpoint
from .._records._checks import check_id, check_optional_id
from .._records._json import MAX_DEPTH, nests_deeper
from ..errors import InvalidArgument
from . import _claims as rules

__all__ = [
    "MAX_CHECKPOINT_DEPTH", "CheckedCheckpoints", "check_commit", "check_events", "check_fork",
    "check_limit", "check_list", "check_nesting", "check_run_record",
]

MAX_CHECKPOINT_DEPTH = MAX_DEPTH + 5
"""The deepest nesting of lists and dicts in a checkpoint's JSON: its values nest at most
:data:`~.._records._json.MAX_DEPTH` levels, the deepest of them five levels down (an expansion
item of a completed task: ``completed`` / the task / ``expand`` / ``items`` / the item)."""


class CheckedCheckpoints:
    """``_checked``: a checkpoint argument, checked (a mixin of every store)."""

    _checked_run: tuple[Any, ...] = ()

    def _checked(self, checkpoint: object, where: str) -> Checkpoint:
        """``checkpoint`` if it is a :class:`Checkpoint` whose ids are ids.

        A run's checkpoints share their run, thread, graph and tenant ids: those are checked
        once per run (the last run seen is remembered).

        Raises:
            InvalidArgument: not a Checkpoint, or a bad id.
        """
        if not isinstance(checkpoint, Checkpoint):
            raise InvalidArgument(f"{where}(checkpoint={checkpoint!r:.80}): pass a Checkpoint")
        check_id(checkpoint.id, "checkpoint.id", where)
        check_optional_id(checkpoint.node_id, "checkpoint.node_id", where)
        run = (checkpoint.run_id, checkpoint.thread_id, checkpoint.graph_id,
               checkpoint.tenant_id)
        if run != self._checked_run:
            for field in ("run_id", "thread_id", "graph_id"):
                check_id(getattr(checkpoint, field), f"checkpoint.{field}", where)
            check_optional_id(checkpoint.tenant_id, "checkpoint.tenant_id", where)
            self._checked_run = run
        return checkpoint


def check_limit(limit: object, where: str = "list") -> int | None:
    """A page size: ``None`` or an int >= 1.

    Raises:
        InvalidArgument: for anything else.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                              or limit < 1):
        raise InvalidArgument(f"{where}(limit={limit!r}): limit must be an int >= 1 or None")
    return limit


def check_list(run_id: object, thread_id: object, limit: object, before: object) -> None:
    """The arguments of ``list(run_id, thread_id=..., limit=..., before=...)``.

    Raises:
        InvalidArgument: a bad id or limit.
    """
    check_optional_id(run_id, "run_id", "list")
    check_optional_id(thread_id, "thread_id", "list")
    check_limit(limit)
    check_optional_id(before, "before", "list")


def check_fork(checkpoint_id: object, patch_state: object, thread_id: object) -> None:
    """The arguments of ``fork(checkpoint_id, patch_state, thread_id=...)`` (the patch's keys
    and values are checked against the source checkpoint by
    :func:`~._claims.checked_patch`).

    Raises:
        InvalidArgument: a bad id, or a patch that is not a dict.
    """
    check_id(checkpoint_id, "checkpoint_id", "fork")
    check_optional_id(thread_id, "thread_id", "fork")
    if patch_state is not None and not isinstance(patch_state, Mapping):
        raise InvalidArgument(f"fork(patch_state={patch_state!r:.80}): pass a dict of "
                              "state keys to values, or None")


def check_events(run_id: object, events: object) -> None:
    """The arguments of ``record_events(run_id, events)`` (each event is checked as it is
    serialised: :func:`~._wire.event_row`).

    Raises:
        InvalidArgument: a bad run id, or ``events`` is not a list.
    """
    check_id(run_id, "run_id", "record_events")
    if not isinstance(events, (list, tuple)):
        raise InvalidArgument(f"record_events(events={events!r:.80}): pass a list of "
                              "events in wire form")


def check_commit(
    thread_id: object, run_id: object, checkpoints: object, events: object, run: object,
    *, normalise: bool = True,
) -> tuple[list[Any], list[tuple[int, Any]], dict[str, Any] | None]:
    """:func:`~._claims.check_commit` with the thread and run ids checked as every id is.

    Raises:
        InvalidArgument: a bad id, or a part that does not fit; nothing is written.
    """
    check_id(thread_id, "thread_id", "commit")
    check_id(run_id, "run_id", "commit")
    return rules.check_commit(thread_id, run_id, checkpoints, events, run, normalise=normalise)


def check_run_record(record: object) -> dict[str, Any]:
    """A run record's JSON form (:func:`~._claims.normalise_run_record`) with its ``run_id``
    checked as every id is.

    Raises:
        InvalidArgument: not a dict with a good ``run_id``, or not JSON.
    """
    data = rules.normalise_run_record(record)
    check_id(data["run_id"], "record['run_id']", "record_run")
    return data


def check_nesting(cp: Checkpoint, text: str, where: str) -> None:
    """Refuse a checkpoint (``text``: its JSON) that nests deeper than
    :data:`MAX_CHECKPOINT_DEPTH` levels, before any store writes it: a value nesting more than
    :data:`~.._records._json.MAX_DEPTH` levels, which the runtime refuses where it enters a
    run, and which the SQLite and PostgreSQL stores could write but not read back.

    The runtime's own checkpoints need no check (their values were checked where they
    entered); stores call this for checkpoints given to ``save`` and to a ``commit`` that
    is not the runtime's. Only JSON with that many brackets in all is parsed and walked.

    Raises:
        InvalidArgument: naming the checkpoint and the limit.
    """
    if text.count("[") + text.count("{") <= MAX_CHECKPOINT_DEPTH:
        return
    if nests_deeper(json.loads(text), MAX_CHECKPOINT_DEPTH):
        raise InvalidArgument(
            f"{where}({cp.id!r}): the checkpoint nests deeper than {MAX_CHECKPOINT_DEPTH} "
            f"levels of lists and dicts; a checkpoint's values nest at most {MAX_DEPTH} "
            "levels (as the runtime requires of every state value)")
