"""``record_effect``: a probe node code (or a fake it calls) uses to count its own effects.

The crash-recovery checker sees nodes declared ``external`` and task completions; an effect
in a node left ``pure``, or repeated by a ``Retry`` attempt, is invisible to it. A fake
service calls ``record_effect("refund", key=...)`` where the effect *happens* (after its own
idempotency check, if it has one); while a checker runs the graph, each call is written to
the checker's ledger, which it compares across runs. Outside a checker it does nothing.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from ._node import CURRENT_TASK

__all__ = ["EFFECT_LEDGER", "Effect", "record_effect"]


@dataclass(frozen=True)
class Effect:
    """One recorded effect: its name and key, and the task that caused it."""

    name: str
    key: str
    node: str | None
    task_id: str | None
    attempt: int | None
    tool: str | None = None
    """The recorded (``write``/``external``/``human``) tool it happened in, if any: such a
    call is replayed, not repeated, when its task runs again, so a ``pure`` node may make
    it."""

    @property
    def identity(self) -> tuple[str, str]:
        """What must happen exactly once: ``(name, key)``."""
        return self.name, self.key


EFFECT_LEDGER: ContextVar[list[Effect] | None] = ContextVar("graphflow_effects", default=None)
"""Set by a checker around the runs it makes: where ``record_effect`` writes."""


def record_effect(name: str, key: Any = None) -> None:
    """Record that an effect happened (a refund issued, an email sent) for the checkers.

    Call it where the effect really happens, e.g. in a fake service after its idempotency
    check. ``check_crash_recovery`` then reports an effect recorded by a node declared
    ``pure`` or ``read`` (naming both), requires every effect of the fault-free run to happen
    exactly once in it (a ``Retry`` attempt repeating it is reported), and exactly once after
    every crash and recovery, telling a repeat inside the at-least-once window from a real
    duplicate (the key is what makes two calls the same effect; by default, the calling
    task). Outside a checker's runs, it does nothing.

    Args:
        name: the kind of effect (``"refund"``).
        key: what identifies this effect (an order id, an idempotency key); default: the
            calling task's id.
    """
    ledger = EFFECT_LEDGER.get()
    if ledger is None:
        return
    ctx = CURRENT_TASK.get()
    node = ctx.node if ctx is not None else None
    task = ctx.task_id if ctx is not None else None
    attempt = ctx.attempt if ctx is not None else None
    ident = str(key) if key is not None else (task or "<outside a node>")
    running = None if ctx is None or ctx._tool is None else ctx._tool.running
    tool = running[0].name if running is not None and running[0].recorded else None
    ledger.append(Effect(str(name), ident, node, task, attempt, tool))
