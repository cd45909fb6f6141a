"""Issue 10 — the wall-clock patch costs microseconds and is there only while a run is:
node code reads virtual time through a C-level patch (time-machine), code outside nodes reads
real time (or the user's own ``time_machine.travel`` / ``freeze_time``), nothing is left
patched after a run, and naive values follow the process's local time zone.

Nothing asserts a timing or an exact real instant; real time is compared with generous bounds.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
import time_machine
from freezegun import freeze_time
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, GraphRuntime, VirtualClock
from pytest_graphflow._time import _wallclock

START_AT = datetime(2001, 2, 3, 4, 5, 6, tzinfo=UTC)


class S(BaseModel):
    seen: dict[str, Any] = {}


def reads_graph(probe: Any = None) -> Any:
    async def reads(s: S) -> dict[str, Any]:
        await anyio.sleep(60)
        if probe is not None:
            probe()
        return {"seen": {"utc": datetime.now(UTC).isoformat(), "time": time.time(),
                         "naive": datetime.now().isoformat()}}

    g = Graph("reads", S)
    g.node("reads", reads).edge(START, "reads").edge("reads", END)
    return g.compile()


def not_patched() -> bool:
    return not _wallclock.active() and not time_machine.escape_hatch.is_travelling()


def test_no_patch_before_or_after_a_run(anyio_backend: str) -> None:
    assert not_patched()
    during: list[bool] = []
    rt = GraphRuntime(clock=VirtualClock(start=START_AT), seed=0, backend=anyio_backend)
    result = rt.invoke(reads_graph(lambda: during.append(_wallclock.active())))
    assert during == [True]
    assert not_patched()
    assert result.data["seen"]["utc"] == (START_AT + timedelta(minutes=1)).isoformat()
    assert result.data["seen"]["time"] == (START_AT + timedelta(minutes=1)).timestamp()


def test_patch_off_without_patch_wall_clock(anyio_backend: str) -> None:
    seen: list[bool] = []
    rt = GraphRuntime(clock=VirtualClock(start=START_AT, patch_wall_clock=False), seed=0,
                      backend=anyio_backend)
    result = rt.invoke(reads_graph(lambda: seen.append(_wallclock.active())))
    assert seen == [False]
    assert abs(result.data["seen"]["time"] - time.time()) < 3600  # real in node code


def test_user_travel_is_what_code_outside_nodes_reads() -> None:
    """A user's own ``time_machine.travel`` stays in force outside nodes during a run and
    after it; node code reads the run's virtual clock above it."""
    user_instant = datetime(2040, 6, 1, 12, 0, tzinfo=UTC)
    outside: list[datetime] = []

    def probe() -> None:
        # a worker thread not started through anyio has no node context: the user's time
        result: list[datetime] = []
        thread = threading.Thread(target=lambda: result.append(datetime.now(UTC)))
        thread.start()
        thread.join()
        outside.extend(result)

    with time_machine.travel(user_instant, tick=False):
        rt = GraphRuntime(clock=VirtualClock(start=START_AT), seed=0)
        result = rt.invoke(reads_graph(probe))
        assert datetime.now(UTC) == user_instant
        assert len(time_machine.traveller_stack) == 1  # ours is gone, the user's stays
    assert outside == [user_instant]
    assert result.data["seen"]["utc"] == (START_AT + timedelta(minutes=1)).isoformat()
    assert not_patched()


def test_user_freeze_time_started_between_runs_is_honoured() -> None:
    rt = GraphRuntime(clock=VirtualClock(start=START_AT), seed=0)
    first = rt.invoke(reads_graph())
    with freeze_time("2033-03-03 03:03:03"):
        second = rt.invoke(reads_graph())
        assert datetime.now() == datetime(2033, 3, 3, 3, 3, 3)
    third = rt.invoke(reads_graph())
    assert [r.data["seen"]["utc"] for r in (first, second, third)] == [
        (START_AT + timedelta(minutes=m)).isoformat() for m in (1, 2, 3)]
    assert not_patched()
    assert datetime.now().year >= 2026


def test_runs_in_threads_each_read_their_own_clock() -> None:
    """Two threads run at once, each on its own virtual clock: the shared patch answers each
    node task with its own run's time and is off once both are done."""
    barrier = threading.Barrier(2, timeout=30)
    results: dict[int, Any] = {}

    def worker(year: int) -> None:
        clock = VirtualClock(start=datetime(year, 1, 1, tzinfo=UTC))
        results[year] = GraphRuntime(clock=clock, seed=0).invoke(
            reads_graph(lambda: barrier.wait()))

    threads = [threading.Thread(target=worker, args=(y,)) for y in (2011, 2022)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {y: r.data["seen"]["utc"] for y, r in results.items()} == {
        2011: "2011-01-01T00:01:00+00:00", 2022: "2022-01-01T00:01:00+00:00"}
    assert not_patched()


NAIVE_SCRIPT = """
from datetime import UTC, datetime
import anyio, time
from pydantic import BaseModel
from pytest_graphflow import END, START, Graph, GraphRuntime, VirtualClock

class S(BaseModel):
    seen: dict = {}

def reads(s):
    return {"seen": {"naive": datetime.now().isoformat(), "utc": datetime.now(UTC).isoformat(),
                     "hour": time.localtime().tm_hour}}

g = Graph("tz", S)
g.node("reads", reads).edge(START, "reads").edge("reads", END)
clock = VirtualClock(start=datetime(2025, 1, 1, 12, tzinfo=UTC))
print(GraphRuntime(clock=clock, seed=0).invoke(g.compile()).data["seen"])
"""


@pytest.mark.parametrize(("tz", "naive", "hour"), [
    pytest.param("UTC", "2025-01-01T12:00:00", 12, id="utc"),
    pytest.param("America/New_York", "2025-01-01T07:00:00", 7, id="new-york"),
])
def test_naive_values_in_nodes_are_local_time(tz: str, naive: str, hour: int) -> None:
    """docs/determinism.md: naive ``datetime.now()`` in node code is the virtual instant in
    the process's time zone (as the real one is local); aware reads are the same everywhere."""
    env = {**os.environ, "TZ": tz}
    out = subprocess.run([sys.executable, "-c", NAIVE_SCRIPT], env=env, capture_output=True,
                         text=True, timeout=120, check=True).stdout
    assert out.strip() == str({"naive": naive, "utc": "2025-01-01T12:00:00+00:00",
                               "hour": hour})
