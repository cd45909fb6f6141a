"""``check_tool_replays``: the tool calls of a run's events keep the runtime's promise.

A ``write``/``external``/``human`` tool's result is recorded on the run's checkpoints and a
task that runs again replays it: across the legs of a run resumed by run id, each such call
key is executed (``replayed=False``) at most once, and a replayed call gives back what the
executed call gave.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import repeat
from typing import Any

from ..._graph._primitives import REPLAYED_EFFECTS
from ..._records._events import ToolCallEvent
from ._legs import Violation, normalise_events

__all__ = ["check_tool_replays"]


def check_tool_replays(events: Iterable[Any]) -> list[Violation]:
    """Rule ``"tools"`` over one run's events (its legs in order, resumed by run id).

    * a call of a recorded tool (effect ``write``/``external``/``human``) that returned is
      executed at most once per ``key``: every later ``tool_call`` of that key is
      ``replayed``;
    * a replayed call names the tool the executed one did, and gives back its value and its
      update (when the executed call is in the events);
    * a replayed call has ``outcome="ok"``.

    Calls of ``pure``/``read`` tools run again freely and are not checked. A run resumed from
    an earlier checkpoint (time travel) may legitimately call a tool again under the same
    key: check the legs resumed by run id.
    """
    out: list[Violation] = []
    evs = normalise_events(events)
    if not any(map(isinstance, evs, repeat(ToolCallEvent))):
        return out  # no tool call (most runs): no call per event
    executed: dict[str, tuple[int, ToolCallEvent]] = {}
    for i, e in enumerate(evs):
        if not isinstance(e, ToolCallEvent) or e.effect not in REPLAYED_EFFECTS:
            continue
        first = executed.get(e.key)
        if not e.replayed:
            if e.outcome != "ok":
                continue
            if first is not None:
                out.append(Violation("tools", i, f"{e.effect} tool {e.tool!r} was called again "
                                     f"for call {e.key} (task {e.task_id}, node {e.node!r}), "
                                     f"already executed at event #{first[0]}: a recorded "
                                     "tool call must be replayed, never called twice"))
                continue
            executed[e.key] = (i, e)
            continue
        if e.outcome != "ok":
            out.append(Violation("tools", i, f"replayed call {e.key} of tool {e.tool!r} has "
                                 f"outcome {e.outcome!r}; only a call that returned is "
                                 "recorded"))
        if first is None:
            continue
        was = first[1]
        if (was.tool, was.value, was.update) != (e.tool, e.value, e.update):
            out.append(Violation("tools", i, f"replayed call {e.key} gave tool {e.tool!r} "
                                 f"value={e.value!r} update={e.update!r}; the executed call "
                                 f"at event #{first[0]} was tool {was.tool!r} "
                                 f"value={was.value!r} update={was.update!r}"))
    return out
