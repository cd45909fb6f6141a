"""Stand-ins for ``external`` nodes during a replay: the recorded results, never the code.

A replay must not charge a card again. Every ``external`` node of the graph being replayed is
swapped for a stub that plays back, call by call, what the recorded run's task did: the custom
events it emitted, the interrupts it asked (their answers come back from the run), and its
outcome — the patch and route it returned, the exception it raised (as an exception of the
same name), or the expansion it asked for. On a virtual clock the stub also takes the virtual
time the call took, so the times of later events match.
"""

from __future__ import annotations

import builtins
import copy
import dataclasses
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import anyio

from .._graph._builder import REPLAYED_EFFECTS, Command, CompiledGraph, Expand
from .._graph._tools import play_back
from .._records._checkpoint import Checkpoint
from .._records._events import EventBase, ToolCallEvent

__all__ = ["Call", "ExternalScripts", "stubbed", "tool_playback"]


@dataclasses.dataclass
class Call:
    """What one call of an external node did in the recording (internal)."""

    custom: list[tuple[str, Any]] = dataclasses.field(default_factory=list)
    interrupts: list[tuple[str, Any]] = dataclasses.field(default_factory=list)
    kind: str = "open"  # done | interrupt | error | open (the recording ended mid-call)
    patch: dict[str, Any] | None = None
    goto: list[str] | None = None
    error_type: str = ""
    message: str = ""
    until: datetime | None = None


class ExternalScripts:
    """The recorded calls of every ``external`` task of a run, and how many were played."""

    def __init__(self, graph: CompiledGraph, events: list[EventBase],
                 checkpoints: list[Checkpoint], timed: bool) -> None:
        external = {n for n, spec in graph.nodes.items() if spec.effect == "external"}
        self.calls: dict[str, list[Call]] = {}
        self.asked: dict[str, list[tuple[str, Any]]] = {}
        self.played: dict[str, int] = {}
        self.misses: list[str] = []
        self.timed = timed
        self.expand: dict[str, dict[str, Any]] = {}
        for cp in checkpoints:
            for out in cp.completed.values():
                if out.expand is not None:
                    self.expand[out.task_id] = out.expand
        open_call: dict[str, Call] = {}
        for ev in events:
            tid, kind = ev.task_id, getattr(ev, "type", "")
            if tid is None or ev.node not in external:
                continue
            if kind == "node_start":
                open_call[tid] = Call()
                self.calls.setdefault(tid, []).append(open_call[tid])
                continue
            call = open_call.get(tid)
            if call is None:
                continue
            if kind == "custom":
                call.custom.append((ev.channel, ev.value))  # type: ignore[attr-defined]
            elif kind == "tool_call":
                call.custom.append((TOOL_CALL, ev.model_dump(mode="json")))
            elif kind == "node_end":
                if ev.replayed:  # type: ignore[attr-defined]
                    self.calls[tid].remove(call)  # played back by the runtime, not a call
                else:
                    call.kind, call.patch = "done", ev.patch  # type: ignore[attr-defined]
                    call.goto = ev.goto  # type: ignore[attr-defined]
                    call.until = ev.finished_at  # type: ignore[attr-defined]
                del open_call[tid]
            elif kind == "interrupt":
                call.kind, call.until = "interrupt", ev.time
                for pending in ev.interrupts:  # type: ignore[attr-defined]
                    call.interrupts.append((pending.id, pending.payload))
                del open_call[tid]
            elif kind == "error":
                call.kind = "error"
                call.error_type = ev.error_type  # type: ignore[attr-defined]
                call.message = ev.message  # type: ignore[attr-defined]
                call.until = None if ev.will_retry else ev.time  # type: ignore[attr-defined]
                del open_call[tid]

    def play(self, node: str, task_id: str) -> Call | None:
        """The next recorded call of ``task_id`` (``None`` when the recording has no more)."""
        calls = self.calls.get(task_id, [])
        n = self.played.get(task_id, 0)
        self.played[task_id] = n + 1
        if n >= len(calls) or calls[n].kind == "open":
            self.misses.append(
                f"external node {node!r} (task {task_id}) was called {n + 1} time(s); the "
                f"history records {len([c for c in calls if c.kind != 'open'])} call(s) of that "
                "task, so the replay cannot give it a result (the code was not called)")
            return None
        asked = self.asked.setdefault(task_id, [])
        for item in calls[n].interrupts:
            if item not in asked:
                asked.append(item)
        return calls[n]


TOOL_CALL: Any = object()
"""Marks a recorded ``tool_call`` among a call's custom events (internal)."""


def tool_playback(events: list[EventBase]) -> dict[str, list[Mapping[str, Any]]]:
    """The executed (not replayed) calls of recorded tools, by call key, in order: what a
    replay plays back instead of calling a tool."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for ev in events:
        if isinstance(ev, ToolCallEvent) and not ev.replayed \
                and ev.effect in REPLAYED_EFFECTS:
            out.setdefault(ev.key, []).append(ev.model_dump(mode="json"))
    return out


class MissingRecording(Exception):
    """An external node was called where the recording has no call of it (internal)."""


def _exception(name: str, message: str) -> BaseException:
    base = getattr(builtins, name, None)
    if isinstance(base, type) and issubclass(base, Exception):
        return base(message)
    cls: type[Exception] = type(name, (Exception,), {"__module__": "replay"})
    return cls(message)


def _stub(scripts: ExternalScripts, name: str) -> Any:
    async def replayed(state: Any, ctx: Any) -> Any:
        call = scripts.play(name, ctx.task_id)
        if call is None:
            raise MissingRecording(scripts.misses[-1])
        for channel, value in call.custom:
            if channel is TOOL_CALL:
                play_back(ctx, value)  # the tool calls it made, as they were
            else:
                ctx.emit(value, channel=channel)
        if scripts.timed and call.until is not None:  # before a pending interrupt pauses
            wait = (call.until - ctx.now()).total_seconds()
            if wait > 0:
                await anyio.sleep(wait)
        for iid, payload in scripts.asked.get(ctx.task_id, []):
            ctx.interrupt(payload, id=iid)  # answered ones return; the pending one pauses
        if call.kind == "error":
            raise _exception(call.error_type, call.message)
        expand = scripts.expand.get(ctx.task_id)
        if expand is not None:
            return Expand(expand["node"], list(expand.get("items", [])), update=call.patch)
        if call.goto is not None:
            return Command(update=call.patch, goto=call.goto)
        return call.patch

    replayed.__name__ = f"replayed_{name}"
    return replayed


def stubbed(graph: CompiledGraph, scripts: ExternalScripts) -> CompiledGraph:
    """``graph`` (same id and revision) with every ``external`` node played back."""
    twin = copy.copy(graph)
    twin.nodes = {
        name: dataclasses.replace(spec, fn=_stub(scripts, name), arity=2, is_async=True)
        if spec.effect == "external" else spec
        for name, spec in graph.nodes.items()
    }
    return twin
