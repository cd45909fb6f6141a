"""LangGraph is only needed for the extra: without it the package and its runtime work, and
``pytest_graphflow.langgraph`` says how to install it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

_HIDE = """
import sys

class HideLangGraph:
    def find_spec(self, name, path=None, target=None):
        if name == "langgraph" or name.startswith(("langgraph.", "langchain")):
            raise ImportError(f"{name} is hidden for this test")
        return None

sys.meta_path.insert(0, HideLangGraph())
"""

_WITHOUT = _HIDE + """
import pytest_graphflow, pytest_graphflow.plugin, pytest_graphflow.invariants
from pytest_graphflow import END, START, Graph, GraphRuntime, InMemoryCheckpointStore
from pytest_graphflow import VirtualClock
from pydantic import BaseModel

class S(BaseModel):
    n: int = 0

g = Graph("g", S)
g.node("inc", lambda s: {"n": s.n + 1})
g.edge(START, "inc")
g.edge("inc", END)
rt = GraphRuntime(store=InMemoryCheckpointStore(), clock=VirtualClock(), seed=1)
print(rt.invoke(g.compile(), {"n": 1}).data)
assert "langgraph" not in sys.modules
try:
    import pytest_graphflow.langgraph
except pytest_graphflow.errors.MissingExtra as exc:
    assert isinstance(exc, ImportError)
    print("MissingExtra:", exc)
"""


def test_the_package_works_without_langgraph() -> None:
    done = subprocess.run([sys.executable, "-c", _WITHOUT], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "{'n': 2}"
    assert lines[1].startswith("MissingExtra: pytest_graphflow.langgraph needs LangGraph: "
                               "pip install 'pytest-graphflow[langgraph]'")


def test_the_plugin_runs_a_users_tests_without_langgraph(tmp_path: Path) -> None:
    (tmp_path / "test_user.py").write_text(
        "def test_uses_the_fixtures(graph_runtime, store_faults, virtual_clock):\n"
        "    assert graph_runtime.seed is not None\n", encoding="utf-8")
    script = _HIDE + f"""
import pytest
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", {str(tmp_path / "test_user.py")!r}]))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
