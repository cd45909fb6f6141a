"""Hiding library frames from a failing test's traceback.

A failure raised inside the runtime (an injected ``StoreFault``, a ``VirtualDeadlock``, a
node's own error re-raised by ``invoke``) would show some twenty frames of pytest-graphflow,
anyio and asyncio between the test's line and the node's. Those are not the user's code: the
test's line, the node's frames and the message are what explain the failure. Frames whose
module is pytest-graphflow or an event loop library are dropped, as pytest does with
``__tracebackhide__``; ``--full-trace`` shows everything.
"""

from __future__ import annotations

from typing import Any

__all__ = ["hide_library_frames"]

_LIBRARIES = ("pytest_graphflow.", "anyio.", "anyio", "asyncio.", "asyncio", "trio.", "trio",
              "sniffio", "outcome", "contextlib", "concurrent.futures")
_KEEP = ("pytest_graphflow.assertions", "pytest_graphflow.invariants")


def _hidden(entry: Any) -> bool:
    name = entry.frame.f_globals.get("__name__", "")
    if not isinstance(name, str) or name.startswith(_KEEP):
        return False
    return any(name == lib.rstrip(".") or name.startswith(lib.rstrip(".") + ".")
               for lib in _LIBRARIES)


def hide_library_frames(item: Any) -> None:
    """Make ``item``'s failure report drop library frames from its traceback.

    pytest cuts a test's traceback at the test function's frame and rebuilds it from there,
    so frames cannot be dropped from the exception beforehand: the item's traceback filter
    is wrapped instead (and nothing happens on a pytest without one). If every frame would
    go, the traceback is left whole.
    """
    original = getattr(item, "_traceback_filter", None)
    if original is None or getattr(original, "__graphflow__", False):
        return

    def traceback_filter(excinfo: Any) -> Any:
        tb = original(excinfo)
        try:
            kept = tb.filter(lambda entry: not _hidden(entry))
        except Exception:  # a report must never hide the failure itself
            return tb
        return kept if len(kept) else tb

    traceback_filter.__graphflow__ = True  # type: ignore[attr-defined]
    item._traceback_filter = traceback_filter
