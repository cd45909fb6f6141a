"""Deadlines on human input: ``interrupt(..., deadline=)``, ``TimeoutAnswer`` and the
graph's ``compile(on_timeout=...)`` route for a question nobody answered in time.

A deadline is stored with the pending ``Interrupt`` (``Interrupt.deadline``, an instant on
the runtime's clock), so it is durable wherever the checkpoint is. ``GraphRuntime.expire_due``
(and a ``Worker``) fires every due one: the run resumes, an ``interrupt_expired`` event says
which question expired, and the asking task takes the graph's timeout route.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from .._records._json import NotJSONError, to_json_value
from ..errors import InvalidArgument

__all__ = ["EXPIRED", "TimeoutAnswer", "TimeoutSignal", "check_on_timeout", "deadline_at",
           "is_expired_marker"]

EXPIRED: dict[str, Any] = {"$graphflow": "deadline_expired"}
"""What an expired question's answer is recorded as (``checkpoint.answers``) when the graph
routes it to a node or fails it: its ``interrupt()`` call then ends the task that way."""


def is_expired_marker(value: Any) -> bool:
    """Whether ``value`` is the recorded answer of an expired question (:data:`EXPIRED`)."""
    return type(value) is dict and value == EXPIRED


class TimeoutAnswer:
    """``compile(on_timeout=TimeoutAnswer(value))``: an expired question is answered with
    ``value`` (JSON-normalised), as if a human had answered it, and the run goes on.

    Raises:
        TypeError: ``value`` has no JSON form.
    """

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        try:
            self.value = to_json_value(value)
        except NotJSONError as exc:
            raise TypeError(f"TimeoutAnswer({value!r}): the answer has no JSON form: "
                            f"{exc}") from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TimeoutAnswer) and other.value == self.value

    def __hash__(self) -> int:
        return hash(repr(self.value))

    def __repr__(self) -> str:
        return f"TimeoutAnswer({self.value!r})"


class TimeoutSignal(BaseException):
    """Raised by ``interrupt()`` for an expired question the graph routes to a node (or has
    no route for): the task ends that way. Not an ``Exception``, like the pause signal."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def deadline_at(now: datetime, deadline: Any, node: str, id: str) -> datetime:
    """The instant a question asked at ``now`` with ``deadline`` (seconds or a
    ``timedelta``) expires.

    Raises:
        ValueError: ``deadline`` is not a positive finite number of seconds or timedelta.
    """
    if isinstance(deadline, timedelta):
        delta = deadline
    elif isinstance(deadline, (int, float)) and not isinstance(deadline, bool) \
            and math.isfinite(deadline):
        delta = timedelta(seconds=deadline)
    else:
        raise ValueError(f"interrupt(id={id!r}) in node {node!r}: deadline={deadline!r} is "
                         "not a duration; pass seconds (a positive number) or a timedelta")
    if delta <= timedelta(0):
        raise ValueError(f"interrupt(id={id!r}) in node {node!r}: deadline={deadline!r} is "
                         "not positive; pass how long the question may wait")
    return now + delta


def check_on_timeout(on_timeout: Any) -> str | TimeoutAnswer | None:
    """``compile(on_timeout=...)``'s value, checked: a node name, a ``TimeoutAnswer``, or
    ``None``.

    Raises:
        InvalidArgument: anything else.
    """
    if on_timeout is None or isinstance(on_timeout, (str, TimeoutAnswer)):
        return on_timeout
    raise InvalidArgument(f"compile(on_timeout={on_timeout!r}): pass the name of the node an "
                          "expired question goes to, or TimeoutAnswer(value) to answer it")
