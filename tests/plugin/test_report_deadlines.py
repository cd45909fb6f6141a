"""The failure report knows an expired question (issue 26, "Deadlines on human input"): a
failing test whose run fired a deadline gets a line naming the question, when it expired
and what the run did instead; a run with no timeout route also gets the DeadlineExpired
line that says how to give it one."""

from __future__ import annotations

import pytest
from graphflow_plugin_helpers import Run, dedent

TESTS = dedent("""
    from datetime import timedelta

    from pydantic import BaseModel
    from pytest_graphflow import END, START, Graph, interrupt

    class S(BaseModel):
        decision: str = ""
        escalated: bool = False

    def graph(route):
        g = Graph("approval", S)
        g.node("approve", lambda s: {"decision": interrupt("ok?", id="ok",
                                                           deadline=timedelta(days=3))})
        g.edge(START, "approve").edge("approve", END)
        if route:
            g.node("escalate", lambda s: {"escalated": True}).edge("escalate", END)
        return g.compile(on_timeout=route)

    def fire(graph_runtime, route):
        trace = graph_runtime.trace(graph(route))
        graph_runtime.clock.advance(timedelta(days=3).total_seconds())
        return graph_runtime.expire_due()

    def test_routed(graph_runtime):
        (fired,) = fire(graph_runtime, "escalate")
        assert fired.data["decision"] == "approved"

    def test_unrouted(graph_runtime):
        (fired,) = fire(graph_runtime, None)
        assert fired.status == "completed"
""")


@pytest.mark.parametrize("mode", ["short", "full"])
def test_the_report_names_the_expired_question(graph_project: pytest.Pytester, run: Run,
                                               mode: str) -> None:
    graph_project.makepyfile(test_expiring_approvals=TESTS)
    result = run(f"--graphflow-report={mode}", "test_expiring_approvals.py")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "*deadline: question task-*:ok of node 'approve' expired at 2025-01-04T00:00:00+00:00 "
        "(fired at 2025-01-04T00:00:00+00:00); the task went to its on_timeout node "
        "'escalate'",
    ])
    result.stdout.fnmatch_lines([
        "*deadline: question task-*:ok of node 'approve' expired at *; the graph has no "
        "on_timeout route, so the task failed with DeadlineExpired",
        "*deadline: run run-*: question 'task-*:ok' expired before it was answered, and the "
        "graph has no timeout route, so the run failed. Give the graph one with "
        "compile(on_timeout=<node> or TimeoutAnswer(value)), or recover the run to ask again",
    ])
