"""Test existing LangGraph apps deterministically (the ``langgraph`` extra).

Install with ``pip install "pytest-graphflow[langgraph]"``. Everything here runs the user's
own LangGraph graph with LangGraph itself; see docs/langgraph.md.

- :class:`LangGraphHarness`: run/resume a compiled graph or a ``StateGraph`` builder under a
  virtual clock and a seed, returning our ``Trace`` (events, result, saver call log);
  subgraphs' events in their namespaces, ``state(subgraphs=True)`` as ``get_state``.
- :class:`FaultySaver`: ``FaultyStore``'s fault rules over any LangGraph checkpoint saver.
- :func:`check_invariants`: the event invariants a LangGraph trace keeps (:data:`HOLDING`).
- Properties: :func:`check_determinism`, :func:`explore`, :func:`check_crash_recovery`,
  :func:`check_interrupt_resume_equivalence`, :func:`check_clock_start` (the same run
  with the clock starting at other hours takes the same path), :func:`check_reducer_laws` /
  :func:`assert_reducer_laws` (``Annotated`` reducers, ``add_messages`` included).
"""

from __future__ import annotations

try:
    import langgraph.graph  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    from .errors import MissingExtra

    raise MissingExtra(
        "pytest_graphflow.langgraph needs LangGraph: pip install 'pytest-graphflow[langgraph]'"
        f" ({exc})"
    ) from exc

from ._exports import show_public as _show_public
from ._langgraph._clockstart import check_clock_start
from ._langgraph._harness import LangGraphHarness
from ._langgraph._invariants import HOLDING, check_invariants
from ._langgraph._laws import assert_reducer_laws, check_reducer_laws, messages
from ._langgraph._props import (
    check_crash_recovery,
    check_determinism,
    check_interrupt_resume_equivalence,
    drive,
    explore,
)
from ._langgraph._saver import FaultySaver, SaverOp

__all__ = [
    "HOLDING",
    "FaultySaver",
    "LangGraphHarness",
    "SaverOp",
    "assert_reducer_laws",
    "check_clock_start",
    "check_crash_recovery",
    "check_determinism",
    "check_interrupt_resume_equivalence",
    "check_invariants",
    "check_reducer_laws",
    "drive",
    "explore",
    "messages",
]

# reprs and pickles name this module, not the private one that defines each name
_show_public(__name__, globals(), __all__)
