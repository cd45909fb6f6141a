"""Middleware and guardrails around node tasks (issue 26; seed 004: "A middleware hook
threw: the run fails, the checkpoint stays Running, and recover re-runs only that task.
middleware is the middleware's id."): what each hook may do, their order, which failures
are whose, and bad declarations."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    Allow,
    Block,
    CompiledGraph,
    Graph,
    GraphRuntime,
    GraphValidationError,
    Guardrail,
    InvalidArgument,
    Middleware,
    MiddlewareFailed,
    NodeContext,
    NodeFailed,
    Retry,
    Rewrite,
    UndeclaredWrite,
    VirtualClock,
)

pytestmark = pytest.mark.anyio


class S(BaseModel):
    """A counter and a log of who touched it."""

    n: int = 0
    log: list[str] = []


def _one(fn: Any, *, middleware: Any = None, guardrails: Any = None, **node: Any
         ) -> CompiledGraph:
    g = Graph("one", S, middleware=middleware, guardrails=guardrails)
    g.node("work", fn, **node)
    g.edge(START, "work")
    g.edge("work", END)
    return g.compile()


def _rt(**kwargs: Any) -> GraphRuntime:
    return GraphRuntime(clock=VirtualClock(), seed=3, **kwargs)


def _add(state: S) -> dict[str, Any]:
    return {"n": state.n + 1, "log": [*state.log, "node"]}


async def test_before_changes_the_input_after_changes_the_result() -> None:
    mw = Middleware("shape", before=lambda s, ctx: {"n": 10},
                    after=lambda s, ctx, result: {**result, "log": [*result["log"], "after"]})
    done = await _rt().ainvoke(_one(_add, middleware=[mw]), {})
    assert (done.state.n, done.state.log) == (11, ["node", "after"])


async def test_a_wrap_may_skip_the_node_and_give_the_result_itself() -> None:
    called: list[str] = []

    def node(state: S) -> dict[str, Any]:
        called.append("node")
        return {"n": 1}

    async def cached(state: S, ctx: NodeContext, call_next: Any) -> Any:
        await anyio.sleep(5)  # virtual
        return {"n": 42}

    trace = await _rt().atrace(_one(node, middleware=[Middleware("cache", wrap=cached)]), {})
    assert (trace.result.state.n, called) == (42, [])
    end = next(e for e in trace.events if e.type == "node_end")
    # The hook ran in the task, on the virtual clock: its sleep is the task's time.
    assert end.finished_at - end.started_at == timedelta(seconds=5)  # type: ignore[attr-defined]


async def test_layers_run_runtime_first_then_graph_each_before_wrap_after() -> None:
    seen: list[str] = []

    def layer(name: str) -> Middleware:
        def wrap(state: S, ctx: NodeContext, call_next: Any) -> Any:
            seen.append(f"{name}.wrap>")
            result = call_next(state)
            seen.append(f"<{name}.wrap")
            return result
        return Middleware(name, before=lambda s, ctx: seen.append(f"{name}.before") and None,
                          wrap=wrap, after=lambda s, ctx, r: seen.append(f"{name}.after") and None)

    def node(state: S) -> None:
        seen.append("node")

    trace = await _rt(middleware=[layer("outer")]).atrace(
        _one(node, middleware=[layer("inner")]), {})
    assert seen == ["outer.before", "outer.wrap>", "inner.before", "inner.wrap>", "node",
                    "<inner.wrap", "inner.after", "<outer.wrap", "outer.after"]
    hooks = [(e.value["middleware"], e.value["hook"]) for e in trace.events
             if e.type == "custom"]  # type: ignore[attr-defined]
    assert hooks == [("outer", "before"), ("outer", "wrap"), ("inner", "before"),
                     ("inner", "wrap"), ("inner", "after"), ("outer", "after")]


async def test_nodes_limits_a_middleware_to_the_nodes_it_names() -> None:
    seen: list[str] = []
    g = Graph("two", S, middleware=[Middleware(
        "only-b", before=lambda s, ctx: seen.append(ctx.node), nodes=["b"])])
    g.node("a", _add)
    g.node("b", _add)
    g.edge(START, "a")
    g.edge("a", "b")
    g.edge("b", END)
    await _rt().ainvoke(g.compile(), {})
    assert seen == ["b"]


async def test_the_nodes_own_exception_through_a_wrap_is_the_nodes_failure_and_retried() -> None:
    tries: list[int] = []

    def flaky(state: S, ctx: NodeContext) -> dict[str, Any]:
        tries.append(ctx.attempt)
        if ctx.attempt < 3:
            raise ConnectionError("down")
        return {"n": 1}

    passthrough = Middleware("pass", wrap=lambda s, ctx, call_next: call_next(s))
    done = await _rt().ainvoke(_one(flaky, middleware=[passthrough],
                                    retry=Retry(attempts=3, backoff=1.0)), {})
    assert (done.status, tries) == ("completed", [1, 2, 3])
    failed = await _rt().ainvoke(_one(flaky, middleware=[passthrough]), {})
    assert isinstance(failed.error, NodeFailed)
    assert isinstance(failed.error.__cause__, ConnectionError)


async def test_a_wrap_that_raises_its_own_error_fails_as_middleware_not_retried() -> None:
    calls: list[int] = []

    def wrap(state: S, ctx: NodeContext, call_next: Any) -> Any:
        calls.append(ctx.attempt)
        try:
            return call_next(state)
        except ValueError as exc:
            raise RuntimeError("translated") from exc

    def bad(state: S) -> None:
        raise ValueError("node")

    failed = await _rt().ainvoke(_one(bad, middleware=[Middleware("tr", wrap=wrap)],
                                      retry=Retry(attempts=3), on_error=None), {})
    assert isinstance(failed.error, MiddlewareFailed)
    assert (failed.error.middleware, failed.error.hook, calls) == ("tr", "wrap", [1])


async def test_a_hook_failure_ignores_the_failure_route() -> None:
    """Seed 004: a hook that threw fails the run, whatever route the node has."""
    def boom(state: S, ctx: NodeContext) -> None:
        raise KeyError("cfg")

    g = Graph("routed", S, middleware=[Middleware("cfg", before=boom, nodes="work")])
    g.node("work", _add, on_error="fallback")
    g.node("fallback", _add)
    g.edge(START, "work")
    g.edge("work", END)
    g.edge("fallback", END)
    failed = await _rt().ainvoke(g.compile(), {})
    assert failed.status == "failed"
    assert isinstance(failed.error, MiddlewareFailed)
    assert failed.error.middleware == "cfg"


async def test_guardrails_run_in_order_on_the_rewritten_patch() -> None:
    seen: list[Any] = []

    def double(state: S, ctx: NodeContext, patch: Any) -> Any:
        seen.append(dict(patch))
        return Rewrite({**patch, "n": patch["n"] * 2})

    def look(state: S, ctx: NodeContext, patch: Any) -> Any:
        seen.append(dict(patch))
        return Allow()

    done = await _rt(guardrails=[Guardrail("double", double)]).ainvoke(
        _one(_add, guardrails=[Guardrail("look", look)]), {})
    assert done.state.n == 2
    assert seen == [{"n": 1, "log": ["node"]}, {"n": 2, "log": ["node"]}]


def _boom(*args: Any) -> Any:
    raise RuntimeError("hook")


@pytest.mark.parametrize(("build", "message"), [
    pytest.param(lambda: Middleware(""), "Middleware", id="empty-middleware-id"),
    pytest.param(lambda: Middleware("m"), "at least one hook", id="no-hook"),
    pytest.param(lambda: Middleware("m", before=5), "before=5 is not callable",
                 id="hook-not-callable"),
    pytest.param(lambda: Middleware("m", after=_boom, nodes=[]), "at least one node",
                 id="empty-nodes"),
    pytest.param(lambda: Guardrail("g", "allow"), "check='allow' is not callable",
                 id="check-not-callable"),
    pytest.param(lambda: Block(""), "give the reason", id="block-without-reason"),
    pytest.param(lambda: Rewrite(5), "must be a dict", id="rewrite-not-a-dict"),
    pytest.param(lambda: Graph("g", S, middleware=[_boom]), "list of Middleware",
                 id="graph-middleware-not-middleware"),
    pytest.param(lambda: Graph("g", S, guardrails=Guardrail("g", _boom)), "list of Guardrail",
                 id="guardrails-not-a-list"),
    pytest.param(lambda: GraphRuntime(middleware=[Middleware("x", before=_boom)],
                                      guardrails=[Guardrail("x", _boom)]),
                 "ids ['x'] are used twice", id="id-twice"),
])
def test_bad_declarations_are_refused_naming_the_fix(build: Any, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message.replace("[", r"\[").replace("]", r"\]")):
        build()


@pytest.mark.parametrize(("hooks", "message"), [
    pytest.param({"middleware": [Middleware("m", before=_boom, nodes=["nope"])]},
                 "middleware 'm': nodes names 'nope'", id="unknown-node"),
    pytest.param({"guardrails": [Guardrail("g", _boom, nodes="nope")]},
                 "guardrail 'g': nodes names 'nope'", id="guardrail-unknown-node"),
    pytest.param({"middleware": [Middleware("m", wrap=lambda s, c, n: n(s))]},
                 "the sync wrap of middleware 'm' wraps async code", id="sync-wrap-async-node"),
])
def test_bad_hooks_fail_compile_listing_them(hooks: dict[str, Any], message: str) -> None:
    async def node(state: S) -> None:
        return None

    g = Graph("g", S, **hooks)
    g.node("work", node)
    g.edge(START, "work")
    g.edge("work", END)
    with pytest.raises(GraphValidationError, match=message):
        g.compile()


@pytest.mark.parametrize(("hooks", "failed_in", "cause"), [
    pytest.param({"middleware": [Middleware("m", before=lambda s, c: 5)]}, ("m", "before"),
                 "before returned 5", id="before-returns-a-number"),
    pytest.param({"middleware": [Middleware("m", before=lambda s, c: {"totl": 1})]},
                 ("m", "before"), "fields ['totl'] that the state S does not define",
                 id="before-changes-an-unknown-field"),
    pytest.param({"guardrails": [Guardrail("g", lambda s, c, p: True)]}, ("g", "check"),
                 "return Allow(), Block(reason) or Rewrite(patch)", id="check-returns-bool"),
    pytest.param({"guardrails": [Guardrail("g", _boom)]}, ("g", "check"), "hook",
                 id="check-throws"),
    pytest.param({"middleware": [Middleware("m", after=_boom)]}, ("m", "after"), "hook",
                 id="after-throws"),
])
async def test_a_hook_that_misbehaves_fails_the_run_naming_it(
    hooks: dict[str, Any], failed_in: tuple[str, str], cause: str
) -> None:
    failed = await _rt().ainvoke(_one(_add, **hooks), {})
    err = failed.error
    assert isinstance(err, MiddlewareFailed)
    assert (err.middleware, err.hook, err.node) == (*failed_in, "work")
    assert cause in str(err.__cause__)


async def test_a_rewrite_the_node_could_not_write_fails_like_the_nodes_own_patch() -> None:
    grow = Guardrail("grow", lambda s, c, p: Rewrite({"log": ["sneaky"]}))
    ok = await _rt().ainvoke(_one(lambda s: {"n": 1}, writes={"n"}), {})
    assert ok.status == "completed"
    failed = await _rt().ainvoke(_one(lambda s: {"n": 1}, guardrails=[grow], writes={"n"}), {})
    assert isinstance(failed.error, UndeclaredWrite)
    assert "log" in str(failed.error)
