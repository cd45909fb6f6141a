"""Driving whole runs for the checkers: the graph of each independent run, interrupt answers,
a deterministic runtime, :func:`drive` (run to the end, answering interrupts) and how two runs'
outcomes and event logs are compared.

Each checker runs the graph several ways on fresh deterministic runtimes (a
:class:`VirtualClock`, a seed, an in-memory store) and returns :class:`Violation` values; an
empty list means the property held. They are synchronous: each run executes on an event loop
owned by its virtual clock, as ``GraphRuntime.invoke`` does, so timers are virtual and a batch
that can never wake fails with ``VirtualDeadlock`` instead of hanging. Call them from sync
tests, Hypothesis tests included.

``graph`` is a compiled graph, a ``GraphSpec``, or a factory ``() -> CompiledGraph`` called
for each independent run (fakes built into the graph are then fresh per run). ``ignore=`` and
``normalize=`` leave values that legitimately differ out of the comparison (see
:mod:`._compare`); differences are reported as the differing paths only.

Interrupt answers are a mapping keyed as ``Resume(answers=...)`` takes them (the interrupt's
key, ``"<node>:<id>"`` — what ``strategies.resume_answers(spec)`` draws —, the interrupt id or
the node's name), or a function of the :class:`~pytest_graphflow.Interrupt`; an interrupt
without an answer is answered ``None``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, SerializeAsAny, TypeAdapter

from ..._engine._results import GraphResult
from ..._engine._runtime import GraphRuntime
from ..._engine._stream import RunStream, collect
from ..._graph._builder import CompiledGraph
from ..._graph._node import Resume, answer_keys
from ..._records._events import EventBase, Interrupt, NodeEnd, RunStart
from ..._time._clock import VirtualClock
from ..._time._loops import run_sync_owned
from ...errors import InvalidArgument
from ..strategies._genspec import GraphSpec
from ..strategies._instrument import CallLog
from ._compare import Compare, diff_paths

__all__ = [
    "Answers",
    "Drive",
    "GraphLike",
    "Input",
    "answer_for",
    "as_graph",
    "drive",
    "graph_maker",
]

Answers = Mapping[str, Any] | Callable[[Interrupt], Any] | None
GraphLike = CompiledGraph | GraphSpec | Callable[[], CompiledGraph]
Input = Mapping[str, Any] | BaseModel | None


def graph_maker(graph: GraphLike, where: str) -> Callable[[], CompiledGraph]:
    """A function giving the graph for one independent run: a compiled graph itself, a
    :class:`GraphSpec` compiled once, or the user's factory called anew each time."""
    if isinstance(graph, CompiledGraph):
        return lambda: graph
    if isinstance(graph, GraphSpec):
        compiled = _compiled(graph)
        return lambda: compiled
    if callable(graph):
        def make() -> CompiledGraph:
            built = graph()
            if not isinstance(built, CompiledGraph):
                raise InvalidArgument(f"{where}(graph={graph!r}): the factory returned "
                                      f"{built!r}; it must return a CompiledGraph (call "
                                      ".compile())")
            return built

        return make
    raise InvalidArgument(f"{where}(graph={graph!r}): pass a CompiledGraph, a GraphSpec or a "
                          "factory () -> CompiledGraph")


@functools.lru_cache(maxsize=64)
def _compiled(spec: GraphSpec) -> CompiledGraph:
    """``spec.compile()``, shared by equal specs: Hypothesis draws one graph again with other
    inputs or answers (a third to a half of the examples of a run), and a generated graph's
    node functions keep no state, so the checks of equal specs may share one graph."""
    return spec.compile()


def as_graph(graph: GraphLike) -> CompiledGraph:
    """A compiled graph from a :class:`GraphSpec`, a compiled graph or a factory."""
    return graph_maker(graph, "as_graph")()


