"""A new run's starting state from its input, key by key (issue 29: ~13 calls a run with an
input, every ``graph_runtime.invoke(graph, {...})`` of a test): ``StateCodec.started`` gives
exactly what validating the input as a whole and dumping the model gives — the same keys in
the same order, the same values of the same types — or ``None``, and the whole validation
then runs (and names a refused key as before)."""

from __future__ import annotations

import json
import math
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from pytest_graphflow import END, START, Graph, GraphRuntime, VirtualClock
from pytest_graphflow._engine._merge import validate_state
from pytest_graphflow._engine._options import state_from_input
from pytest_graphflow.errors import UpdateRejected


class Plain(BaseModel):
    n: int = 0
    x: float = 1.5
    s: str = "a"
    b: bool = False
    o: int | None = None
    lit: Literal["a", "b", 3] = "a"
    u: int | str = 0
    anything: Any = None
    items: list[int] = []


class Lower(BaseModel):
    model_config = ConfigDict(str_to_lower=True)
    s: str = "a"


class NoInf(BaseModel):
    model_config = ConfigDict(allow_inf_nan=False)
    x: float = 0.0


class Aliased(BaseModel):
    model_config = ConfigDict(populate_by_name=True)
    n: int = Field(default=0, alias="count")


class Excluded(BaseModel):
    n: int = 0
    hidden: int = Field(default=1, exclude=True)


class Required(BaseModel):
    n: int


_INPUTS: list[dict[str, Any]] = [
    {"n": 3}, {"n": True}, {"n": "7"}, {"n": 2.0}, {"n": 2.5}, {"n": "x"}, {"n": None},
    {"x": 3}, {"x": 2.5}, {"x": "4.5"}, {"x": math.inf}, {"x": -math.inf}, {"x": math.nan},
    {"s": "Hello"}, {"s": 5}, {"b": 1}, {"b": "yes"}, {"b": 2}, {"o": None}, {"o": 4},
    {"lit": "b"}, {"lit": 3}, {"lit": "c"}, {"u": "5"}, {"u": 5}, {"anything": "v"},
    {"anything": {"k": [1]}}, {"items": [1, 2]}, {"items": 3},
    {"n": 1, "s": "z", "x": 0.5, "b": True}, {"s": "q", "n": 9},
]


def _whole(graph: Any, patch: dict[str, Any]) -> Any:
    try:
        return graph.codec.dump(validate_state(graph, patch))
    except UpdateRejected as exc:
        return ("rejected", str(exc))


def _same(ours: dict[str, Any], whole: Any) -> None:
    assert not isinstance(whole, tuple), whole  # never a state where the whole refuses
    assert list(ours) == list(whole)
    for key in whole:
        assert type(ours[key]) is type(whole[key]), key
    assert json.dumps(ours) == json.dumps(whole)


def _graph(model: type[BaseModel]) -> Any:
    g = Graph(f"input_{model.__name__}", model)
    g.node("a", lambda s: {})
    g.edge(START, "a").edge("a", END)
    return g.compile()


@pytest.mark.parametrize("model", [Plain, Lower, NoInf, Aliased, Excluded, Required])
@pytest.mark.parametrize("given", _INPUTS, ids=repr)
def test_the_state_from_an_input_key_by_key_is_the_whole_validations(
        model: type[BaseModel], given: dict[str, Any]) -> None:
    graph = _graph(model)
    names = {k: v for k, v in given.items() if k in model.model_fields}
    if not names:
        return
    try:
        patch = state_from_input(graph, names)
    except UpdateRejected:  # not JSON (inf, nan): refused before either way
        return
    ours = graph.codec.started(patch)
    whole = _whole(graph, patch)
    if ours is not None:
        _same(ours, whole)
        ours["n" if "n" in ours else next(iter(ours))] = "changed"  # a fresh copy each call
        assert graph.codec.started(patch) != ours or not patch


def test_only_a_plain_schema_without_value_changing_config_goes_key_by_key() -> None:
    assert _graph(Plain).codec.started({"n": 3}) is not None
    assert _graph(Plain).codec.started({"x": math.inf}) is None  # (a whole dump: null)
    assert _graph(Plain).codec.started({"items": [1]}) is None  # scalars only
    for model in (Lower, NoInf, Aliased, Excluded, Required):
        key = next(iter(model.model_fields))
        value = "v" if key == "s" else 1
        assert _graph(model).codec.started({key: value}) is None, model


@pytest.mark.parametrize("given", [{"n": 3}, {"s": "q", "n": 9}, {"b": 1}, {"x": 2}])
@pytest.mark.parametrize("thread_id", [None, "t-1"])
def test_a_run_from_an_input_saves_what_the_whole_validation_gave(
        given: dict[str, Any], thread_id: str | None) -> None:
    graph = _graph(Plain)  # (its node writes nothing: the run ends in its starting state)
    runtime = GraphRuntime(None, clock=VirtualClock(), seed=1)
    result = runtime.invoke(graph, given, thread_id=thread_id)
    expected = _whole(graph, state_from_input(graph, given))
    assert json.dumps(result.data) == json.dumps(expected)
    saved = runtime.store.kept_latest(result.run_id)  # type: ignore[attr-defined]
    assert json.dumps(saved.state) == json.dumps(expected)


def test_a_refused_input_value_names_its_key_as_before() -> None:
    graph = _graph(Plain)
    runtime = GraphRuntime(None, clock=VirtualClock(), seed=1)
    with pytest.raises(UpdateRejected) as caught:
        runtime.invoke(graph, {"s": "ok", "n": "x"})
    assert "'n'" in str(caught.value) or " n" in str(caught.value)
    assert str(caught.value) == _whole(graph, state_from_input(graph, {"s": "ok", "n": "x"}))[1]
