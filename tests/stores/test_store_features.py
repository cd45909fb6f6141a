"""What a store supports is one frozen ``StoreFeatures`` value (issue 25's store seam): the
built-in stores declare theirs, a store that declares none gets what its methods show, and
the runtime uses a capability only when the features say so, whatever attributes the store
carries."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic import BaseModel

from pytest_graphflow import (
    END,
    START,
    FaultyStore,
    Graph,
    GraphExecutionError,
    GraphRuntime,
    InMemoryCheckpointStore,
    InvalidArgument,
    SQLiteCheckpointStore,
    VirtualClock,
)
from pytest_graphflow.stores import StoreFeatures, features_of

pytestmark = pytest.mark.anyio


class Count(BaseModel):
    n: int = 0


def bump(state: Count) -> dict[str, int]:
    return {"n": state.n + 1}


class Plain(InMemoryCheckpointStore):
    """A subclass that declares nothing: its features are derived from its methods."""


class SaysNoArtifacts(InMemoryCheckpointStore):
    """Has ``put_artifact`` but declares that it keeps no artifacts."""

    features = dataclasses.replace(InMemoryCheckpointStore.features, artifacts=False)


class SaysNoPages(InMemoryCheckpointStore):
    """Its ``list`` pages (``pages_history = True``), but it declares no paging; records the
    arguments of every ``list`` call."""

    features = dataclasses.replace(InMemoryCheckpointStore.features, history_pages=False)

    def __init__(self) -> None:
        super().__init__()
        self.list_calls: list[dict[str, Any]] = []

    async def list(self, run_id: str | None = None, **kwargs: Any) -> Any:  # type: ignore[override]
        self.list_calls.append(kwargs)
        return await super().list(run_id, **kwargs)


def test_the_built_in_stores_declare_their_features(tmp_path: Any) -> None:
    both = {"claims": True, "fencing": True, "commit": True, "history_pages": True,
            "artifacts": True, "prune": True, "delete_thread": True, "waiting": True,
            "tenants": True}
    assert features_of(InMemoryCheckpointStore()) == StoreFeatures(**both, fields_save=True,
                                                                   step_sink=True, in_process=True)
    sqlite = SQLiteCheckpointStore(str(tmp_path / "s.db"))
    assert features_of(sqlite) == StoreFeatures(**both, events=True, run_records=True,
                                                visited_snapshots=True, folded_claims=True)


def test_a_faulty_store_has_the_features_of_the_store_it_wraps(tmp_path: Any) -> None:
    inner = SQLiteCheckpointStore(str(tmp_path / "s.db"))
    # Its list takes no page arguments; it binds the runtime's clock and logs its calls; its
    # rules may read a checkpoint's visited nodes, and watch latest, claim and release (it
    # does not fold claims).
    assert features_of(FaultyStore(inner)) == dataclasses.replace(
        features_of(inner), history_pages=False, clock_binding=True, call_log=True,
        visited_snapshots=False, folded_claims=False)
    assert features_of(FaultyStore(InMemoryCheckpointStore())).fields_save
    # Over the in-memory store it passes on the lean step's save and the answers at once,
    # each logged as the call it stands for (tests/faults/test_faulty_answers_at_once.py);
    # over a subclass, or an instance carrying its own claim, latest or save, neither.
    assert features_of(FaultyStore(InMemoryCheckpointStore())).step_sink
    assert not features_of(FaultyStore(Plain())).step_sink
    patched = InMemoryCheckpointStore()
    patched.latest = patched.latest  # type: ignore[method-assign]
    assert not features_of(FaultyStore(patched)).step_sink
    assert not features_of(FaultyStore(patched)).in_process
    assert features_of(FaultyStore(patched)).fields_save


def test_only_the_class_that_answers_claims_at_once_says_so() -> None:
    """``in_process`` lets the runtime claim, release and find a run id without awaiting the
    store. A ``FaultyStore`` over the in-memory store passes it on through its own
    ``claim_now``/``release_now``/``has_run``/``kept_latest`` (each logs the call it stands
    for, and declines while a rule watches it); a subclass of either that declares the
    features without defining those methods itself does not get it (it may have changed
    ``claim``), nor a ``FaultyStore`` over such a subclass."""

    class Renamed(InMemoryCheckpointStore):
        features = InMemoryCheckpointStore.features

    class Wrapper(FaultyStore):
        pass

    wrapped = features_of(FaultyStore(InMemoryCheckpointStore()))
    assert wrapped.in_process
    assert wrapped.claims
    assert wrapped.fields_save
    assert not features_of(Renamed()).in_process
    assert features_of(Renamed()).fields_save
    assert not features_of(FaultyStore(Renamed())).in_process
    assert not features_of(Wrapper(InMemoryCheckpointStore())).in_process


def test_a_store_that_declares_nothing_gets_what_its_methods_show() -> None:
    class Minimal:
        async def save(self, checkpoint: Any) -> None: ...
        async def put_artifact(self, *args: Any) -> None: ...
        async def artifacts(self, run_id: str) -> list[Any]: return []

    assert features_of(Minimal()) == StoreFeatures(artifacts=True)
    # A subclass may have changed a method: it never gets the in-memory store's fast save.
    assert features_of(Plain()) == dataclasses.replace(
        InMemoryCheckpointStore.features, fields_save=False, step_sink=False, in_process=False)


def test_an_instance_that_does_not_fence_is_not_fenced() -> None:
    store = InMemoryCheckpointStore()
    store.supports_fencing = False  # type: ignore[misc]
    assert not features_of(store).fencing


def test_features_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        InMemoryCheckpointStore.features.claims = False  # type: ignore[misc]


async def test_the_runtime_believes_a_store_that_declares_no_artifacts() -> None:
    rt = GraphRuntime(store=SaysNoArtifacts(), clock=VirtualClock(), seed=1)
    assert rt.store_features.artifacts is False
    with pytest.raises(GraphExecutionError, match="keeps no artifacts"):
        await rt.attach("run-x", "report", b"data")
    assert await rt.artifacts("run-x") == []


async def test_the_runtime_pages_history_only_on_a_store_that_declares_it() -> None:
    g = Graph("pages", Count)
    g.node("a", bump).node("b", bump)
    g.edge(START, "a").edge("a", "b").edge("b", END)
    store = SaysNoPages()
    rt = GraphRuntime(store=store, clock=VirtualClock(), seed=1)
    result = await rt.ainvoke(g.compile(), {})
    store.list_calls.clear()
    page = await rt.history(result.run_id, limit=1)
    assert len(page) == 1
    assert all("limit" not in call for call in store.list_calls), store.list_calls


def test_a_store_declaring_a_feature_it_lacks_is_refused_with_the_fix() -> None:
    class Boasts(InMemoryCheckpointStore):
        features = dataclasses.replace(InMemoryCheckpointStore.features, queue=True)

    with pytest.raises(InvalidArgument, match=r"declares StoreFeatures\(queue=True\) but has "
                                              r"no enqueue\(\); implement it or declare "
                                              r"queue=False"):
        GraphRuntime(store=Boasts())
