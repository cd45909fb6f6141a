"""``assert_replays``: re-run a recorded run against the current code, event by event.

The replay runs on a fresh in-memory store, under the recorded seed, run id and virtual
clock, with the recorded state as input. Each later leg resumes from the checkpoint the
recorded leg resumed from, with the answers given then; interrupts an ``on_interrupt`` hook
answered in the recording are answered the same way. ``external`` nodes are played back
from the recording (:mod:`._stubs`): their code is never called; nor is a recorded
(``write``/``external``/``human``) tool's, whatever node calls it. The first event that differs
from the recording stops the replay with :class:`ReplayDiverged`, which says which node and
which event, recorded against now.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._assert._repr import field_diff, format_event
from .._engine._runtime import GraphRuntime, run_sync, use_run_ids
from .._graph._builder import CompiledGraph
from .._graph._node import PAUSE, Resume
from .._graph._tools import TOOL_PLAYBACK
from .._properties.runs._pairs import report_pair
from .._records._events import EventBase, Interrupt
from .._stores._memory import InMemoryCheckpointStore
from .._time._clock import DEFAULT_START, VirtualClock
from ..errors import InvalidArgument, InvalidHistory, ReplayDiverged
from ._history import History, load_history
from ._stubs import ExternalScripts, stubbed, tool_playback

__all__ = ["aassert_replays", "assert_replays"]

_TIME_FIELDS = ("time", "started_at", "finished_at")


class _FixedIds:
    """Gives the runtime the recorded run's token, so every id matches the recording."""

    def __init__(self, token: str) -> None:
        self.token = token

    def run_hex(self) -> str:
        return self.token


def _as_history(history: History | str | Path | dict[str, Any]) -> History:
    if isinstance(history, History):
        return history
    if isinstance(history, (str, Path, dict)):
        return load_history(history)
    raise InvalidArgument(f"history={history!r}: pass a History, a path to a history file or "
                          "its parsed JSON")


def _legs(events: list[EventBase]) -> list[list[EventBase]]:
    legs: list[list[EventBase]] = []
    for ev in events:
        if getattr(ev, "type", "") == "run_start" or not legs:
            legs.append([])
        legs[-1].append(ev)
    return legs


def _wire(event: EventBase, timed: bool) -> dict[str, Any]:
    data = event.model_dump(mode="json")
    data.pop("revision", None)  # replaying under a new revision is the point
    if not timed:
        for name in _TIME_FIELDS:
            data.pop(name, None)
    return data


