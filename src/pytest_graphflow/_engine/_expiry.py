"""Expired questions on resume: a late answer is refused (``DeadlineExpired``), and the
resume ``GraphRuntime.expire_due`` makes takes the graph's timeout route (see
:mod:`pytest_graphflow._graph._deadlines`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .._graph._builder import CompiledGraph
from .._graph._deadlines import EXPIRED, TimeoutAnswer
from .._graph._node import Resume
from .._records._checkpoint import Checkpoint
from .._records._events import Interrupt
from ..errors import DeadlineExpired, NotSuspended

__all__ = ["ExpiryResume", "check_deadlines", "due_interrupts", "expiry_answers"]


class ExpiryResume(Resume):
    """The resume ``expire_due`` makes: the questions ``keys`` expired (internal)."""

    __slots__ = ("keys",)

    def __init__(self, keys: list[str]) -> None:
        super().__init__(answers=dict.fromkeys(keys), partial=True)
        self.keys = list(keys)


def due_interrupts(interrupts: list[Interrupt], now: datetime) -> list[Interrupt]:
    """The pending questions whose deadline passed by ``now``."""
    return [i for i in interrupts if i.deadline is not None and i.deadline <= now]


def check_deadlines(cp: Checkpoint, resume: Resume | None, now: datetime) -> None:
    """Refuse a resume that answers a question whose deadline passed (nothing changes).

    Raises:
        DeadlineExpired: an answered question expired by ``now``.
    """
    if resume is None or isinstance(resume, ExpiryResume) or cp.status != "interrupted" \
            or not resume.has_answers:
        return
    late = due_interrupts(cp.interrupts, now)
    if not late:
        return
    answered = resume.resolve(cp.interrupts)
    for i in late:
        if i.key in answered:
            raise DeadlineExpired(cp.run_id, i.key, i.deadline, now)


def expiry_answers(
    cp: Checkpoint, resume: ExpiryResume, graph: CompiledGraph, now: datetime
) -> tuple[dict[str, Any], list[tuple[Interrupt, str, str | None, Any]]]:
    """The answers an expiry resume records for its due questions, and for each what the
    ``interrupt_expired`` event says (the question, the action, the node it is routed to,
    the answer).

    Raises:
        NotSuspended: none of ``resume.keys`` is pending and due any more (answered, or
            fired by another worker meanwhile).
    """
    due = [i for i in due_interrupts(cp.interrupts, now) if i.key in resume.keys]
    if cp.status != "interrupted" or not due:
        raise NotSuspended(f"run {cp.run_id} has no due question among {resume.keys} any "
                           "more: it was answered or expired meanwhile")
    route = graph.on_timeout
    answers: dict[str, Any] = {}
    fired: list[tuple[Interrupt, str, str | None, Any]] = []
    for i in due:
        if isinstance(route, TimeoutAnswer):
            answers[i.key] = route.value
            fired.append((i, "answered", None, route.value))
        else:
            answers[i.key] = dict(EXPIRED)
            fired.append((i, "failed" if route is None else "routed", route, None))
    return answers, fired
