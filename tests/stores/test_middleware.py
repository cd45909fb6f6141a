"""Seed 004's middleware failure, on every store and both anyio backends: "A middleware hook
threw: the run fails, the checkpoint stays Running, and recover re-runs only that task.
middleware is the middleware's id." Hooks are replayed or skipped on resume exactly like the
node they wrap."""

from __future__ import annotations

import operator
from collections import Counter
from typing import Annotated, Any

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    CompiledGraph,
    Graph,
    GraphRuntime,
    Middleware,
    MiddlewareFailed,
    NodeContext,
    Resume,
    VirtualClock,
    assert_events,
    interrupt,
)

pytestmark = pytest.mark.anyio

SEED_MIDDLEWARE = ("A middleware hook threw: the run fails, the checkpoint stays Running, and "
                   "recover re-runs only that task. middleware is the middleware's id.")


class S(BaseModel):
    """Items collected by a fan-out, and their total."""

    items: Annotated[list[str], operator.add] = []
    total: int = 0


class HookBroke(Exception):
    """The middleware's own exception."""


def _fan_out(calls: Counter[str], middleware: list[Middleware]) -> CompiledGraph:
    """``plan -> [a, b, c] -> total``: the parallel batch is where "only that task" shows."""

    def node(name: str) -> Any:
        def run(state: S) -> dict[str, Any]:
            calls[name] += 1
            return {"items": [name]}
        return run

    def total(state: S) -> dict[str, Any]:
        calls["total"] += 1
        return {"total": len(state.items)}

    g = Graph("fan", S, middleware=middleware)
    g.node("plan", node("plan"))
    for name in ("a", "b", "c"):
        g.node(name, node(name))
    g.node("total", total)
    g.edge(START, "plan")
    g.edge("plan", ["a", "b", "c"])
    g.edge(["a", "b", "c"], "total")
    g.edge("total", END)
    return g.compile()


def _throwing_before(hook_calls: list[str], throw_at: int | None) -> Middleware:
    def before(state: S, ctx: NodeContext) -> None:
        hook_calls.append(ctx.node)
        if len(hook_calls) == throw_at:
            raise HookBroke(f"call {throw_at}")
    return Middleware("flaky", before=before)


def _throwing_wrap(hook_calls: list[str], throw_at: int | None) -> Middleware:
    async def wrap(state: S, ctx: NodeContext, call_next: Any) -> Any:
        hook_calls.append(ctx.node)
        nth = len(hook_calls)
        await anyio.sleep(1)  # virtual time, in the task
        if nth == throw_at:
            raise HookBroke(f"call {throw_at}")
        return await call_next(state)
    return Middleware("flaky", wrap=wrap)


@pytest.mark.parametrize("make", [_throwing_before, _throwing_wrap],
                         ids=["sync-before", "async-wrap"])
async def test_a_middleware_that_throws_on_its_third_call_fails_and_recover_reruns_that_task(
    make_any_store: Any, make: Any
) -> None:
    assert MiddlewareFailed.__doc__ is not None
    assert " ".join(MiddlewareFailed.__doc__.split()).startswith(SEED_MIDDLEWARE)
    # The run without the failure.
    clean_calls: Counter[str] = Counter()
    clean_rt = GraphRuntime(make_any_store(), clock=VirtualClock(), seed=8)
    clean = await clean_rt.ainvoke(_fan_out(clean_calls, [make([], None)]), {},
                                   thread_id="clean")
    assert clean.status == "completed"

    calls: Counter[str] = Counter()
    hook_calls: list[str] = []
    store = make_any_store()
    rt = GraphRuntime(store, clock=VirtualClock(), seed=7)
    graph = _fan_out(calls, [make(hook_calls, 3)])
    trace = await rt.atrace(graph, {}, thread_id="t")
    failed = trace.result
    assert failed.status == "failed"
    err = failed.error
    assert isinstance(err, MiddlewareFailed)
    assert err.middleware == "flaky"
    assert isinstance(err.__cause__, HookBroke)
    assert err.error is err.__cause__
    broken = hook_calls[2]  # the task whose hook threw: the second of the parallel batch
    assert broken in ("a", "b", "c")
    hook = "wrap" if make is _throwing_wrap else "before"
    assert (err.node, err.hook) == (broken, hook)
    assert_events(trace.events, [
        "...", f"node_start:{broken}", "custom:middleware", f"error:{broken}",
        "checkpoint_saved", "run_end",
    ])
    finished = [n for n in ("a", "b", "c") if n != broken and calls[n] == 1]
    # The checkpoint keeps the batch with what finished, so nothing else runs again.
    last = (await rt.history(failed.run_id))[-1]
    assert sorted(o.node for o in last.completed.values()) == sorted(finished)

    hook_calls_before = len(hook_calls)
    done = await GraphRuntime(store, clock=VirtualClock(), seed=7).arecover("t", graph=graph)
    assert done.status == "completed"
    assert calls == clean_calls  # recover re-ran only that task: every node ran once
    assert hook_calls[hook_calls_before:] == [broken, "total"]
    assert done.state == clean.state


class Paid(BaseModel):
    """A payment and an approval."""

    paid: int = 0
    approved: Any = None


async def test_hooks_are_replayed_or_skipped_on_resume_exactly_like_their_node(
    make_any_store: Any,
) -> None:
    """C9: after an interrupt, the batch's completed ``external`` node is replayed from its
    output — its middleware does not run again either — while the interrupted node runs
    again from the top, its middleware with it."""
    hook_calls: list[str] = []
    node_calls: Counter[str] = Counter()

    def log(state: Paid, ctx: NodeContext) -> None:
        hook_calls.append(ctx.node)

    def pay(state: Paid) -> dict[str, Any]:
        node_calls["pay"] += 1
        return {"paid": 10}

    def ask(state: Paid) -> dict[str, Any]:
        node_calls["ask"] += 1
        return {"approved": interrupt("ok?", id="ok")}

    g = Graph("pay", Paid, middleware=[Middleware("log", before=log)])
    g.node("pay", pay, effect="external")
    g.node("ask", ask, effect="human")
    g.edge(START, ["pay", "ask"])
    g.edge(["pay", "ask"], END)
    graph = g.compile()
    store = make_any_store()
    rt = GraphRuntime(store, clock=VirtualClock(), seed=2)
    paused = await rt.ainvoke(graph, {}, thread_id="t")
    assert paused.status == "interrupted"
    assert sorted(hook_calls) == ["ask", "pay"]
    trace = await GraphRuntime(store, clock=VirtualClock(), seed=2).aresume_trace(
        paused.run_id, Resume("yes"), graph=graph)
    assert trace.result.status == "completed"
    assert sorted(hook_calls) == ["ask", "ask", "pay"]
    assert node_calls == {"pay": 1, "ask": 2}
    resumed = [e for e in trace.events if e.type in ("node_end", "custom")]
    assert [(e.type, e.node) for e in resumed if e.node == "pay"] == [("node_end", "pay")]
    assert next(e for e in resumed if e.node == "pay").replayed  # type: ignore[attr-defined]
    assert [(e.type, e.node) for e in resumed if e.node == "ask"] == [
        ("custom", "ask"), ("node_end", "ask")]
    assert trace.result.state.approved == "yes"
