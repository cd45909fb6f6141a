"""Issue 10 — installing pytest-graphflow changes nothing in a process until a runtime is used.

Each check runs in a fresh interpreter (``sys.executable``), since this test session has
imported and used everything already.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
import asyncio, json, sys, time, datetime
import anyio.to_thread
from anyio._backends import _asyncio as anyio_asyncio

before = {
    "asyncio.sleep": asyncio.sleep, "anyio sleep": anyio_asyncio.AsyncIOBackend.__dict__["sleep"],
    "to_thread": anyio.to_thread.run_sync, "time.time": time.time,
    "datetime": datetime.datetime,
}
def unchanged():
    now = {
        "asyncio.sleep": asyncio.sleep,
        "anyio sleep": anyio_asyncio.AsyncIOBackend.__dict__["sleep"],
        "to_thread": anyio.to_thread.run_sync, "time.time": time.time,
        "datetime": datetime.datetime,
    }
    return sorted(k for k in before if now[k] is not before[k])
def ours():
    return sorted(m for m in sys.modules if m.startswith("pytest_graphflow"))
report = {}
STEPS
print(json.dumps(report))
"""


def probe(steps: str) -> dict[str, object]:
    code = PROBE.replace("STEPS", steps)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def test_importing_the_package_patches_nothing_and_imports_no_trio() -> None:
    report = probe("""
import pytest_graphflow
report["changed"] = unchanged()
report["trio"] = "trio" in sys.modules
report["modules"] = ours()
""")
    assert report == {"changed": [], "trio": False,
                      "modules": ["pytest_graphflow", "pytest_graphflow.errors"]}


def test_importing_hypothesis_does_not_import_the_runtime() -> None:
    """The ``hypothesis`` entry point runs on ``import hypothesis``; it must not pull in the
    runtime (trio's own entry point may import trio: that is trio's, not ours)."""
    report = probe("""
import hypothesis
report["changed"] = unchanged()
report["runtime"] = [m for m in ours() if m.split(".")[1:2] in (["_engine"], ["_graph"],
                                                                  ["_time"], ["_stores"])]
""")
    assert report == {"changed": [], "runtime": []}


def test_the_pytest_entry_point_module_imports_no_runtime() -> None:
    report = probe("""
import pytest_graphflow.plugin
report["changed"] = unchanged()
report["engine"] = [m for m in ours() if "_engine" in m or "_time" in m]
""")
    assert report == {"changed": [], "engine": []}


def test_the_first_runtime_patches_the_sleeps_and_a_run_leaves_the_clock_real() -> None:
    report = probe("""
from pytest_graphflow import GraphRuntime, VirtualClock, Graph, START, END
from pydantic import BaseModel
class S(BaseModel):
    n: int = 0
g = Graph("one", S)
g.node("a", lambda s: {"n": s.n + 1}).edge(START, "a").edge("a", END)
rt = GraphRuntime(clock=VirtualClock(), seed=0)
report["after runtime"] = unchanged()
rt.invoke(g.compile())
report["after run"] = unchanged()
report["trio"] = "trio" in sys.modules
""")
    assert report == {"after runtime": ["anyio sleep", "asyncio.sleep", "to_thread"],
                      "after run": ["anyio sleep", "asyncio.sleep", "to_thread"],
                      "trio": False}


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_trio_sleep_is_intercepted_once_trio_is_used(backend: str) -> None:
    """trio is patched by the first run that meets it, also when trio was imported after the
    runtime was made."""
    report = probe(f"""
from pytest_graphflow import GraphRuntime, VirtualClock, Graph, START, END
from pydantic import BaseModel
class S(BaseModel):
    t: float = 0
rt = GraphRuntime(clock=VirtualClock(), seed=0, backend={backend!r})
import trio
async def node(s, ctx):
    await trio.sleep(3600) if {backend!r} == "trio" else None
    return {{"t": ctx.clock.elapsed}}
g = Graph("sleeps", S)
g.node("a", node).edge(START, "a").edge("a", END)
t0 = time.perf_counter()
report["t"] = rt.invoke(g.compile()).data["t"]
report["fast"] = time.perf_counter() - t0 < 60
report["patched"] = getattr(trio.sleep, "__wrapped__", None) is not None
""")
    assert report == {"t": 3600.0 if backend == "trio" else 0.0, "fast": True,
                      "patched": True}


def test_a_module_walk_under_freeze_time_imports_nothing_of_ours() -> None:
    """freezegun's start reads every attribute ``dir()`` lists in every module: the package's
    lazy names must not be listed, or the walk would import the runtime halfway through
    freezegun's patching (pydantic models built against ``FakeDatetime``)."""
    report = probe("""
import pytest_graphflow
from freezegun import freeze_time
with freeze_time("2030-01-01"):
    report["during"] = ours()
from pytest_graphflow import GraphRuntime, History, VirtualClock
report["usable"] = GraphRuntime(clock=VirtualClock(), seed=0).clock.start.year
""")
    assert report == {"during": ["pytest_graphflow", "pytest_graphflow.errors"],
                      "usable": 2025}


def test_dir_lists_the_public_names_without_importing_them() -> None:
    """``dir(pytest_graphflow)`` (a REPL's completion, ``help()``) lists what ``__all__``
    exports, and listing them imports none; reading one imports it as before."""
    report = probe("""
import pytest_graphflow
report["listed"] = dir(pytest_graphflow)
report["all"] = sorted(pytest_graphflow.__all__)
report["after_dir"] = ours()
report["graph"] = pytest_graphflow.Graph.__name__
""")
    assert report["listed"] == report["all"]
    assert {"Graph", "GraphRuntime", "assert_events", "errors", "__version__"} <= set(
        report["listed"])  # type: ignore[arg-type]
    assert report["after_dir"] == ["pytest_graphflow", "pytest_graphflow.errors"]
    assert report["graph"] == "Graph"
