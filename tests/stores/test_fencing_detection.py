"""Which stores get fenced saves (``checks_fencing``): the class says so and its ``save``
takes ``fence=``. The answer is kept per class, so these check that what an instance or a
proxy carries of its own is still honoured, on the second store of a class as on the first.
"""

from __future__ import annotations

from typing import Any

from pytest_graphflow import FaultyStore, InMemoryCheckpointStore
from pytest_graphflow._records._checkpoint import Checkpoint
from pytest_graphflow._time._clock import VirtualClock
from pytest_graphflow.stores import checks_fencing


class Forwarding:
    """A proxy forwarding every attribute to a store: its own save takes no fence."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    async def save(self, checkpoint: Checkpoint) -> None:
        await self._inner.save(checkpoint)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class NoFenceSave(InMemoryCheckpointStore):
    """Overrides save without ``fence``: keeps unfenced saves."""

    async def save(self, checkpoint: Checkpoint) -> None:  # type: ignore[override]
        await super().save(checkpoint)


def test_the_in_memory_store_is_fenced_every_time() -> None:
    assert [checks_fencing(InMemoryCheckpointStore()) for _ in range(3)] == [True] * 3


def test_a_proxy_that_forwards_attributes_is_not_fenced() -> None:
    assert [checks_fencing(Forwarding(InMemoryCheckpointStore())) for _ in range(2)] == [False] * 2


def test_a_subclass_whose_save_takes_no_fence_is_not_fenced() -> None:
    assert [checks_fencing(NoFenceSave()) for _ in range(2)] == [False] * 2


def test_an_instance_that_says_it_does_not_fence_is_believed() -> None:
    store = InMemoryCheckpointStore()
    checks_fencing(InMemoryCheckpointStore())  # the class's answer is cached first
    store.supports_fencing = False  # type: ignore[misc]
    assert not checks_fencing(store)
    assert checks_fencing(InMemoryCheckpointStore())


def test_an_instance_with_its_own_save_is_asked_about_it() -> None:
    store = InMemoryCheckpointStore()
    checks_fencing(InMemoryCheckpointStore())

    async def save(checkpoint: Checkpoint) -> None:
        pass

    store.save = save  # type: ignore[method-assign]
    assert not checks_fencing(store)


def test_a_faulty_store_asks_the_store_it_wraps_each_time() -> None:
    clock = VirtualClock()
    fenced = FaultyStore(InMemoryCheckpointStore(), clock=clock)
    unfenced = FaultyStore(NoFenceSave(), clock=clock)
    assert [checks_fencing(fenced), checks_fencing(unfenced), checks_fencing(fenced)] == [
        True, False, True]
