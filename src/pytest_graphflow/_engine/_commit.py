"""Committing a superstep that ran to the end: merge, joins, next tasks, checkpoint, events."""

from __future__ import annotations

import operator
from typing import Any

from pydantic import BaseModel

from .._graph._builder import END, REPLAYED_EFFECTS, CompiledGraph, Join
from .._records._checkpoint import TaskRecord
from .._records._events import (
    Breakpoint,
    CheckpointSaved,
    EdgeTransition,
    RunEnd,
    error_message,
)
from ..errors import GraphflowError
from ._batch import PlainBatch
from ._halts import HaltHandler
from ._merge import merge_patches
from ._outcome import Outcome
from ._report import task_event_count, task_events, task_output
from ._results import StepState
from ._run_state import RunState
from ._writer import CheckpointWriter, LegEnd

__all__ = ["Committer"]


class Committer:
    """Turns a finished batch into the run's next position (SPEC §1's merge rules, C3, C7):
    the owner of the leg's :class:`~._run_state.Position`."""

    def __init__(
        self, run: RunState, writer: CheckpointWriter, end: LegEnd, halts: HaltHandler
    ) -> None:
        self.run = run
        self.writer = writer
        self.end = end
        self.halts = halts

    async def commit_one(self, out: Outcome) -> list[Any]:
        """``commit`` for one completed task when no events are recorded (hot path).

        It keeps exactly the numbering of the general path: ``seq`` advances by the events
        that path would have built.
        """
        run = self.run
        pos, numbers, spec = run.pos, run.numbers, run.spec
        graph, step = spec.graph, pos.step
        record = out.record
        node = record.node
        patch = out.patch
        codec = graph.codec
        model: BaseModel | None = None
        if not patch:
            new_state = pos.state
        elif out.merged is not None:
            new_state = out.merged  # merged and checked already, to decide its branches
        elif codec.plain and not graph.reducers.keys() & patch.keys():
            # Plain writes, each already checked as the node wrote it: nothing left to do.
            new_state = {**pos.state, **patch}
        else:
            patches = [(node, patch)]
            try:
                new_state = merge_patches(graph, pos.state, patches, parallel=False)
                new_state, model = codec.validate(new_state, patches)
            except GraphflowError as exc:
                return await self.halts.halt([out], [], batch_error=exc)
        seq = 2 + len(out.custom) + len(out.targets)  # node_start, custom..., node_end, edges
        arrivals = pos.arrivals
        joins = graph.joins
        scheduled: list[str] = []
        if joins:
            arrivals = {k: list(v) for k, v in arrivals.items()}
            touched = graph.joins_from.get(node, ()) if out.goto is None else ()
            for join in touched:
                got = arrivals.setdefault(join.key, [])
                if node not in got:
                    got.append(node)
                seq += 1
            # Only a join that got an arrival now can have become complete.
            for join in touched:
                arrived = arrivals.get(join.key)
                if arrived is not None and join.source_set.issubset(arrived):
                    del arrivals[join.key]
                    if join.target != END:
                        scheduled.append(join.target)
        for target in out.targets:
            if target != END:
                scheduled.append(target)
        if len(scheduled) > 1:
            order = graph.nodes
            scheduled = sorted(dict.fromkeys(scheduled), key=lambda n: order[n].index)
        next_tasks = [numbers.new_task(name) for name in scheduled]
        pos.visited = visited = pos.visited.extend((node,))
        finished = not next_tasks and not arrivals
        cid: str | None = None
        if graph.every_step or out.spec.checkpoint or (
                finished and (numbers.parent_id is not None or spec.thread_explicit)):
            cid = numbers.next_checkpoint_id()
            seq += 1
        if finished:
            seq += 1
        numbers.skip(seq)
        pos.state = new_state
        pos.model = model
        pos.arrivals = arrivals
        pos.tasks = next_tasks
        pos.step = step + 1
        if cid is not None:
            await self.writer.save(cid, step=step, next_step=step + 1, tasks=next_tasks,
                             node_ids=[node], status="completed" if finished else "running",
                             state=new_state, visited=visited, arrivals=arrivals)
        if finished:
            await self.end.finish("completed", None)
        return []

    async def commit_plain(self, batch: PlainBatch) -> list[Any]:
        """``commit`` for a batch every task of which returned a plain patch, when no events
        are recorded (``invoke``'s lean leg): the same merge, join arrivals, numbering, next
        tasks and checkpoints, read from the batch's lists in declared order, with no
        outcome per task (a merge that fails builds them, for the halt)."""
        run = self.run
        pos, numbers = run.pos, run.numbers
        graph, step = run.spec.graph, pos.step
        tasks = batch.tasks
        names = batch.names
        codec = graph.codec
        reducers, on_write, folds = graph.reducers, codec.checked_on_write, _list_folds(graph)
        # One pass over the batch, in declared order: its patches merged the common way (a
        # plain schema, every written value checked as its node wrote it, each key written
        # by one task or folded by a reducer that adds lists: what merge_patches and
        # validate would give), its events counted, its targets and join arrivals. Anything
        # else (``fast`` false) is merged again from the start by merge_patches.
        fast = codec.plain and not (len(tasks) == 1 and 0 in batch.merged)
        new: dict[str, Any] = dict(pos.state) if fast else pos.state
        written: dict[str, None] = {}  # keys without a reducer, written once so far
        # List keys whose list in ``new`` this pass built (each checked on write, folded by
        # a pure list reducer): a later list written to one extends it.
        owned: dict[str, None] = {}
        joins, joins_from = graph.joins, graph.joins_from
        arrivals = {k: list(v) for k, v in pos.arrivals.items()} if pos.arrivals else {}
        scheduled: dict[str, None] = {}
        # The joins that got an arrival, by key: the join and its arrivals in order, as the
        # keys of a dict (O(1) "arrived already?"; the checkpoint's list is made from it).
        touched: dict[str, tuple[Join, dict[str, None]]] = {}
        # The events invoke() numbers and does not build, as commit counts them: a task's
        # node_start and node_end, an edge a target and one a join it arrives at.
        count = 2 * len(names)
        for node, patch, picked in zip(names, batch.patches, batch.targets, strict=True):
            if fast and patch:
                for key in patch:
                    value = patch[key]
                    if key in owned and type(value) is list:
                        new[key] += value  # (the list this pass built)
                        continue
                    if key not in on_write:
                        fast = False  # validate checks its merged value
                        break
                    if key in reducers:
                        if key not in owned and key in folds and type(value) is list \
                                and key in new and type(new[key]) is list:
                            new[key] = new[key] + value  # what the reducer gives
                            owned[key] = None
                            continue
                        fast = False
                        break
                    if key in written:
                        fast = False  # two writers: merge_patches says which conflict
                        break
                    written[key] = None
                    new[key] = value
            for target in picked:
                count += 1  # its edge
                if target != END and target not in scheduled:
                    scheduled[target] = None
            if joins and node in joins_from:
                for join in joins_from[node]:
                    count += 1  # the edge to the join's target
                    key = join.key
                    if key in touched:
                        got = touched[key][1]
                    else:
                        got = dict.fromkeys(arrivals[key]) if key in arrivals else {}
                        touched[key] = (join, got)
                    got[node] = None  # (an arrival already there keeps its place)
        model: BaseModel | None = None
        if fast:
            new_state = new
        elif len(tasks) == 1 and 0 in batch.merged:
            new_state = batch.merged[0]  # merged and checked already, to decide its branches
        else:
            blame = list(zip(names, batch.patches, strict=True))
            try:
                new_state = merge_patches(graph, pos.state, blame, parallel=len(tasks) > 1)
                new_state, model = codec.validate(new_state, blame)
            except GraphflowError as exc:
                return await self.halts.halt(batch.outcomes(), [], batch_error=exc)
        numbers.skip(count)
        # Only a join that got an arrival in this batch can have become complete.
        for key, (join, got) in touched.items():
            if got.keys() >= join.source_set:
                arrivals.pop(key, None)
                if join.target != END and join.target not in scheduled:
                    scheduled[join.target] = None
            else:
                arrivals[key] = list(got)
        if len(scheduled) > 1:
            order = graph.nodes
            following: Any = sorted(scheduled, key=lambda n: order[n].index)
        else:
            following = scheduled
        new_task = numbers.new_task
        next_tasks = [new_task(node) for node in following]
        return await self._close(step, names, new_state, model, [], arrivals, next_tasks, names,
                                 [])

    async def commit(self, outcomes: list[Outcome]) -> list[Any]:
        """Merge a batch that ran to the end, schedule the next one, save, report."""
        run = self.run
        pos, numbers, spec = run.pos, run.numbers, run.spec
        graph, step = spec.graph, pos.step
        tasks = pos.tasks
        if len(outcomes) == 1:
            done = outcomes if outcomes[0].kind == "done" else []
        else:
            done = [o for o in outcomes if o.kind == "done"]
        patches = [(o.record.node, o.patch) for o in done]
        model: BaseModel | None = None
        if len(tasks) == 1 and done and done[0].merged is not None:
            new_state = done[0].merged  # merged and checked already, to decide its branches
        else:
            try:
                new_state = merge_patches(graph, pos.state, patches, parallel=len(tasks) > 1)
                new_state, model = graph.codec.validate(new_state, patches)
            except GraphflowError as exc:
                return await self.halts.halt(outcomes, [], batch_error=exc)

        events: list[Any] = []
        e = numbers.event
        joins = graph.joins
        arrivals = {k: list(v) for k, v in pos.arrivals.items()} if pos.arrivals else {}
        scheduled: dict[str, dict[str, Any] | None] = {}
        # The joins that got an arrival in this batch, each with the set of its arrivals
        # (the list in ``arrivals`` keeps their order for the checkpoint; the set answers
        # "arrived already?" in O(1), so a batch of N sources costs O(N), not O(N²)).
        touched: dict[Join, set[str]] = {}

        def arrive(join: Join, node: str) -> None:
            got = touched.get(join)
            if got is None:
                got = touched[join] = set(arrivals.get(join.key, ()))
            if node not in got:
                got.add(node)
                arrivals.setdefault(join.key, []).append(node)
        expansions: list[Outcome] = []
        # invoke() wants no events: a task's own are only numbered (seq), the same way.
        recording = spec.record_events
        for out in outcomes:
            record = out.record
            node = record.node
            if recording:
                task_events(run, out, step, events)
            elif out.kind == "done" and out.expand is None:
                # invoke(): the task's events and edges are numbered, not built (as
                # task_event_count and the edges below count them).
                count = 2 + 2 * len(out.failed_attempts) + len(out.custom) + len(out.targets)
                for picked in out.targets:
                    if picked != END and picked not in scheduled:
                        scheduled[picked] = None
                if joins and out.goto is None:
                    for join in graph.joins_from.get(node, ()):
                        arrive(join, node)
                        count += 1
                numbers.skip(count)
                continue
            else:
                numbers.skip(task_event_count(out))
            if out.kind == "error":  # routed failure (C2: error, then the route's edge)
                target = out.spec.on_error
                assert target is not None
                out.routed_to = target
                if recording:
                    events[-1].__dict__["routed_to"] = target
                events.append(e(EdgeTransition, step, node=node, task_id=record.task_id,
                                source=node, target=target))
                scheduled[target] = {"node": node, "error_type": type(out.error).__name__,
                                     "message": error_message(out.error)}
                continue
            for target in out.targets:
                events.append(e(EdgeTransition, step, node=node, task_id=record.task_id,
                                source=node, target=target))
                if target != END and target not in scheduled:
                    scheduled[target] = None
            if out.expand is not None:
                expansions.append(out)
                events.append(e(EdgeTransition, step, node=node, task_id=record.task_id,
                                source=node, target=out.expand["node"]))
            if joins and out.goto is None and (out.expand is None or out.route_expand):
                for join in graph.joins_from.get(node, ()):
                    arrive(join, node)
                    events.append(e(EdgeTransition, step, node=node, task_id=record.task_id,
                                    source=node, target=join.target))
        # Only a join that got an arrival in this batch can have become complete.
        for join, got in touched.items():
            if got >= join.source_set:
                del arrivals[join.key]
                if join.target != END:
                    scheduled.setdefault(join.target, None)

        node_ids = [t.node for t in tasks]
        saves: list[tuple[str, dict[str, Any]]] = []
        before_id: str | None = None
        if expansions:
            # C7: saved before the expansion's tasks run; the expanding node is not completed.
            before_id = numbers.next_checkpoint_id()
            expanding = {o.record.task_id for o in expansions}
            kept = {o.record.task_id: task_output(o) for o in done
                    if o.record.task_id not in expanding and o.spec.effect in REPLAYED_EFFECTS}
            saves.append((before_id, {
                "step": step, "next_step": step, "tasks": list(tasks), "completed": kept,
                "node_ids": node_ids, "status": "running", "state": pos.state,
                "visited": pos.visited, "arrivals": pos.arrivals,
            }))
        order = graph.nodes
        if len(scheduled) > 1:
            names: Any = sorted(scheduled, key=lambda n: order[n].index)
        else:
            names = scheduled
        next_tasks = [numbers.new_task(node, scheduled[node]) for node in names]
        if expansions:
            for out in expansions:
                assert out.expand is not None
                numbers.expanded(out.expand["node"], out.expand["items"], before_id, next_tasks)
            # In declared node order (a stable sort: an expansion's tasks keep their items'
            # order); one look first, as an expansion's thousands of tasks are often in it.
            last = -1
            for task in next_tasks:
                index = order[task.node].index
                if index < last:
                    next_tasks.sort(key=lambda t: order[t.node].index)
                    break
                last = index

        return await self._close(step, node_ids, new_state, model, events, arrivals, next_tasks,
                                 [o.record.node for o in done], saves)

    async def _close(
        self,
        step: int,
        node_ids: list[str],
        new_state: dict[str, Any],
        model: BaseModel | None,
        events: list[Any],
        arrivals: dict[str, list[str]],
        next_tasks: list[TaskRecord],
        done: list[str],
        saves: list[tuple[str, dict[str, Any]]],
    ) -> list[Any]:
        """The end of a batch's commit, once merged and its next tasks made: the nodes that
        completed (``done``, declared order; ``node_ids``: the batch's) join the visited
        ones, the checkpoints (``saves`` has the one before an expansion) and the step's
        last events, the new position, and the leg's end if the run finished or a
        breakpoint after pauses it."""
        run = self.run
        pos, numbers, spec = run.pos, run.numbers, run.spec
        graph = spec.graph
        order = graph.nodes
        e = numbers.event
        if done:
            pos.visited = visited = pos.visited.extend(done)
        else:
            visited = pos.visited
        if run.parent_command is not None:  # a child run ends at Command(graph=PARENT)
            next_tasks, arrivals = [], {}
        finished = not next_tasks and not arrivals
        # A breakpoint after a node of this batch pauses the run once the batch committed.
        break_after = spec.break_after
        paused = [] if finished or not break_after else list(dict.fromkeys(
            node for node in done if node in break_after))
        # Per-node settings: under a policy that does not save every step, each node of the
        # batch with checkpoint=True gets the checkpoint taken after it, labelled by it, in
        # declared order (so the first refused is the first declared: seed 000, C6).
        per_node = [] if graph.every_step else _per_node(done, order)
        want = graph.every_step or bool(paused) or (finished and (
            numbers.parent_id is not None or spec.thread_explicit)) or bool(per_node)
        step_cp: str | None = None
        if want:
            status = "completed" if finished else "interrupted" if paused else "running"
            labels: list[str | None] = list(per_node) or [None]
            for label in labels:
                step_cp = numbers.next_checkpoint_id()
                saves.append((step_cp, {
                    "step": step, "next_step": step + 1, "tasks": next_tasks, "completed": {},
                    "node_ids": node_ids, "node_id": label, "status": status,
                    "state": new_state, "visited": visited, "arrivals": arrivals,
                }))
        for cid, _ in saves:
            events.append(e(CheckpointSaved, step, checkpoint_id=cid))
        pos.state = new_state
        pos.model = model
        pos.arrivals = arrivals
        pos.tasks = next_tasks
        pos.completed = {}
        pos.step = step + 1
        events.append(StepState(step, new_state, step_cp))
        breakpoint: Breakpoint | None = None
        if finished:
            events.append(e(RunEnd, step, status="completed", state=run.copy_state(new_state)))
        elif paused:
            breakpoint = Breakpoint(when="after", nodes=paused)
            events.append(e(RunEnd, step, status="interrupted",
                            state=run.copy_state(new_state), breakpoint=breakpoint))
        for cid, fields in saves:
            await self.writer.save(cid, **fields)
        if finished:
            await self.end.finish("completed", None)
        elif breakpoint is not None:
            await self.end.finish("interrupted", None, breakpoint=breakpoint)
        return run.stamp(events)


def _per_node(done: list[str], order: dict[str, Any]) -> list[str]:
    """The nodes of a batch that asked for a checkpoint of their own, in declared order."""
    asked = {node for node in done if order[node].checkpoint}
    return sorted(asked, key=lambda n: order[n].index) if asked else []


_FOLDS = (operator.add, operator.concat)
"""Reducers that add two lists (a pure one gives ``a + b``)."""


def _list_folds(graph: CompiledGraph) -> frozenset[str]:
    """The keys of ``graph`` whose reducer adds lists and is pure (its next write to a list
    it built extends it: what ``merge_patches`` does), worked out once per graph."""
    found: frozenset[str] | None = graph.__dict__.get("_list_folds")
    if found is None:
        found = graph.__dict__["_list_folds"] = frozenset(
            key for key, reducer in graph.reducers.items()
            if reducer.fn in _FOLDS and reducer.pure)
    return found
