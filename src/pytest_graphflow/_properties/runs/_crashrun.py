"""One run of a graph over a store a factory opens, reporting as it goes (internal).

Shared by the process-killing crash check (in a forked child that dies for real) and by its
in-process twin (where the "death" is a :class:`SimulatedCrash` and recovery reuses the store
object, as the in-process checks do). Each store operation is reported before it runs, each
acknowledged save after it returned, and every report carries the effectful calls completed so
far, so whoever watches knows exactly what happened before the death.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

__all__ = ["Killer", "run_child"]


class Killer:
    """A store proxy that reports each operation and dies at the chosen one."""

    def __init__(self, inner: Any, kill: dict[str, Any] | None,
                 report: Callable[[str, dict[str, Any]], None],
                 die: Callable[[], None]) -> None:
        self._inner = inner
        self._kill = kill
        self._report = report
        self._die = die
        self._counts: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name.startswith("_") or not callable(attr) or name == "bind_clock":
            return attr

        async def op(*args: Any, **kwargs: Any) -> Any:
            n = self._counts[name] = self._counts.get(name, 0) + 1
            self._report("op", {"op": name, "nth": n})
            kill = self._kill
            due = kill is not None and kill["op"] == name and kill["nth"] == n
            if due and kill is not None and kill["phase"] == "before":
                self._die()
            result = attr(*args, **kwargs)
            if hasattr(result, "__await__"):
                result = await result
            if due:
                self._die()
            if name == "save" and args:
                self._report("ack", {"checkpoint": summary(args[0])})
            return result

        return op


def summary(cp: Any) -> dict[str, Any]:
    """What the checks need of a checkpoint: id, where it resumes, what it holds as done."""
    return {"id": cp.id, "next_step": cp.next_step, "completed": sorted(cp.completed),
            "status": cp.status}


def effect_calls(graph: Any, calls: Any) -> list[list[Any]]:
    """``[node, task_id, step]`` of every completed call of a ``write``/``external`` node."""
    effectful = {n for n, s in graph.nodes.items() if s.effect in ("write", "external")}
    return [[c.node, c.task_id, c.step] for c in calls.calls
            if c.outcome == "ok" and c.node in effectful]


def answer_for(answers: dict[str, Any] | None, pending: Any) -> Any:
    """The answer for an interrupt: by ``Interrupt.key``, else by ``"<node>:<id>"``."""
    if not answers:
        return None
    if pending.key in answers:
        return answers[pending.key]
    return answers.get(f"{pending.node}:{pending.id}")


async def _drive(runtime: Any, graph: Any, input: Any, answers: dict[str, Any] | None, *,
                 run_id: str | None = None, pending: Any = None, max_legs: int = 50) -> Any:
    """Run (or resume ``run_id``) to the end, answering every interrupt by resuming."""
    from ..._graph._node import Resume

    resume = None if pending is None else Resume(
        answers={i.key: answer_for(answers, i) for i in pending})
    for _ in range(max_legs):
        if run_id is None:
            result = await runtime.ainvoke(graph, input)
        else:
            result = await runtime.aresume(run_id, resume, graph=graph)
        run_id = result.run_id
        if result.status != "interrupted":
            break
        resume = Resume(answers={k: answer_for(answers, i)
                                 for k, i in result.interrupts.items()})
    return result


def run_child(req: dict[str, Any], out: Any, recover: bool, *, die: Callable[[], None],
              store: Any = None) -> None:
    """Run (or, with ``recover``, recover) the run ``req`` describes, writing JSON lines to
    ``out``. ``store`` reuses a store object instead of opening one from the factory."""

    from ..._graph._refs import resolve_graph, resolve_ref
    from ..._time._clock import VirtualClock
    from ..strategies._instrument import CallLog, record_calls
    from ._deadlock import deadlock_in

    graph0 = resolve_graph(req["graph"])
    calls = CallLog()
    graph = record_calls(graph0, calls)
    answers = req.get("answers")
    clock = VirtualClock(datetime.fromisoformat(req["clock"])) if req.get("clock") \
        else VirtualClock()

    def report(kind: str, data: dict[str, Any]) -> None:
        data = {**data, "calls": effect_calls(graph0, calls), "now": clock.now().isoformat()}
        out.write(json.dumps({"kind": kind, **data}) + "\n")
        out.flush()

    opened = store is None
    if store is None:
        store = resolve_ref(req["factory"])(req["directory"])
    from ..._engine._runtime import GraphRuntime

    runtime = GraphRuntime(Killer(store, req.get("kill"), report, die), clock=clock,
                           seed=req["seed"])

    async def go() -> dict[str, Any]:
        if not recover:
            result = await _drive(runtime, graph, req.get("input"), answers)
            stuck = deadlock_in(result.error)
            return {"status": result.status, "state": result.data, "run_id": result.run_id,
                    "deadlock": None if stuck is None else str(stuck)}
        run_id = req["run_id"]
        acked = req.get("acked")
        present = None if acked is None else (await store.get(acked)) is not None
        cp = await store.latest(run_id)
        base = {"run_id": run_id, "from": None if cp is None else summary(cp),
                "present": present}
        if cp is None:
            result = await _drive(runtime, graph, req.get("input"), answers)
        elif cp.status in ("completed", "failed", "cancelled"):
            return {**base, "status": cp.status, "state": cp.state}
        else:
            result = await _drive(runtime, graph, req.get("input"), answers, run_id=run_id,
                                  pending=cp.interrupts if cp.status == "interrupted" else None)
        return {**base, "status": result.status, "state": result.data}

    try:
        from ..._time._loops import run_sync_owned

        result = run_sync_owned(go, runtime.clock)  # the loop the runtime owns, as invoke()
    finally:
        close = getattr(store, "close", None)
        if opened and callable(close):
            close()
    report("result", result)
