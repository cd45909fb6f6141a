"""Awaiting a coroutine shielded from cancellation, at no cost when it never suspends.

Releasing a thread's claim must not be cut short by a cancellation, so it runs under
``anyio.CancelScope(shield=True)``. On the in-memory store the release never suspends, and a
coroutine that never suspends cannot be cancelled (cancellation is delivered at suspension
points): :func:`shielded` runs it directly and opens the scope only if it does suspend,
continuing it inside the scope from where it stopped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Coroutine, Generator
from typing import Any, TypeVar

import anyio

__all__ = ["shielded"]

T = TypeVar("T")


class _Rest:
    """The rest of a coroutine that suspended once already (``yield from`` by hand)."""

    __slots__ = ("_coro", "_first")

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
        self._coro = coro
        self._first = first

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, value = self._coro, self._first
        while True:
            try:
                sent = yield value
            except BaseException as exc:  # thrown in by the event loop: pass it on
                try:
                    value = coro.throw(exc)
                except StopIteration as done:
                    return done.value
            else:
                try:
                    value = coro.send(sent)
                except StopIteration as done:
                    return done.value


async def shielded(aw: Awaitable[T]) -> T:
    """``await aw`` shielded from cancellation (see the module docstring)."""
    if not isinstance(aw, Coroutine):  # another awaitable: the plain way
        with anyio.CancelScope(shield=True):
            plain: T = await aw
        return plain
    try:
        first = aw.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    with anyio.CancelScope(shield=True):
        rest: T = await _Rest(aw, first)
    return rest
