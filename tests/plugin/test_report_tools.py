"""The failure report knows a tool's failure (issue 26; seed 004: "A tool call failed the
run: the tool returned Fatal, or broke its contract (an update to a key it does not declare,
a question it does not declare). cause says which."): a run a tool failed gets a line naming
the tool, its cause and what to do; a run whose tool only raised gets none."""

from __future__ import annotations

import pytest
from graphflow_plugin_helpers import Run, dedent

TESTS = dedent("""
    from pydantic import BaseModel
    from pytest_graphflow import END, START, Fatal, Graph, tool

    class S(BaseModel):
        paid: int = 0

    @tool
    def charge(args):
        return Fatal("card declined")

    @tool
    def flaky(args):
        raise ConnectionError("reset")

    def graph(t):
        g = Graph("payments", S)
        g.node("pay", lambda s, ctx: ctx.call_tool(t, None))
        g.edge(START, "pay")
        g.edge("pay", END)
        return g.compile()

    def test_fatal(graph_runtime):
        assert graph_runtime.trace(graph(charge)).result.status == "completed"

    def test_raised(graph_runtime):
        assert graph_runtime.trace(graph(flaky)).result.status == "completed"
""")


def test_the_report_names_the_tool_that_failed_the_run(graph_project: pytest.Pytester,
                                                       run: Run) -> None:
    graph_project.makepyfile(test_inner_tool_report=TESTS)
    result = run("--graphflow-report=short", "test_inner_tool_report.py")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "*- graphflow -*",
        "*tool: tool 'charge' (call task-*:tool-0, node 'pay') returned Fatal: card declined. "
        "The run failed (cause='fatal'); give node 'pay' an on_error route to handle it, or "
        "fix the tool and resume the run",
    ])
    assert result.stdout.str().count("tool: tool") == 1  # not for the tool that raised
