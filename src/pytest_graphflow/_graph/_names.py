"""The two virtual node names every graph has."""

from __future__ import annotations

__all__ = ["END", "START"]

START = "__start__"
"""The virtual entry node: ``g.edge(START, "first")``."""

END = "__end__"
"""The virtual exit node: ``g.edge("last", END)``."""
