"""Recording a run with its store saves interleaved with the events it yields (C5, C6).

C5 says the checkpoint a halted run resumes from is saved — the store's ``save`` *returned* —
before any event reporting the halting node is yielded. An event list cannot show that, and
neither can the store's call log: what is needed is one timeline of "save returned" marks and
"event consumed" marks. :class:`RecordingStore` wraps the runtime's store and writes the
marks; :func:`record_run` consumes ``runtime.stream()`` and writes the events into the same
timeline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ..._engine._results import GraphResult
from ..._engine._runtime import GraphRuntime
from ..._engine._stream import RunStream
from ..._graph._builder import CompiledGraph
from ..._graph._node import Resume
from ..._records._checkpoint import Checkpoint
from ..._records._events import CheckpointSaved, EventBase
from ..checks._checks import Violation, check_invariants, split_legs
from ..checks._legs import halting as _halting

__all__ = ["Mark", "Recording", "RecordingStore", "check_recording", "record_resume",
           "record_run", "record_run_sync"]


@dataclass(frozen=True)
class Mark:
    """One entry of a :class:`Recording`'s timeline.

    Attributes:
        kind: ``"event"`` (the consumer received ``events[index]``), ``"saved"`` (the store's
            ``save`` of ``checkpoint_id`` returned) or ``"save_failed"`` (it raised ``error``).
        index: for ``"event"``, the index in :attr:`Recording.events`.
        checkpoint_id: for the save marks.
        error: for ``"save_failed"``.
    """

    kind: str
    index: int | None = None
    checkpoint_id: str | None = None
    error: BaseException | None = None


class RecordingStore:
    """A store wrapper that writes a ``"saved"`` mark when ``save`` returns.

    Every other attribute and method is the inner store's.
    """

    def __init__(self, inner: Any, timeline: list[Mark]) -> None:
        self._inner = inner
        self.timeline = timeline

    @property
    def inner(self) -> Any:
        """The wrapped store."""
        return self._inner

    async def save(self, checkpoint: Checkpoint) -> None:
        """Save through the inner store, then mark it."""
        try:
            await self._inner.save(checkpoint)
        except BaseException as exc:
            self.timeline.append(Mark("save_failed", checkpoint_id=checkpoint.id, error=exc))
            raise
        self.timeline.append(Mark("saved", checkpoint_id=checkpoint.id))

    def __getattr__(self, name: str) -> Any:
        inner = self.__dict__.get("_inner")
        if inner is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(inner, name)


@dataclass
class Recording:
    """A run as recorded by :func:`record_run`.

    Attributes:
        events: the events consumed, in order.
        timeline: events and save marks, interleaved as they happened.
        result: the run's result, unless the stream raised.
        error: what the stream raised, if it did.
        graph: the graph run (for the checks that need it).
        store_log: the ``FaultyStore.calls`` entries made during the run, if the runtime's
            store is a ``FaultyStore``.
    """

    events: list[EventBase] = field(default_factory=list)
    timeline: list[Mark] = field(default_factory=list)
    result: GraphResult[Any] | None = None
    error: BaseException | None = None
    graph: CompiledGraph | None = None
    store_log: list[Any] | None = None


async def _consume(runtime: GraphRuntime, make: Any, graph: CompiledGraph | None) -> Recording:
    rec = Recording(graph=graph)
    original = runtime.store
    logged: Any = original if runtime.store_features.call_log else None
    first_call = None if logged is None else logged.call_count
    runtime.store = RecordingStore(original, rec.timeline)
    try:
        stream: RunStream = make()
        try:
            async for event in stream:
                rec.timeline.append(Mark("event", index=len(rec.events)))
                rec.events.append(event)
            rec.result = stream.result()
        except Exception as exc:  # the stream raised (C6, C7): part of what is recorded
            rec.error = exc
            await stream.aclose()
    finally:
        runtime.store = original
    if first_call is not None:
        rec.store_log = logged.calls_since(first_call)
    return rec


async def record_run(
    runtime: GraphRuntime,
    graph: CompiledGraph,
    input: Mapping[str, Any] | BaseModel | None = None,
    **options: Any,
) -> Recording:
    """Run ``graph`` on ``runtime`` and record events and store saves on one timeline.

    The runtime's store is wrapped in a :class:`RecordingStore` for the duration of the run.
    An exception the stream raises (a store's rejection, an edge function's error) is recorded
    in :attr:`Recording.error`, not raised.
    """
    return await _consume(runtime, lambda: runtime.stream(graph, input, **options), graph)


async def record_resume(
    runtime: GraphRuntime,
    run_or_checkpoint_id: str,
    resume: Resume | None = None,
    *,
    graph: CompiledGraph | None = None,
    **options: Any,
) -> Recording:
    """Like :func:`record_run`, for ``runtime.resume_stream(...)``."""
    return await _consume(
        runtime,
        lambda: runtime.resume_stream(run_or_checkpoint_id, resume, graph=graph, **options),
        graph,
    )


def record_run_sync(
    graph: CompiledGraph,
    input: Mapping[str, Any] | BaseModel | None = None,
    *,
    runtime: GraphRuntime | None = None,
    seed: int = 0,
    backend: str = "asyncio",
    **options: Any,
) -> Recording:
    """Synchronous :func:`record_run` (on a fresh deterministic runtime unless one is given).

    The run executes on an event loop owned by the runtime's clock, as ``invoke`` does: under
    a :class:`VirtualClock` timers are virtual and a batch that can never wake fails with
    ``VirtualDeadlock`` instead of hanging.
    """
    if runtime is None:
        from ..._time._clock import VirtualClock

        runtime = GraphRuntime(clock=VirtualClock(patch_wall_clock=False), seed=seed)
    rt = runtime

    async def main() -> Recording:
        return await record_run(rt, graph, input, **options)

    from ..._time._loops import run_sync_owned

    return run_sync_owned(main, rt.clock, backend)


def check_recording(rec: Recording, *, graph: CompiledGraph | None = None) -> list[Violation]:
    """Every event invariant (C1–C10), plus the interleaving parts of C5 and C6.

    C5: every ``checkpoint_saved`` is yielded after its save returned; for each halting node
    (``interrupt``, unrouted ``error``), the save of the checkpoint named by the leg's following
    ``checkpoint_saved`` returned before the halting event was yielded.
    C6: after a save that raised, no event is yielded, no ``checkpoint_saved`` names it and the
    stream raised that same exception object.
    """
    graph = graph or rec.graph
    events = rec.events
    out = check_invariants(events, graph=graph, store_log=rec.store_log,
                           stream_raised=rec.error is not None)
    position: dict[int, int] = {}
    saved_at: dict[str, int] = {}
    failed: list[tuple[int, Mark]] = []
    for p, m in enumerate(rec.timeline):
        if m.kind == "event" and m.index is not None:
            position[m.index] = p
        elif m.kind == "saved" and m.checkpoint_id is not None:
            saved_at.setdefault(m.checkpoint_id, p)
        elif m.kind == "save_failed":
            failed.append((p, m))
    for leg in split_legs(events):
        for i, e in leg.indexed():
            if isinstance(e, CheckpointSaved):
                at = saved_at.get(e.checkpoint_id)
                if at is None or at > position.get(i, -1):
                    out.append(Violation("C5", i, f"checkpoint_saved {e.checkpoint_id} was "
                                         "yielded before the store's save of it returned"
                                         + (" (it never returned)" if at is None else "")))
            if not _halting(e):
                continue
            cid = next((ev.checkpoint_id for j, ev in leg.indexed()
                        if j > i and isinstance(ev, CheckpointSaved)), None)
            if cid is None:
                continue  # check_c5 reports the missing checkpoint_saved
            at = saved_at.get(cid)
            if at is None or at > position.get(i, -1):
                out.append(Violation("C5", i, f"{e.type} of {e.node} (task {e.task_id}) was "  # type: ignore[attr-defined]
                                     f"yielded before checkpoint {cid}, which the run resumes "
                                     "from, was saved"))
    for p, m in failed:
        later = [ix for ix, pos in position.items() if pos > p]
        if later:
            out.append(Violation("C6", min(later), f"events were yielded after the save of "
                                 f"{m.checkpoint_id} raised {m.error!r}"))
        if rec.error is not m.error:
            out.append(Violation("C6", None, f"the save of {m.checkpoint_id} raised {m.error!r}, "
                                 f"but the stream raised {rec.error!r}"))
        break  # the first failed save ends the run; later ones belong to cleanup
    return sorted(out, key=lambda v: (v.index is None, v.index or 0, v.rule))
