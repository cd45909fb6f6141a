"""The checker for expired questions (``interrupt_expired``, rule ``"deadline"``).

An ``interrupt_expired`` event opens its leg (right after ``run_start``, before any task of
the leg starts), names a question that was pending when its run paused (the last
``interrupt`` events before the leg, where the list has them), fires no earlier than its
deadline (``time >= deadline``), and, routed to a node, is followed in its leg by an
``edge_transition`` from the asking node to that node.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..._records._events import (
    EdgeTransition,
    EventBase,
    InterruptEvent,
    InterruptExpired,
    RunStart,
)
from ._legs import Violation, split_legs

__all__ = ["check_deadlines"]


def check_deadlines(events: Sequence[EventBase]) -> list[Violation]:
    """Rule ``"deadline"``: each ``interrupt_expired`` event is where, when and what it
    should be (see the module's docstring)."""
    out: list[Violation] = []
    pending: set[str] | None = None  # the questions of the last pause; unknown until one
    for leg in split_legs(events):
        opening = True
        asked: set[str] = set()
        for i, e in leg.indexed():
            if type(e) is RunStart:
                continue
            if type(e) is not InterruptExpired:
                opening = False
                if type(e) is InterruptEvent:
                    asked.update(q.key for q in e.interrupts)
                continue
            if not opening:
                out.append(Violation("deadline", i, f"interrupt_expired of {e.key} comes after "
                                     "the leg's tasks began; it must follow run_start"))
            if e.time < e.deadline:
                out.append(Violation("deadline", i, f"question {e.key} expired at "
                                     f"{e.time.isoformat()}, before its deadline "
                                     f"{e.deadline.isoformat()}"))
            if pending is not None and e.key not in pending:
                out.append(Violation("deadline", i, f"interrupt_expired names {e.key}, which "
                                     "no interrupt event of the run asked"))
            if e.routed_to is not None and not any(
                    type(x) is EdgeTransition and x.task_id == e.task_id
                    and x.target == e.routed_to for _, x in leg.indexed()):
                out.append(Violation("deadline", i, f"question {e.key} was routed to "
                                     f"{e.routed_to!r}, but no edge_transition of task "
                                     f"{e.task_id} goes there"))
        if asked:
            pending = asked  # the questions this leg paused at
    return out
