"""Maps what a LangGraph run reports to our events (SPEC §3).

Sources: LangGraph's ``debug`` stream (``task`` → ``node_start``; ``task_result`` →
``node_end``, ``interrupt`` or ``error``), its ``values`` stream (the state after each step,
pending interrupts), the :class:`FaultySaver` (a ``put`` that returned →
``checkpoint_saved``) and each task's own writes (→ the edges it took). ``edge_transition``
events of a step are yielded just before the next step's ``node_start`` events, from the
``branch:to:X``/``join:...:X`` channels and ``Send`` packets the task wrote; edges into END
write nothing in LangGraph, and the entry tasks are started by LangGraph's hidden
``__start__`` task, so neither has an edge event.

A subgraph's events come from the same sources in its own checkpoint namespace (LangGraph's
``subgraphs=True`` stream, the saver's ``checkpoint_ns``). Each namespace has a recorder of
its own, and its events enter the log as ``custom`` events on channel ``"subgraph"`` — as
our runtime forwards a child's events — with ``{"path": [subgraph node, ..., child node],
"namespace": [LangGraph's namespace], "event": <the child event's wire form>}``, carried by
the subgraph node's task at the parent's step. So a child's interrupt is logged twice, as
LangGraph streams it: in the child's namespace and at the parent's subgraph task.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .._records._events import (
    Breakpoint,
    CheckpointSaved,
    CustomEvent,
    EdgeTransition,
    ErrorEvent,
    EventBase,
    Interrupt,
    InterruptEvent,
    NodeEnd,
    NodeStart,
    RunEnd,
    RunStart,
)
from .._time._clock import VirtualClock
from ._convert import jsonable, strip_interrupts
from ._saver import SaverOp

__all__ = ["LegRecorder"]


class LegRecorder:
    """Builds one leg's events; ``seq`` continues from ``first_seq``.

    Args:
        clock: event times come from it.
        run_id: the run id of every event.
        first_seq: the seq of the leg's first event.
        known: interrupts seen in earlier legs, by LangGraph interrupt id (updated).
        task_nodes: node names by task id (updated).
        writes: each task's writes, by task id (the edges it took).
        child_seq: where each subgraph namespace's own ``seq`` goes on (updated).
        began: when each node task passed its start gate, by task id (filled by the
            harness's node-task wrapper; read for a task LangGraph reports no start of).
    """

    def __init__(self, clock: VirtualClock, run_id: str, first_seq: int,
                 known: dict[str, Interrupt], task_nodes: dict[str, str],
                 writes: dict[str, list[tuple[str, Any]]],
                 child_seq: dict[str, int] | None = None,
                 began: dict[str, Any] | None = None) -> None:
        self.clock = clock
        self.run_id = run_id
        self.events: list[EventBase] = []
        self.seq = first_seq
        self.step = 0
        self.known = known
        self.task_nodes = task_nodes
        self.values: dict[str, Any] | None = None
        self._pending: dict[str, list[str]] = {}  # task id -> its interrupt ids
        self.checkpoint_id: str | None = None
        self.node_errors = 0
        self._starts: list[tuple[dict[str, Any], Any]] = []
        self._started_at: dict[str, Any] = {}
        self._writes = writes
        self._ended: list[tuple[int, str]] = []  # (step, task id) of completed tasks
        self._edged: set[str] = set()
        self._child_seq = {} if child_seq is None else child_seq
        self._children: dict[str, LegRecorder] = {}  # by checkpoint namespace
        self._forwarded: dict[str, int] = {}  # how many of a child's events are logged
        self.began = {} if began is None else began
        self._reported: set[str] = set()  # tasks with a result (end, interrupt or error)
        self._attempt: dict[str, int] = {}  # a retried task's attempt, by task id
        self.watch: Callable[[EventBase], None] | None = None
        """Called with each event logged (``cancel_at=``'s watcher); subgraph recorders have
        none: their events reach it forwarded."""

    def _base(self, node: str | None = None, task_id: str | None = None,
              step: int | None = None) -> dict[str, Any]:
        base = {"seq": self.seq, "run_id": self.run_id,
                "step": self.step if step is None else step,
                "time": self.clock.now(), "node": node, "task_id": task_id}
        self.seq += 1
        return base

    def add(self, event: EventBase) -> None:
        """Append one event (and show it to :attr:`watch`)."""
        self.events.append(event)
        if self.watch is not None:
            self.watch(event)

    def run_start(self, graph_id: str, revision: str, thread_id: str,
                  resumed_from: str | None, step: int = 0) -> None:
        """The leg's first event (``step``: where the thread stands)."""
        self.step = step
        self.add(RunStart(**self._base(), graph_id=graph_id, revision=revision,
                          thread_id=thread_id, resumed_from=resumed_from))

    # ---------------------------------------------------------------- stream chunks

    def chunk(self, mode: str, chunk: Any, namespace: tuple[str, ...] = ()) -> None:
        """One item of ``astream(stream_mode=["debug", "values"], subgraphs=True)``, from
        the graph itself (``namespace`` empty) or a subgraph."""
        if namespace:
            self.flush()  # the parent's tasks started before their children's
            self._child(namespace).chunk(mode, chunk)
            self._forward()
            return
        if mode == "values":
            self.values = strip_interrupts(chunk)
            return
        kind, payload = chunk.get("type"), chunk.get("payload") or {}
        step = chunk.get("step")
        if kind == "task":
            if isinstance(step, int):
                self._edges_before(step)
                self.step = step
            self._starts.append((payload, self.clock.now()))
            self.task_nodes[str(payload.get("id"))] = str(payload.get("name"))
            return
        self.flush()
        if kind == "task_result":
            self._result(payload)

    def flush(self) -> None:
        """Yield the buffered ``node_start`` events of a step (sorted by node, task id, so
        the order LangGraph plans tasks in does not leak in), the subgraphs' too."""
        starts, self._starts = self._starts, []
        for payload, at in sorted(starts, key=lambda p: (str(p[0].get("name")),
                                                         str(p[0].get("id")))):
            tid, node = str(payload.get("id")), str(payload.get("name"))
            self._started_at[tid] = at
            self.add(NodeStart(**{**self._base(node, tid), "time": at}))
        if self._children:
            for child in self._children.values():
                child.flush()
            self._forward()

    def _result(self, payload: dict[str, Any]) -> None:
        tid, node = str(payload.get("id")), str(payload.get("name"))
        if tid not in self._started_at:
            # LangGraph reports no ``task`` for a task it schedules within the step, as an
            # ``error_handler`` node's after the node failed: its start is when it passed
            # its gate (C2: every result has its start).
            at = self.began.get(tid, self.clock.now())
            self._started_at[tid] = at
            self.task_nodes[tid] = node
            self.add(NodeStart(**{**self._base(node, tid), "time": at}))
        self._reported.add(tid)
        interrupts = payload.get("interrupts") or []
        error = payload.get("error")
        if interrupts:
            found = []
            for item in interrupts:
                iid = str(item.get("id"))
                interrupt = Interrupt(key=f"{tid}:{iid}", id=iid, node=node, task_id=tid,
                                      payload=jsonable(item.get("value")))
                self.known[iid] = interrupt
                found.append(interrupt)
            self.add(InterruptEvent(**self._base(node, tid), interrupts=found))
            self._pending[tid] = [i.id for i in found]
            return
        self._pending.pop(tid, None)
        if error is not None:
            self.node_errors += 1
            error_type, message = _error_parts(error)
            self.add(ErrorEvent(**self._base(node, tid), error_type=error_type,
                                message=message, attempt=self._attempt.get(tid, 1)))
        else:
            now = self.clock.now()
            result = payload.get("result")
            patch = jsonable(result) if isinstance(result, dict) else (
                None if result is None else {"value": jsonable(result)})
            self.add(NodeEnd(**self._base(node, tid), patch=patch,
                             attempt=self._attempt.get(tid, 1),
                             started_at=self._started_at.get(tid, now), finished_at=now))
            self._ended.append((self.step, tid))

    def _edges_before(self, step: int) -> None:
        for ended_step, tid in self._ended:
            if ended_step >= step or tid in self._edged:
                continue
            self._edged.add(tid)
            source = self.task_nodes.get(tid, "?")
            for target in _targets(self._writes.get(tid, [])):
                self.add(EdgeTransition(**self._base(source, tid, ended_step),
                                        source=source, target=target))

    @property
    def pending(self) -> list[str]:
        """LangGraph ids of the interrupts this leg's tasks raised and did not get past."""
        return [iid for ids in self._pending.values() for iid in ids]

    # ---------------------------------------------------------------- saver calls

    def on_saver(self, info: SaverOp, payload: Any) -> None:
        """A saver call returned: a checkpoint was saved, or a task's writes."""
        self.flush()
        if info.checkpoint_ns:
            child = self._child(tuple(info.checkpoint_ns.split("|")))
            child.on_saver(replace(info, checkpoint_ns=""), payload)
            self._forward()
            return
        if info.op == "put":
            self.checkpoint_id = info.checkpoint_id
            step = info.step if isinstance(info.step, int) else self.step
            self.add(CheckpointSaved(**self._base(step=step),
                                     checkpoint_id=str(info.checkpoint_id)))

    # ---------------------------------------------------------------- retries

    def retry_error(self, namespace: tuple[str, ...], task_id: str, node: str, attempt: int,
                    error: BaseException | None) -> None:
        """Attempt ``attempt`` of a task failed and LangGraph retries it: an ``error`` with
        ``will_retry``."""
        self.flush()  # the step's starts come first
        if namespace:
            self._child(namespace).retry_error((), task_id, node, attempt, error)
            self._forward()
            return
        error_type, message = ("Exception", "the attempt failed") if error is None else (
            type(error).__name__, str(error))
        self.add(ErrorEvent(**self._base(node, task_id), error_type=error_type,
                            message=message, attempt=attempt, will_retry=True))

    def retry_start(self, namespace: tuple[str, ...], task_id: str, node: str,
                    attempt: int) -> None:
        """Attempt ``attempt`` (2 or more) of a task began: its ``node_start``."""
        self.flush()
        if namespace:
            self._child(namespace).retry_start((), task_id, node, attempt)
            self._forward()
            return
        self._attempt[task_id] = attempt
        self._started_at[task_id] = self.clock.now()
        self.add(NodeStart(**self._base(node, task_id), attempt=attempt))

    # ---------------------------------------------------------------- subgraphs

    def _child(self, namespace: tuple[str, ...]) -> LegRecorder:
        key = "|".join(namespace)
        child = self._children.get(key)
        if child is None:
            child = LegRecorder(self.clock, self.run_id, self._child_seq.get(key, 0), {},
                                self.task_nodes, self._writes, began=self.began)
            self._children[key] = child
        return child

    def _forward(self) -> None:
        """Log the subgraphs' new events, each as a ``subgraph`` custom event."""
        for key, child in self._children.items():
            namespace = key.split("|")
            names = [part.split(":", 1)[0] for part in namespace]
            node, _, task_id = namespace[0].partition(":")
            for event in child.events[self._forwarded.get(key, 0):]:
                wire = event.model_dump(mode="json")
                path = names + ([wire["node"]] if wire.get("node") else [])
                # at the child event's own time (a start is buffered until its step's
                # tasks are all known), never before what the log already holds
                at = max([event.time, *(e.time for e in self.events[-1:])])
                self.add(CustomEvent(**{**self._base(node, task_id or None), "time": at},
                                     channel="subgraph", value={"path": path,
                                                                "namespace": namespace,
                                                                "event": wire}))
            self._forwarded[key] = len(child.events)
            self._child_seq[key] = child.seq

    # ---------------------------------------------------------------- the end

    def _cancelled(self, message: str = "cancelled: another task of its step failed") -> None:
        """An ``error`` for each task this leg started that reported no result: LangGraph
        cancelled it when a task of its step failed, saved a ``CancelledError`` as its
        write, and runs it again on resume; it reports nothing of it (C2)."""
        for child in self._children.values():
            child._cancelled(message)
        if self._children:  # a subgraph task's own events come before its result (C2)
            self._forward()
        for tid in self._started_at:
            if tid in self._reported:
                continue
            self._reported.add(tid)
            self.node_errors += 1
            self.add(ErrorEvent(**self._base(self.task_nodes.get(tid), tid),
                                error_type="CancelledError",
                                message=message))

    def ended_last_step(self) -> list[str]:
        """The nodes whose tasks completed in this leg's last step."""
        return [e.node for e in self.events
                if isinstance(e, NodeEnd) and e.step == self.step and e.node]

    def run_end(self, status: str, error: BaseException | None = None,
                breakpoint: Breakpoint | None = None) -> None:
        """The leg's last events: a run-level ``error`` (when no node reported it) and
        ``run_end`` (with where the leg paused, for a static breakpoint)."""
        self.flush()
        if status == "failed":
            self._cancelled()
        elif status == "cancelled":
            self._cancelled(f"cancelled: the leg was cancelled at {self.clock.elapsed:g} s")
        if error is not None and self.node_errors == 0:
            self.add(ErrorEvent(**self._base(), error_type=type(error).__name__,
                                message=str(error)))
        self.add(RunEnd(**self._base(), status=status,
                        state=jsonable(self.values or {}),
                        error_type=None if error is None else type(error).__name__,
                        breakpoint=breakpoint))


def _targets(writes: list[tuple[str, Any]]) -> list[str]:
    out: list[str] = []
    for channel, value in writes:
        target = None
        if channel.startswith("branch:to:"):
            target = channel[len("branch:to:"):]
        elif channel.startswith("join:"):
            target = channel.rsplit(":", 1)[-1]
        elif channel == "__pregel_tasks" and type(value).__name__ == "Send":
            target = str(value.node)
        if target is not None and target not in out:
            out.append(target)
    return out


def _error_parts(error: Any) -> tuple[str, str]:
    if isinstance(error, BaseException):
        return type(error).__name__, str(error)
    text = str(error)
    head, _, rest = text.partition("(")
    if head.isidentifier() and rest.endswith(")"):
        return head, rest[:-1].strip("'\"")
    return "Exception", text
