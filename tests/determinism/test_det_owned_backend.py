"""SPEC §7: "Where the runtime owns the loop (sync API, or the plugin's backend),
fail_after/move_on_after and anyio.current_time() in nodes are virtual too."

``virtual_anyio_backend(name, clock)`` gives the anyio pytest plugin a loop on the test's
virtual clock; runs on that clock then treat the loop as their own.
"""

from __future__ import annotations

import pytest

CONFTEST = """
import pytest
from pytest_graphflow import virtual_anyio_backend

@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request, virtual_clock):
    return virtual_anyio_backend(request.param, virtual_clock)
"""

TEST = """
import anyio
import pytest
from pydantic import BaseModel
from pytest_graphflow import END, START, Graph

class S(BaseModel):
    cancelled: bool = False
    loop_seconds: float = 0

async def timers(state):
    started = anyio.current_time()
    with anyio.move_on_after(10) as scope:
        await anyio.sleep(3600)
    return {"cancelled": scope.cancelled_caught,
            "loop_seconds": round(anyio.current_time() - started, 3)}

g = Graph("timers", S)
g.node("timers", timers)
g.edge(START, "timers")
g.edge("timers", END)
graph = g.compile()

@pytest.mark.anyio
async def test_virtual_deadlines(graph_runtime, virtual_clock):
    trace = await graph_runtime.atrace(graph, {})
    assert trace.result.data == {"cancelled": True, "loop_seconds": 10.0}
    assert virtual_clock.elapsed == 10.0
"""

TEST_FOREIGN = TEST.replace("test_virtual_deadlines", "test_real_loop_deadlines").replace(
    '''    assert trace.result.data == {"cancelled": True, "loop_seconds": 10.0}
    assert virtual_clock.elapsed == 10.0''',
    '''    # On the anyio plugin's own loop the deadline is real: the virtual hour passes first.
    assert trace.result.data["cancelled"] is False
    assert virtual_clock.elapsed == 3600.0''')


def test_virtual_backend_makes_deadlines_in_nodes_virtual(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(TEST)
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=2)


def test_without_it_deadlines_in_nodes_stay_real(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST.replace(
        "return virtual_anyio_backend(request.param, virtual_clock)", "return request.param"))
    pytester.makepyfile(TEST_FOREIGN)
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=2)


def test_unknown_backend_is_refused() -> None:
    from pytest_graphflow import VirtualClock, virtual_anyio_backend

    with pytest.raises(ValueError, match="use 'asyncio' or 'trio'"):
        virtual_anyio_backend("curio", VirtualClock())
