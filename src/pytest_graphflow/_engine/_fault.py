"""Seed 004's unexpected throwable: an exception a run's :class:`Clock` raised (``now`` or
``monotonic``), outside node code, refuses the run at admission or ends it where it was, as
:class:`~pytest_graphflow.errors.UnexpectedError`.

Node code's exceptions are the node's (``NodeFailed``), a store's are its own (never wrapped,
C6) and an edge function's are the run's (C7): only an exception that came out of one of the
clock's own methods is unexpected, told by the frames it passed through.
"""

from __future__ import annotations

from types import CodeType
from typing import Any

from ..errors import UnexpectedError

__all__ = ["clock_fault", "unexpected"]

_METHODS = ("now", "monotonic")


def _codes(clock: Any) -> set[CodeType]:
    codes: set[CodeType] = set()
    for cls in type(clock).__mro__:
        for name in _METHODS:
            code = getattr(cls.__dict__.get(name), "__code__", None)
            if isinstance(code, CodeType):
                codes.add(code)
    return codes


def clock_fault(exc: BaseException, clock: Any) -> bool:
    """Whether ``exc`` (an ``Exception``, not the library's own error) was raised inside
    ``clock.now()`` or ``clock.monotonic()``."""
    if not isinstance(exc, Exception) or isinstance(exc, UnexpectedError):
        return False
    codes = _codes(clock)
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code in codes:
            return True
        tb = tb.tb_next
    return False


def unexpected(exc: BaseException, clock: Any, run_id: str | None, thread_id: str | None, *,
               admitted: bool) -> UnexpectedError | None:
    """The :class:`UnexpectedError` ``exc`` becomes, when it is a clock's; else ``None``."""
    if not clock_fault(exc, clock):
        return None
    error = UnexpectedError(run_id, thread_id, exc, admitted=admitted)
    error.__cause__ = exc
    return error