def answer_for(answers: Answers, interrupt: Interrupt) -> Any:
    """The answer ``answers`` gives ``interrupt`` (``None`` when it has none).

    Mapping keys are matched most specific first: the interrupt's key, ``"<node>:<id>"``, the
    interrupt id, the node's name (as ``Resume(answers=...)`` matches them).
    """
    if answers is None:
        return None
    if callable(answers):
        return answers(interrupt)
    for k in answer_keys(interrupt):
        if k in answers:
            return answers[k]
    return None


def _runtime(store: Any, seed: int, clock: VirtualClock | None = None,
             backend: str = "asyncio", wall: bool = True) -> GraphRuntime:
    """A deterministic runtime. ``wall``: node code reading ``datetime.now()`` sees virtual
    time (a user's graph may; generated graphs never do, and skip the cost)."""
    return GraphRuntime(store=store, clock=clock or VirtualClock(patch_wall_clock=wall),
                        seed=seed, backend=backend)


def _wall(graph: GraphLike) -> bool:
    return not isinstance(graph, GraphSpec)


def _outcome(result: GraphResult[Any], cmp: Compare | None = None) -> tuple[str, str]:
    data = result.data if cmp is None else cmp.state(result.data)
    return result.status, json.dumps(data, sort_keys=True)


def _outcome_diff(want: GraphResult[Any], got: GraphResult[Any], cmp: Compare) -> str:
    """How ``got`` ended unlike ``want``: status, then the differing state paths only."""
    parts = []
    if got.status != want.status:
        parts.append(f"status {want.status} → {got.status}")
    paths = diff_paths(cmp.state(want.data), cmp.state(got.data))
    if paths:
        parts.append("state differs at:\n    " + "\n    ".join(paths))
    return "; ".join(parts)


def _pause_seconds(pause: float | timedelta, where: str, name: str = "pause") -> float:
    """The virtual seconds a pause lasts, given as seconds or a ``timedelta``."""
    seconds = pause.total_seconds() if isinstance(pause, timedelta) else pause
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0 \
            or seconds != seconds:
        raise InvalidArgument(f"{where}({name}={pause!r}): give the virtual time a pause lasts "
                              "as seconds (>= 0) or a timedelta, e.g. timedelta(hours=12)")
    return float(seconds)


def _path(events: Iterable[EventBase]) -> str:
    """The nodes a run completed, in order (``a → b``)."""
    return " → ".join(e.node or "?" for e in events if isinstance(e, NodeEnd)) or "(none)"


@dataclass
class Drive:
    """What :func:`drive` did: every leg's events, the last result, the runtimes used."""

    events: list[EventBase] = field(default_factory=list)
    result: GraphResult[Any] | None = None
    legs: int = 0
    runtimes: list[GraphRuntime] = field(default_factory=list)
    run_id: str | None = None


async def drive(
    runtime: GraphRuntime,
    graph: CompiledGraph,
    input: Input,
    answers: Answers,
    *,
    hook: bool = False,
    fresh: Callable[[GraphRuntime], GraphRuntime] | None = None,
    resume_run: str | None = None,
    first_resume: Resume | None = None,
    calls: CallLog | None = None,
    max_legs: int = 50,
    out: Drive | None = None,
    pause: float = 0.0,
) -> Drive:
    """Run ``graph`` to its end, answering interrupts.

    With ``hook``, an ``on_interrupt`` hook answers at once; otherwise the run pauses and is
    resumed by run id with ``Resume(answers=...)``, by ``fresh(previous_runtime)`` when given
    (a new process over the same store, handed ``graph=``), else by the same runtime. With
    ``resume_run`` the first leg resumes that run (with ``first_resume``) instead of starting
    one. Events of every leg are appended to ``out.events`` as they are consumed, so a crash
    leaves in ``out`` what was seen. ``pause``: seconds of virtual time that pass while the
    run waits for its answers, before each resume.
    """
    d = out if out is not None else Drive()
    opts: dict[str, Any] = {}
    if hook:
        opts["on_interrupt"] = lambda i: answer_for(answers, i)
    rt = runtime
    d.runtimes.append(rt)
    run_id, resume = resume_run, first_resume
    if run_id is not None:
        d.run_id = run_id
    while True:
        if calls is not None:
            calls.leg += 1
        d.legs += 1
        if run_id is None:
            stream = rt.stream(graph, input, **opts)
        else:
            stream = rt.resume_stream(run_id, resume, graph=graph, **opts)
        await _consume(stream, d)
        result = stream.result()
        d.result = result
        d.run_id = run_id = result.run_id
        if result.status != "interrupted" or hook or d.legs >= max_legs:
            return d
        resume = Resume(answers={k: answer_for(answers, i) for k, i in result.interrupts.items()})
        if pause and isinstance(rt.clock, VirtualClock):
            rt.clock.advance(pause)
        if fresh is not None:
            rt = fresh(rt)
            d.runtimes.append(rt)


