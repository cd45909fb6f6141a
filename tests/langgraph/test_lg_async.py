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


AIO_SAVER = '''
    import hashlib
    import sqlite3

    import pytest
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from lg_graph import build

    from pytest_graphflow import GraphRuntime
    from pytest_graphflow.langgraph import FaultySaver, LangGraphHarness

    RUNTIME = GraphRuntime()


    @pytest.fixture
    def anyio_backend():
        return "asyncio"  # aiosqlite runs on asyncio


    async def run(path, seed):
        async with AsyncSqliteSaver.from_conn_string(str(path)) as inner:
            saver = FaultySaver(inner)
            h = LangGraphHarness(build(), seed=seed, saver=saver)
            paused = await h.atrace({"notes": []})
            assert paused.result.status == "interrupted"
            assert h.clock.elapsed == 2 * 3600
            done = await h.aresume("book it")
            assert done.result.data == {"notes": ["flights", "hotels"], "verdict": "book it"}
            assert await h.astate() == done.result.data
            assert all(c.outcome == "ok" for c in saver.calls)
        db = sqlite3.connect(path)
        rows = [db.execute(f"SELECT * FROM {table} ORDER BY 1, 2, 3, 4").fetchall()
                for table in ("checkpoints", "writes")]
        db.close()
        assert len(rows[0]) >= 4
        return "\\n".join(e.model_dump_json() for e in h.events).encode(), rows


    @pytest.mark.anyio
    async def test_same_seed_same_bytes(tmp_path):
        events, rows = await run(tmp_path / "first.db", seed=5)
        assert (events, rows) == await run(tmp_path / "again.db", seed=5)
        print("DIGEST", hashlib.sha256(events + repr(rows).encode()).hexdigest())
'''


def test_an_async_sqlite_saver_gives_the_same_bytes_in_two_processes(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # Events and stored rows, within a process and across two with other hash seeds
    # (LangGraph keeps edges and a join's seen nodes in sets; the harness orders them).
    digests = []
    for hash_seed in ("1", "2"):
        monkeypatch.setenv("PYTHONHASHSEED", hash_seed)
        result = _inner(pytester, AIO_SAVER, "-s")
        result.assert_outcomes(passed=1)
        digests += [line.split()[1] for line in result.outlines if line.startswith("DIGEST")]
    assert len(digests) == 2
    assert digests[0] == digests[1]
