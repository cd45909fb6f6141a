"""A run read for its page: legs, tasks, steps with their states, interrupts, checkpoints.

Everything comes from the run's events (wire form, as stores and history files keep them),
with what the events do not carry taken from elsewhere when it is known: the checkpoints
(the state after each step, the answers given at resumes), the state the run started from,
the graph (its reducers fold a step's patches when no checkpoint has the state) and the
store faults a :class:`~pytest_graphflow.FaultyStore` logged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ._diff import Change, state_diff

if TYPE_CHECKING:
    from .._graph._builder import CompiledGraph

__all__ = ["Fault", "RunView", "StepView", "TaskSpan", "read_run"]

START, END = "__start__", "__end__"


@dataclass
class TaskSpan:
    """One task on the timeline (its lane).

    Attributes:
        task_id, node, step, leg: what ran, in which superstep and leg (from 1).
        start, end: virtual seconds from the run's first event.
        outcome: ``"done"``, ``"paused"`` (interrupt), ``"failed"``, ``"replayed"`` or
            ``"running"`` (no end recorded).
        attempts: how many attempts it made (retries are attempts after the first).
        errors: the messages of its failed attempts.
    """

    task_id: str
    node: str
    step: int
    leg: int
    start: float
    end: float
    outcome: str = "running"
    attempts: int = 1
    errors: list[str] = field(default_factory=list)


@dataclass
class StepView:
    """A superstep of a leg and the state after it.

    Attributes:
        leg, step: where it is.
        nodes: the tasks' nodes, in event order.
        state: the state after the step (``None`` when it is not known).
        changes: ``state`` compared with the step before.
        source: where ``state`` comes from: ``"checkpoint"``, ``"run_end"``, ``"reducers"``
            (the graph folded the patches) or ``"patches"`` (patches applied key by key:
            without the graph, reducers are not known).
    """

    leg: int
    step: int
    nodes: list[str]
    state: dict[str, Any] | None
    changes: list[Change]
    source: str


@dataclass(frozen=True)
class Fault:
    """A store call that failed (a fault rule, or the store itself).

    Attributes:
        at: virtual seconds from the run's first event, or ``None`` if unknown.
        op: the store method.
        detail: its arguments and outcome, readable.
        error: what the caller saw.
    """

    at: float | None
    op: str
    detail: str
    error: str


@dataclass
class RunView:
    """What the page shows of one run.

    Attributes:
        run_id, graph_id, thread_id: the run.
        status: the last leg's status (``"running"`` without a ``run_end``).
        events: every event (wire form), in order; ``legs[i]`` is the leg (from 1) of
            ``events[i]`` and ``offsets[i]`` its virtual time in seconds from the first.
        tasks: the lanes of the timeline, in start order.
        steps: every superstep with the state after it.
        path: the ``(source, target)`` edges taken.
        halted: the nodes where the run paused (interrupt, breakpoint) or failed.
        interrupts: ``(interrupt, answer or _NO_ANSWER)`` pairs, in order.
        checkpoints: ``(event index, checkpoint id, status)``.
        faults: failed store calls.
        start: the first event's time.
    """

    run_id: str
    graph_id: str
    thread_id: str
    status: str
    events: list[dict[str, Any]]
    legs: list[int]
    offsets: list[float]
    tasks: list[TaskSpan]
    steps: list[StepView]
    path: list[tuple[str, str]]
    halted: list[str]
    interrupts: list[tuple[dict[str, Any], Any]]
    checkpoints: list[tuple[int, str, str]]
    faults: list[Fault]
    start: datetime | None


NO_ANSWER: Any = object()
"""The answer of an interrupt that was not answered (yet)."""


def _when(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return None


def read_run(
    events: Sequence[Mapping[str, Any]],
    *,
    graph: CompiledGraph | None = None,
    checkpoints: Iterable[Mapping[str, Any]] = (),
    initial_state: Mapping[str, Any] | None = None,
    answers: Mapping[str, Any] | None = None,
    faults: Iterable[Mapping[str, Any]] = (),
) -> RunView:
    """Read a run's events (wire-form dicts, every leg in order) into a :class:`RunView`.

    ``checkpoints`` (wire form), ``initial_state``, ``answers`` (by interrupt key) and
    ``faults`` (``{"op", "args", "outcome", "error", "time"}``, as a FaultyStore's calls) add
    what the events do not carry; ``graph`` folds patches with its reducers.
    """
    evs = [dict(e) for e in events]
    first = _when(evs[0].get("time")) if evs else None

    def offset(value: Any) -> float:
        t = _when(value)
        return 0.0 if t is None or first is None else (t - first).total_seconds()

    cps = {str(c.get("id")): dict(c) for c in checkpoints}
    if initial_state is None:  # the input checkpoint (step -1) holds the state it started from
        initial_state = next((c.get("state") for c in cps.values()
                              if isinstance(c.get("step"), int) and c["step"] < 0), None)
    known = dict(answers or {})
    for cp in cps.values():
        for key, value in (cp.get("answers") or {}).items():
            known.setdefault(key, value)
    legs, offsets = _legs(evs), [offset(e.get("time")) for e in evs]
    start = next((e for e in evs if e.get("type") == "run_start"), {})
    status = next((str(e.get("status")) for e in reversed(evs) if e.get("type") == "run_end"),
                  "running")
    interrupts = [(i, known.get(str(i.get("key")), NO_ANSWER))
                  for e in evs if e.get("type") == "interrupt"
                  for i in e.get("interrupts") or () if isinstance(i, dict)]
    checkpoints_at = [(n, str(e.get("checkpoint_id")),
                       str(cps.get(str(e.get("checkpoint_id")), {}).get("status", "")))
                      for n, e in enumerate(evs) if e.get("type") == "checkpoint_saved"]
    return RunView(
        run_id=str(start.get("run_id") or (evs[0].get("run_id") if evs else "") or ""),
        graph_id=str(start.get("graph_id") or (graph.graph_id if graph is not None else "")),
        thread_id=str(start.get("thread_id") or ""),
        status=status, events=evs, legs=legs, offsets=offsets,
        tasks=_tasks(evs, legs, offset), steps=_steps(evs, legs, graph, cps, initial_state),
        path=_path(evs), halted=_halted(evs, legs), interrupts=interrupts,
        checkpoints=checkpoints_at, faults=_faults(evs, faults, offset), start=first)


def _legs(evs: list[dict[str, Any]]) -> list[int]:
    out, leg = [], 0
    for e in evs:
        if e.get("type") == "run_start" or leg == 0:
            leg += 1
        out.append(leg)
    return out


def _tasks(evs: list[dict[str, Any]], legs: list[int], offset: Any) -> list[TaskSpan]:
    spans: dict[tuple[int, str], TaskSpan] = {}
    for e, leg in zip(evs, legs, strict=True):
        task, kind = e.get("task_id"), e.get("type")
        if not task or kind not in ("node_start", "node_end", "error", "interrupt"):
            continue
        key = (leg, str(task))
        span = spans.get(key)
        at = offset(e.get("time"))
        if span is None:
            span = spans[key] = TaskSpan(str(task), str(e.get("node")), int(e.get("step", 0)),
                                         leg, at, at)
        if kind == "node_start":
            span.attempts = max(span.attempts, int(e.get("attempt") or 1))
        elif kind == "node_end":
            span.start = offset(e.get("started_at")) if e.get("started_at") else span.start
            span.end = offset(e.get("finished_at")) if e.get("finished_at") else at
            span.outcome = "replayed" if e.get("replayed") else "done"
            span.attempts = max(span.attempts, int(e.get("attempt") or 1))
        elif kind == "error":
            span.errors.append(f"{e.get('error_type')}: {e.get('message')}")
            if not e.get("will_retry"):
                span.outcome, span.end = "failed", at
        else:
            span.outcome, span.end = "paused", at
    return sorted(spans.values(), key=lambda s: (s.start, s.leg, s.step))


def _steps(evs: list[dict[str, Any]], legs: list[int], graph: CompiledGraph | None,
           cps: dict[str, dict[str, Any]],
           initial_state: Mapping[str, Any] | None) -> list[StepView]:
    groups: list[tuple[int, int, list[dict[str, Any]]]] = []
    for e, leg in zip(evs, legs, strict=True):
        step = int(e.get("step", 0))
        if groups and groups[-1][0] == leg and groups[-1][1] == step:
            groups[-1][2].append(e)
        else:
            groups.append((leg, step, [e]))
    state: dict[str, Any] | None = dict(initial_state) if initial_state is not None else None
    out: list[StepView] = []
    for leg, step, group in groups:
        start = group[0]
        if start.get("type") == "run_start" and start.get("resumed_from") in cps:
            state = dict(cps[str(start["resumed_from"])].get("state") or {})
        ends = [e for e in group if e.get("type") == "node_end"]
        new, source = _state_after(group, ends, state, graph, cps)
        nodes = list(dict.fromkeys(str(e.get("node")) for e in group
                                   if e.get("type") == "node_start"))
        if not nodes and not ends and new is state:
            continue  # a leg's first or last events only: nothing ran
        out.append(StepView(leg, step, nodes, new,
                            state_diff(state if state is not None else {}, new or {}), source))
        state = new
    return out


def _state_after(group: list[dict[str, Any]], ends: list[dict[str, Any]],
                 state: dict[str, Any] | None, graph: CompiledGraph | None,
                 cps: dict[str, dict[str, Any]]) -> tuple[dict[str, Any] | None, str]:
    for e in reversed(group):
        if e.get("type") == "run_end" and isinstance(e.get("state"), dict):
            return dict(e["state"]), "run_end"
        cp = cps.get(str(e.get("checkpoint_id"))) if e.get("type") == "checkpoint_saved" else None
        if cp is not None and isinstance(cp.get("state"), dict):
            return dict(cp["state"]), "checkpoint"
    if not ends or state is None:
        return state, "patches"
    patches = [(str(e.get("node")), e.get("patch")) for e in ends]
    if graph is not None:
        from .._engine._merge import merge_patches

        try:
            return merge_patches(graph, state, patches, parallel=len(patches) > 1), "reducers"
        except Exception:  # a patch the graph refuses: show the writes as they are
            pass
    new = dict(state)
    for _, patch in patches:
        new.update(patch or {})
    return new, "patches"


def _path(evs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    fresh, first_step = False, None
    for e in evs:
        kind = e.get("type")
        if kind == "run_start":
            fresh, first_step = e.get("resumed_from") is None, None
        elif kind == "node_start" and fresh and e.get("node"):
            first_step = e.get("step") if first_step is None else first_step
            if e.get("step") == first_step:
                pairs.append((START, str(e["node"])))
        elif kind == "edge_transition":
            pairs.append((str(e.get("source")), str(e.get("target"))))
    return list(dict.fromkeys(pairs))


def _halted(evs: list[dict[str, Any]], legs: list[int]) -> list[str]:
    """The nodes where the last leg paused or failed."""
    last = legs[-1] if legs else 0
    out: list[str] = []
    for e, leg in zip(evs, legs, strict=True):
        if leg != last:
            continue
        kind = e.get("type")
        if kind == "interrupt" or (kind == "error" and not e.get("will_retry")
                                   and not e.get("routed_to") and e.get("node")):
            out.append(str(e.get("node")))
        elif kind == "run_end" and isinstance(e.get("breakpoint"), dict):
            out.extend(str(n) for n in e["breakpoint"].get("nodes") or ())
    return list(dict.fromkeys(out))


_STORE_ERRORS = frozenset({"StoreFault", "StaleClaim", "ParentNotLatest", "ThreadBusy",
                           "TenantMismatch", "MalformedCommit", "StoreFileError"})


def _faults(evs: list[dict[str, Any]], given: Iterable[Mapping[str, Any]],
            offset: Any) -> list[Fault]:
    out = [Fault(offset(f.get("time")) if f.get("time") is not None else None,
                 str(f.get("op")), f"{f.get('op')}({f.get('args', '')}) -> {f.get('outcome')}",
                 str(f.get("error") or f.get("outcome") or ""))
           for f in given]
    out += [Fault(offset(e.get("time")), "event", f"error event #{e.get('seq')}",
                  f"{e.get('error_type')}: {e.get('message')}")
            for e in evs if e.get("type") == "error" and e.get("error_type") in _STORE_ERRORS]
    return out
