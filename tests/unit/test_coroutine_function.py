"""``is_coroutine_function`` is ``inspect.iscoroutinefunction``, read from a plain function's
code object (issue 29: a compile asked ``inspect`` twice a node, a batch once a route), and
``is_async_hook`` answers as it did through ``inspect`` for every shape of callable."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import pytest

from pytest_graphflow._graph._middleware import is_async_hook, is_coroutine_function


async def _coro(state: Any) -> None:
    return None


def _plain(state: Any) -> None:
    return None


def _gen(state: Any) -> Any:
    yield state


async def _agen(state: Any) -> Any:
    yield state


class _AsyncCall:
    async def __call__(self, state: Any) -> None:
        return None


class _SyncCall:
    def __call__(self, state: Any) -> None:
        return None


class _Methods:
    async def coro(self, state: Any) -> None:
        return None

    def plain(self, state: Any) -> None:
        return None


def _with_async_call_attr() -> Callable[..., Any]:
    def f(state: Any) -> None:
        return None

    f.__call__ = _coro  # type: ignore[attr-defined]  # an instance attribute: getattr finds it
    return f


def _marked() -> Callable[..., Any]:
    def f(state: Any) -> None:
        return None

    mark = getattr(inspect, "markcoroutinefunction", None)  # Python 3.12+
    return mark(f) if mark is not None else f


_SHAPES: dict[str, Callable[..., Any]] = {
    "async-def": _coro,
    "def": _plain,
    "lambda": lambda s: None,
    "generator": _gen,
    "async-generator": _agen,
    "partial-of-async": functools.partial(_coro),
    "partial-of-def": functools.partial(_plain),
    "bound-async-method": _Methods().coro,
    "bound-method": _Methods().plain,
    "async-__call__": _AsyncCall(),
    "sync-__call__": _SyncCall(),
    "wrapped-async": functools.wraps(_coro)(lambda s: None),
    "function-with-async-__call__": _with_async_call_attr(),
    "marked-coroutine-function": _marked(),
    "builtin": len,
}


def _hook_by_inspect(fn: Any) -> bool:
    """``is_async_hook`` as it was: ``inspect`` on ``fn``, then on its ``__call__``."""
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004
    return call is not None and inspect.iscoroutinefunction(call)


@pytest.mark.parametrize("name", list(_SHAPES))
def test_answers_as_inspect_does(name: str) -> None:
    fn = _SHAPES[name]
    assert is_coroutine_function(fn) is inspect.iscoroutinefunction(fn)
    assert is_async_hook(fn) is _hook_by_inspect(fn)


def test_a_plain_function_is_not_unwrapped_by_inspect(monkeypatch: pytest.MonkeyPatch) -> None:
    # The point of the fast path: a plain function (a generated graph's nodes and routes)
    # never reaches inspect.
    def refuse(fn: Any) -> bool:
        raise AssertionError(f"inspect asked about {fn!r}")

    monkeypatch.setattr(inspect, "iscoroutinefunction", refuse)
    assert is_async_hook(_coro) is True
    assert is_async_hook(_plain) is False
    assert is_coroutine_function(_plain) is False