class _Replay:
    def __init__(self, history: History, graph: CompiledGraph) -> None:
        if not isinstance(graph, CompiledGraph):
            hint = " (call .compile() first)" if hasattr(graph, "compile") else ""
            raise InvalidArgument(f"assert_replays(graph={graph!r}): pass a CompiledGraph{hint}")
        if graph.graph_id != history.graph_id:
            raise InvalidArgument(
                f"history of run {history.run_id} is of graph {history.graph_id!r}; "
                f"assert_replays was given graph {graph.graph_id!r}")
        if history.initial_state is None:
            raise InvalidHistory(
                f"history of run {history.run_id} has no initial state, so it cannot be "
                "replayed (a store export needs the run's first checkpoint: record with "
                "checkpoint_policy='every_step'); check_upgrade() still works with it")
        self.history = history
        self.original = graph
        self.replayed: list[EventBase] = []  # the events the replay produced, in order
        self.events = history.parsed_events()
        checkpoints = history.parsed_checkpoints()
        self.timed = history.clock_start is not None
        self.scripts = ExternalScripts(graph, self.events, checkpoints, self.timed)
        self.graph = stubbed(graph, self.scripts)
        asked = {i.key for ev in self.events if getattr(ev, "type", "") == "interrupt"
                 for i in ev.interrupts}  # type: ignore[attr-defined]
        self.hooked: dict[str, Any] = {}
        for cp in checkpoints:
            for key, value in cp.answers.items():
                if key not in asked:
                    self.hooked[key] = value
        start = history.clock_start
        if start is None:
            start = self.events[0].time if self.events else DEFAULT_START
        self.clock = VirtualClock(start)
        runtime = GraphRuntime(InMemoryCheckpointStore(), clock=self.clock, seed=history.seed,
                               checkpoint_policy=history.checkpoint_policy,
                               on_interrupt=self._hook)
        token = history.run_id.removeprefix("run-")
        use_run_ids(runtime, _FixedIds(token))
        self.runtime = runtime
        self.thread = None if history.thread_id == f"thread-{token}" else history.thread_id
        self.position = 0

    def _hook(self, pending: Interrupt) -> Any:
        return self.hooked.get(pending.key, PAUSE)

    def _diverged(self, recorded: EventBase | None, now: EventBase | None, leg: int,
                  why: str = "") -> ReplayDiverged:
        h = self.history
        where = recorded if recorded is not None else now
        node = getattr(where, "node", None)
        at = (f"event {self.position} of {len(self.events)} (leg {leg + 1}"
              + (f", step {where.step}" if where is not None else "")
              + (f", node {node!r}" if node else "") + ")")
        lines = [
            f"the replay of run {h.run_id} (graph {h.graph_id!r}, recorded under {h.revision}"
            + (f", from {h.source}" if h.source else "")
            + f") diverged at {at}:",
            f"  recorded: {format_event(recorded) if recorded is not None else '<end of run>'}",
            f"  now:      {format_event(now) if now is not None else '<end of run>'}",
        ]
        rec = _wire(recorded, self.timed) if recorded is not None else None
        cur = _wire(now, self.timed) if now is not None else None
        if rec is not None and cur is not None:
            for name in [*rec, *(k for k in cur if k not in rec)]:
                if rec.get(name) != cur.get(name):
                    lines.extend(field_diff(name, rec.get(name, "<absent>"),
                                            cur.get(name, "<absent>")))
        if why:
            lines.append(f"  {why}")
        lines.extend(f"  note: {miss}" for miss in self.scripts.misses)
        lines.append(f"  (the graph now is revision {self.graph.revision})")
        message = "\n".join(lines)
        report_pair("assert_replays", message, ("recorded", "replayed now"), self.events,
                    [*self.replayed, *([now] if now is not None else [])],
                    first=self.position, graph=self.original)
        return ReplayDiverged(message, self.position, rec, cur)

    async def run(self) -> None:
        # Recorded tool calls are played back, never made: node code that calls an external
        # tool gets what the recording got (the tasks inherit this context).
        token = TOOL_PLAYBACK.set(tool_playback(self.events))
        try:
            await self._run()
        finally:
            TOOL_PLAYBACK.reset(token)

    async def _run(self) -> None:
        legs = _legs(self.events)
        resumes = list(self.history.resumes)
        for n, leg in enumerate(legs):
            first = leg[0]
            if n == 0:
                stream = self.runtime.stream(self.graph, self.history.initial_state,
                                             thread_id=self.thread)
            else:
                ref = getattr(first, "resumed_from", None)
                if ref is None:
                    raise InvalidHistory(f"history of run {self.history.run_id}: leg {n + 1} "
                                         "does not say which checkpoint it resumed from")
                if self.timed and self.clock.now() < first.time:
                    self.clock.advance((first.time - self.clock.now()).total_seconds())
                cp = await self.runtime.store.get(ref)
                answers = resumes[n - 1] if n - 1 < len(resumes) else {}
                resume = None
                if cp is not None and cp.status == "interrupted":
                    keys = [i.key for i in cp.interrupts]
                    resume = Resume(answers={k: answers.get(k) for k in keys})
                stream = self.runtime.resume_stream(ref, resume, graph=self.graph)
            await self._compare(stream, leg, n)

    async def _compare(self, stream: Any, leg: list[EventBase], n: int) -> None:
        ended = getattr(leg[-1], "type", "") == "run_end"
        i = 0
        try:
            async with stream as events:
                async for now in events:
                    if i >= len(leg):
                        raise self._diverged(None, now, n, "the recorded leg ended here")
                    recorded = leg[i]
                    if _wire(recorded, self.timed) != _wire(now, self.timed):
                        raise self._diverged(recorded, now, n)
                    self.replayed.append(now)
                    i += 1
                    self.position += 1
                    if i == len(leg) and not ended:
                        return  # the recorded leg raised here (a store fault, a crash)
        except ReplayDiverged:
            raise
        except Exception as exc:
            expected = leg[i] if i < len(leg) else None
            if expected is None and not ended:
                return
            raise self._diverged(expected, None, n,
                                 f"the replay raised {type(exc).__name__}: {exc}") from exc
        if i < len(leg):
            raise self._diverged(leg[i], None, n)


async def aassert_replays(history: History | str | Path | dict[str, Any],
                          graph: CompiledGraph) -> None:
    """Async :func:`assert_replays` (for tests that already run an event loop)."""
    await _Replay(_as_history(history), graph).run()


def assert_replays(history: History | str | Path | dict[str, Any], graph: CompiledGraph) -> None:
    """Re-run a recorded run against ``graph`` and fail at the first divergence.

    The replay uses the recorded seed, run id, thread and virtual clock, starts from the
    recorded state, resumes each leg from the checkpoint the recorded leg resumed from with
    the answers given then, and plays back the recorded results of ``external`` nodes without
    calling their code. Every event is compared with the recorded one (times too, unless the
    run was recorded on the real clock).

    Args:
        history: a :class:`History`, a path to a history file, or its parsed JSON.
        graph: the current graph (the same ``graph_id``).

    Raises:
        ReplayDiverged: an ``AssertionError`` naming the first event that differs (the node,
            the event recorded and the event now, and the fields that differ).
        UnsupportedFormat: a history file of another format version.
        InvalidHistory: a file that is not a history, or one without an initial state.
        InvalidArgument: ``graph`` is not a compiled graph of the history's ``graph_id``.
    """
    replay = _Replay(_as_history(history), graph)
    run_sync(replay.runtime, replay.run)


def replay_report(history: dict[str, Any], graph: str) -> str | None:
    """Replay ``history`` (its JSON form) against the graph ``graph`` names (``"module:attr"``);
    return ``None`` when it replays, else what diverged. What worker processes run for
    ``--graphflow-processes``."""
    from .._graph._refs import resolve_graph

    try:
        assert_replays(load_history(history), resolve_graph(graph))
    except ReplayDiverged as exc:
        return str(exc)
    return None
