"""Two runs a whole-run checker found different, handed to whoever watches (the plugin's
``--graphflow-report=html:DIR`` page puts them side by side).

A checker that compares one run with another (``explore``, ``check_determinism``, the
interrupt/resume equivalence, crash recovery) calls :func:`report_pair` when they differ.
Nothing is built unless someone watches (:func:`watching`), so a checker pays nothing
otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..._graph._builder import CompiledGraph

__all__ = ["RunPair", "report_pair", "watched", "watching", "wire"]


@dataclass(frozen=True)
class RunPair:
    """Two runs that should have been the same.

    Attributes:
        tool: the checker (``"explore"``, ``"check_determinism"``, ...).
        verdict: what it reported.
        labels: what each run is (``"seed 0 (baseline)"``, ``"seed 7"``).
        left, right: their events (wire form).
        first: the index of the first differing event, when the checker knows it.
        graph: the graph they ran, if known.
    """

    tool: str
    verdict: str
    labels: tuple[str, str]
    left: list[dict[str, Any]]
    right: list[dict[str, Any]]
    first: int | None = None
    graph: CompiledGraph | None = None


_WATCHERS: list[Callable[[RunPair], None]] = []


def watched() -> bool:
    """Whether anyone watches for pairs (a checker builds one only then)."""
    return bool(_WATCHERS)


@contextmanager
def watching(callback: Callable[[RunPair], None]) -> Iterator[None]:
    """Call ``callback`` with every pair reported while the block runs."""
    _WATCHERS.append(callback)
    try:
        yield
    finally:
        _WATCHERS.remove(callback)


def wire(events: Iterable[Any]) -> list[dict[str, Any]]:
    """Events (models, wire dicts or JSON lines) as wire-form dicts."""
    out: list[dict[str, Any]] = []
    for e in events:
        if isinstance(e, str):
            out.append(json.loads(e))
        elif isinstance(e, dict):
            out.append(dict(e))
        else:
            out.append(e.model_dump(mode="json"))
    return out


def report_pair(tool: str, verdict: str, labels: tuple[str, str], left: Iterable[Any],
                right: Iterable[Any], *, first: int | None = None,
                graph: CompiledGraph | None = None,
                make_graph: Callable[[], CompiledGraph] | None = None) -> None:
    """Hand two differing runs (events as models, dicts or JSON lines) to every watcher;
    ``make_graph`` builds the graph (only when someone watches)."""
    if not _WATCHERS:
        return
    if graph is None and make_graph is not None:
        try:
            graph = make_graph()
        except Exception:  # a factory that fails now: the page draws the path taken
            graph = None
    pair = RunPair(tool, verdict, labels, wire(left), wire(right), first, graph)
    for callback in list(_WATCHERS):
        callback(pair)