async def _consume(stream: RunStream, d: Drive) -> None:
    """``async for event in stream: d.events.append(event)`` (and ``d.run_id`` from its
    ``run_start``), a piece at a time (:func:`~..._engine._stream.collect`). A crash leaves
    the pieces seen before it."""
    try:
        await collect(stream, d.events)
    finally:
        if d.run_id is None:
            d.run_id = next((e.run_id for e in d.events if isinstance(e, RunStart)), None)


def _fresh_after(previous: GraphRuntime) -> GraphRuntime:
    """A new runtime over the same store, its clock going on where the previous one stopped
    (the same virtual clock: the owned loop reads it)."""
    assert isinstance(previous.clock, VirtualClock)
    store = previous.store
    if previous.store_features.clock_binding:
        return _runtime(store, previous.seed or 0, previous.clock, previous.backend)
    # The store passed GraphRuntime's check when the first runtime took it: the new runtime,
    # made over a default store, is handed it through the ``store`` setter (which reads its
    # features, without checking the store again: ~65 calls fewer). A store binding a clock
    # is given to GraphRuntime(store=...), which binds it.
    fresh = _runtime(None, previous.seed or 0, previous.clock, previous.backend)
    fresh.store = store
    return fresh


def _on_owned_loop(runtime: GraphRuntime, fn: Callable[[GraphRuntime], Any]) -> Any:
    """Run ``fn(runtime)`` on a loop owned by the runtime's clock (as ``invoke`` does)."""
    async def main() -> Any:
        return await fn(runtime)

    return run_sync_owned(main, runtime.clock, runtime.backend)


def _first_difference(a: list[str], b: list[str]) -> tuple[int, str]:
    """The first differing event, as the paths that differ in it (not both dumps)."""
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            ex, ey = json.loads(x), json.loads(y)
            what = f"{ex.get('type')} {ex.get('node') or ''}".strip()
            paths = diff_paths(ex, ey)
            return i, f"event #{i} ({what}) differs at:\n    " + "\n    ".join(paths)
    i = min(len(a), len(b))
    return i, f"one stream has {len(a)} events, the other {len(b)}"


_LOG: TypeAdapter[list[EventBase]] = TypeAdapter(list[SerializeAsAny[EventBase]])
"""A whole log as one JSON array, each event by its own class's serializer."""


def _log_json(events: list[EventBase]) -> bytes:
    """``events`` as one JSON array: ``[`` + :func:`_lines` joined by commas + ``]`` (one
    call for the whole log instead of three an event). Two logs have equal arrays exactly
    when their :func:`_lines` are equal (each line is one JSON object: the array splits back
    into them one way only); tests/properties/test_check_cost.py pins the identity."""
    return _LOG.dump_json(events)


def _lines(events: Iterable[EventBase], cmp: Compare | None = None) -> list[str]:
    if cmp is None or not cmp.active:
        return [e.model_dump_json() for e in events]
    return [json.dumps(cmp.event(e.model_dump(mode="json")), sort_keys=True) for e in events]
