"""A run that can never end, as a finding of the whole-run tools.

On the runtime's own virtual loop a batch whose tasks all wait on something virtual time
cannot bring about (an event nobody sets, two nodes of one batch waiting for each other)
fails at once with :class:`~pytest_graphflow.VirtualDeadlock`. Every whole-run tool reports
that as a finding (rule ``"deadlock"``) naming the waiting nodes, and stops there: every
further run of the same graph would wait the same way.
"""

from __future__ import annotations

import json
from typing import Any

from ...errors import VirtualDeadlock
from ..checks._legs import Violation

__all__ = ["deadlock_in", "deadlock_in_lines", "deadlock_violation"]


def deadlock_in(error: Any) -> VirtualDeadlock | None:
    """The :class:`VirtualDeadlock` behind ``error`` (itself or a cause), if any."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, VirtualDeadlock):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def deadlock_violation(result: Any, where: str) -> Violation | None:
    """A ``"deadlock"`` violation when ``result`` (a ``GraphResult``, or ``None``) failed with
    :class:`VirtualDeadlock`; ``where`` says which run it was."""
    found = deadlock_in(getattr(result, "error", None))
    if found is None:
        return None
    return Violation("deadlock", None, f"{where}: the run can never end: {found}",
                     example=found)


def deadlock_in_lines(lines: list[str], where: str) -> Violation | None:
    """The same finding from a run's events as JSON lines (a worker process's run)."""
    for i, line in enumerate(lines):
        if '"VirtualDeadlock"' not in line:
            continue
        event = json.loads(line)
        if event.get("type") == "error" and event.get("error_type") == "VirtualDeadlock":
            return Violation("deadlock", i, f"{where}: the run can never end: "
                             f"{event.get('message')}", example=event.get("message"))
    return None
