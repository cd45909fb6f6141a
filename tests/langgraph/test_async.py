"""The harness from async code: ``atrace``/``aresume`` finish whatever else runs in the process.

Each test runs its inner session in a fresh interpreter with a timeout: a harness loop that
waits for a clock that never moves must fail the test, not hang the suite.
"""

from __future__ import annotations

import textwrap

import pytest

TIMEOUT = 60  # real seconds for a whole inner session (each run inside takes milliseconds)

GRAPH = '''
import asyncio
import operator
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt


class State(TypedDict, total=False):
    notes: Annotated[list[str], operator.add]
    verdict: str


async def flights(state):
    await asyncio.sleep(2 * 3600)
    return {"notes": ["flights"]}


async def hotels(state):
    await asyncio.sleep(30)
    return {"notes": ["hotels"]}


def review(state):
    return {"verdict": interrupt(state["notes"])}


def build():
    g = StateGraph(State)
    g.add_node("flights", flights)
    g.add_node("hotels", hotels)
    g.add_node("review", review)
    g.add_edge(START, "flights")
    g.add_edge(START, "hotels")
    g.add_edge(["flights", "hotels"], "review")
    g.add_edge("review", END)
    return g
'''

CONFTEST = '''
import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request):
    return request.param
'''


def _inner(pytester: pytest.Pytester, body: str, *args: str) -> pytest.RunResult:
    pytester.makepyfile(lg_graph=GRAPH)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_inner=textwrap.dedent(body))
    return pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "-q",
                                         *args, timeout=TIMEOUT)


def test_atrace_with_the_graph_runtime_fixture_finishes(pytester: pytest.Pytester) -> None:
    result = _inner(pytester, '''
        import pytest
        from lg_graph import build


        @pytest.mark.anyio
        async def test_review(graph_runtime):
            h = graph_runtime.langgraph(build())
            paused = await h.atrace({"notes": []})
            assert paused.result.status == "interrupted"
            assert h.clock.elapsed == 2 * 3600  # the two-hour wait was virtual
            done = await h.aresume("book it")
            assert done.result.data["verdict"] == "book it"
    ''')
    result.assert_outcomes(passed=2)  # asyncio and trio


def test_a_harness_after_a_graph_runtime_finishes_on_both_backends(
        pytester: pytest.Pytester) -> None:
    result = _inner(pytester, '''
        import pytest
        from lg_graph import build

        from pytest_graphflow import GraphRuntime
        from pytest_graphflow.langgraph import LangGraphHarness

        RUNTIME = GraphRuntime()  # installs the runtime's process-wide hooks


        @pytest.mark.anyio
        async def test_review():
            h = LangGraphHarness(build(), seed=3)
            paused = await h.atrace({"notes": []})
            assert paused.result.status == "interrupted"
            assert h.clock.elapsed == 2 * 3600
            done = await h.aresume("book it")
            assert done.result.status == "completed"


        def test_sync_trace_still_works():
            h = LangGraphHarness(build(), seed=3)
            assert h.trace({"notes": []}).result.status == "interrupted"
    ''')
    result.assert_outcomes(passed=3)

