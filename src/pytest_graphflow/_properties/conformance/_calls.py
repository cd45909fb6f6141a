"""The store as the conformance machine calls it: every protocol call is recorded (so a
failure shows the calls that led to it) and bounded (a call that does not return within
``CALL_TIMEOUT`` seconds of the loop's virtual time is reported, never waited for).

The machine's event loop runs on a :class:`~pytest_graphflow.VirtualClock` of its own: an
idle loop jumps to its next timer, so a store method that awaits something that never comes
fails its call's deadline at once, in virtual time, and a buggy store costs no more real time
than a correct one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

from ..._records._checkpoint import Checkpoint

__all__ = ["CALL_TIMEOUT", "PROTOCOL", "CallLog", "RecordedStore", "ThreadLoop"]

T = TypeVar("T")

CALL_TIMEOUT = 60.0
"""Virtual seconds one store call may take before the machine reports it as hanging."""

PROTOCOL = ("save", "get", "load", "latest", "list", "delete", "fork")
"""The store methods the machine calls (the ``CheckpointStore`` protocol)."""

_SHOWN = 16  # the last calls a failure report lists


def _arg(value: Any) -> str:
    if isinstance(value, Checkpoint):
        return (f"<{value.id} run={value.run_id} thread={value.thread_id} "
                f"t={value.timestamp.isoformat()}>")
    return repr(value)


class CallLog:
    """The store calls of one example, in order, as short text (``save(<cp-9999 ...>)``)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def note(self, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        """Record a call; return its text."""
        shown = [_arg(a) for a in args]
        shown += [f"{k}={_arg(v)}" for k, v in kwargs.items() if v is not None]
        text = f"{method}({', '.join(shown)})"
        self.calls.append(text)
        return text

    def report(self) -> str:
        """The calls so far, numbered (the last ``_SHOWN`` of them)."""
        skipped = max(0, len(self.calls) - _SHOWN)
        lines = [f"  {n}. {call}" for n, call in enumerate(self.calls[skipped:], skipped + 1)]
        head = f"store calls ({len(self.calls)}" + (f", the last {_SHOWN}" if skipped else "")
        return head + "):\n" + "\n".join(lines)


class RecordedStore:
    """A store's protocol methods, recorded in ``log`` and bounded by ``timeout``; a call
    that overruns raises ``AssertionError`` naming it (``hang`` builds the message)."""

    def __init__(self, store: Any, log: CallLog, hang: Callable[[str], BaseException],
                 timeout: float = CALL_TIMEOUT) -> None:
        self._store = store
        self._log = log
        self._hang = hang
        self._timeout = timeout

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._store, name)
        if name not in PROTOCOL:
            return method
        return self._bounded(name, method)

    def _bounded(self, name: str, method: Callable[..., Awaitable[Any]]) -> Any:
        async def call(*args: Any, **kwargs: Any) -> Any:
            text = self._log.note(name, args, kwargs)
            with anyio.move_on_after(self._timeout) as scope:
                return await method(*args, **kwargs)
            if scope.cancelled_caught:
                raise self._hang(text)
            return None  # pragma: no cover - move_on_after returns only when cancelled

        return call


class ThreadLoop:
    """An asyncio loop driven from the calling thread, one ``call`` at a time: what a
    blocking portal does, without a thread hop per call (the machine's asyncio default)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def call(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        """Run ``fn(*args)`` on the loop to its end and return its result."""
        return self._loop.run_until_complete(fn(*args))

    def close(self) -> None:
        """Cancel what the store left running, then close the loop."""
        loop = self._loop
        try:
            left = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in left:
                task.cancel()
            if left:
                loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()
