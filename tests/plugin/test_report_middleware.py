"""The failure report knows a hook's failure (issue 26): a run that a middleware hook failed
(seed 004: "A middleware hook threw: the run fails, the checkpoint stays Running, and recover
re-runs only that task. middleware is the middleware's id.") or a guardrail blocked gets a
line naming the hook, the node and what to do; a node's own failure gets none."""

from __future__ import annotations

import pytest
from graphflow_plugin_helpers import Run, dedent

TESTS = dedent("""
    from pydantic import BaseModel
    from pytest_graphflow import END, START, Block, Graph, Guardrail, Middleware

    class S(BaseModel):
        refund: int = 0

    def broken(state, ctx):
        raise KeyError("api_key")

    def over(state, ctx, patch):
        return Block("refund over the limit")

    def graph(**hooks):
        g = Graph("refunds", S, **hooks)
        g.node("propose", lambda s: {"refund": 500})
        g.edge(START, "propose")
        g.edge("propose", END)
        return g.compile()

    def test_middleware(graph_runtime):
        trace = graph_runtime.trace(graph(middleware=[Middleware("auth", before=broken)]))
        assert trace.result.status == "completed"

    def test_guardrail(graph_runtime):
        trace = graph_runtime.trace(graph(guardrails=[Guardrail("limit", over)]))
        assert trace.result.status == "completed"

    def test_node(graph_runtime):
        def fails(state):
            raise KeyError("api_key")
        g = Graph("refunds", S)
        g.node("propose", fails)
        g.edge(START, "propose")
        g.edge("propose", END)
        assert graph_runtime.trace(g.compile()).result.status == "completed"
""")


@pytest.mark.parametrize("mode", ["short", "full"])
def test_the_report_names_the_hook_that_failed_the_run(graph_project: pytest.Pytester,
                                                       run: Run, mode: str) -> None:
    graph_project.makepyfile(test_hooks=TESTS)
    result = run(f"--graphflow-report={mode}", "test_hooks.py")
    result.assert_outcomes(failed=3)
    out = result.stdout.str()
    result.stdout.fnmatch_lines([
        "*- graphflow -*",
        "*: failed, * events",
        "*middleware: middleware 'auth' threw in its before hook around node 'propose' "
        "(task task-*): KeyError: 'api_key'. The run failed and its checkpoint keeps the "
        "batch: fix the hook, then recover(thread_id) re-runs only this task",
    ])
    result.stdout.fnmatch_lines([
        "*guardrail: guardrail 'limit' blocked the result of node 'propose' (task task-*): "
        "refund over the limit. *",
    ])
    assert out.count("middleware: middleware") == 1  # not for the node's own failure
    assert out.count("guardrail: guardrail") == 1
