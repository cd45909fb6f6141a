"""Public classes and functions show the module users import them from, as trio's do.

``repr(GraphRuntime)`` is ``<class 'pytest_graphflow.GraphRuntime'>``, not the private module
that defines it; pickles, pydantic models and ``"module:attr"`` references still work through
the public path (``pytest_graphflow/_exports.py``).
"""

from __future__ import annotations

import importlib
import inspect
import pickle
import subprocess
import sys
from typing import Any

import pytest
from pydantic import BaseModel

import pytest_graphflow
from pytest_graphflow import (
    END,
    START,
    Checkpoint,
    CompiledGraph,
    Graph,
    GraphRuntime,
    InMemoryCheckpointStore,
    NodeStart,
    VirtualClock,
)

FRONTS = ["testing", "invariants", "strategies", "conformance", "stores", "langgraph"]


def _root_objects() -> dict[str, Any]:
    return {name: getattr(pytest_graphflow, name) for name in pytest_graphflow._LAZY}


def _shown(obj: Any) -> bool:
    return isinstance(obj, type) or inspect.isfunction(obj)


def test_every_public_class_and_function_of_the_package_shows_a_public_module() -> None:
    # those defined in a public module (errors, assertions) keep it; the others show the
    # package itself
    shown = {name: f"{obj.__module__}.{obj.__qualname__}"
             for name, obj in _root_objects().items() if _shown(obj)}
    expected = {name: f"{module}.{name}" if (module := getattr(pytest_graphflow, name).__module__)
                in ("pytest_graphflow.errors", "pytest_graphflow.assertions")
                else f"pytest_graphflow.{name}" for name in shown}
    assert shown == expected
    assert shown["GraphRuntime"] == "pytest_graphflow.GraphRuntime"
    assert shown["NodeFailed"] == "pytest_graphflow.errors.NodeFailed"


@pytest.mark.parametrize("front", FRONTS)
def test_every_name_of_a_front_shows_a_public_module(front: str) -> None:
    module = importlib.import_module(f"pytest_graphflow.{front}")
    private = {name: obj.__module__ for name in module.__all__
               if _shown(obj := getattr(module, name)) and obj.__module__.startswith(
                   "pytest_graphflow._")}
    assert private == {}


def test_a_name_of_the_package_and_a_front_shows_the_package() -> None:
    import pytest_graphflow.stores as stores

    assert stores.StoreFeatures is pytest_graphflow.StoreFeatures
    assert stores.StoreFeatures.__module__ == "pytest_graphflow"
    assert stores.Claim.__module__ == "pytest_graphflow.stores"


def test_reprs_show_the_public_path() -> None:
    import pytest_graphflow.testing as testing

    assert repr(GraphRuntime) == "<class 'pytest_graphflow.GraphRuntime'>"
    assert repr(testing.RecordingRuntime) == "<class 'pytest_graphflow.testing.RecordingRuntime'>"
    assert repr(type(_trace())) == "<class 'pytest_graphflow.Trace'>"
    assert repr(pytest_graphflow.NodeFailed) == "<class 'pytest_graphflow.errors.NodeFailed'>"


class _Count(BaseModel):
    n: int = 0


def _trace() -> Any:
    graph = Graph("public_paths", _Count)
    graph.node("bump", lambda s: {"n": s.n + 1}).edge(START, "bump").edge("bump", END)
    return GraphRuntime(clock=VirtualClock(), seed=1).trace(graph.compile())


def test_classes_and_instances_pickle_through_the_public_path() -> None:
    trace = _trace()
    event = trace.events[1]
    assert type(event).__module__ == "pytest_graphflow"
    for obj in (GraphRuntime, CompiledGraph, InMemoryCheckpointStore, type(event), event,
                trace.result.status):
        data = pickle.dumps(obj)
        if isinstance(obj, (type, BaseModel)):
            assert b"pytest_graphflow\x94" in data
            assert b"_records" not in data
        assert pickle.loads(data) == obj


def test_pydantic_models_are_complete_and_validate_after_the_rewrite() -> None:
    models = [obj for obj in _root_objects().values()
              if isinstance(obj, type) and issubclass(obj, BaseModel)]
    assert Checkpoint in models
    assert NodeStart in models
    assert [m.__name__ for m in models if not m.__pydantic_complete__] == []
    events = _trace().events
    assert [type(e).model_validate_json(e.model_dump_json()) for e in events] == events
    assert [pytest_graphflow.parse_event(e.model_dump(mode="json")) for e in events] == events


def test_a_fresh_interpreter_shows_public_paths_after_one_import() -> None:
    code = ("from pytest_graphflow import GraphRuntime\n"
            "from pytest_graphflow._engine._results import GraphResult\n"
            "print(GraphRuntime.__module__, GraphResult.__module__, GraphResult.__qualname__)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["pytest_graphflow", "pytest_graphflow", "GraphResult"]
