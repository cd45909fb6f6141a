"""Issue 29, the round trip's third pass: attribute reads off the interpreter's slow path.

A class with a ``__getattr__`` (pydantic's ``BaseModel``, ``GraphResult`` and ``FaultyStore``
had one) makes *every* attribute read of its instances take the slow path, found or not. A
resume read ~30 fields of its checkpoint that way; a result's ``status`` and ``run_id``, a
test store's ``claim_ttl`` (through a failed lookup and the forwarding ``__getattr__``) too.
Callgrind's instructions, docs/performance.md. These tests pin that the cheaper reads give
what the general ones gave, and cap the slow reads a resume makes.
"""

from __future__ import annotations

import collections
import dataclasses
import pickle
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from graphflow_approval import approval_graph
from pytest_graphflow import (
    FaultyStore,
    GraphResult,
    GraphRuntime,
    InMemoryCheckpointStore,
    Resume,
    VirtualClock,
)
from pytest_graphflow._stores._claims import DEFAULT_CLAIM_TTL, store_claim_ttl


def _lazy() -> GraphResult[Any]:
    return GraphResult._lazy(lambda s: dict(s), {"n": 1}, status="completed", run_id="run-1",
                             thread_id="thread-1", step=2, checkpoint_id="cp-1",
                             interrupts={}, error=None, breakpoint=None)


def test_a_result_has_no_getattr_and_builds_state_and_data_once() -> None:
    """``state`` and ``data`` of a lazy result are built when first read, once, and then
    read from the instance; a result built whole reads as before; no ``__getattr__``."""
    assert "__getattr__" not in vars(GraphResult)
    lazy = _lazy()
    assert "_source" in lazy.__dict__
    assert lazy.status == "completed"
    assert lazy.run_id == "run-1"
    assert "_source" in lazy.__dict__  # reading the other fields builds nothing
    state = lazy.state
    assert state == {"n": 1}
    assert lazy.data == {"n": 1}
    assert "_source" not in lazy.__dict__
    assert lazy.state is state
    whole = GraphResult(state={"n": 1}, data={"n": 1}, status="completed", run_id="run-1",
                        thread_id="thread-1", step=2, checkpoint_id="cp-1")
    assert whole == _lazy() == lazy
    assert pickle.loads(pickle.dumps(_lazy())) == whole
    assert dataclasses.replace(_lazy(), status="failed").data == {"n": 1}
    assert [f.name for f in dataclasses.fields(GraphResult)][:2] == ["state", "data"]
    with pytest.raises(AttributeError, match="'GraphResult' object has no attribute 'nope'"):
        _ = lazy.nope  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        _ = GraphResult.state  # the class has no value of its own, as before
    empty = GraphResult.__new__(GraphResult)
    with pytest.raises(AttributeError, match="no attribute 'data'"):
        _ = empty.data


def test_a_faulty_store_forwards_claim_ttl_without_its_getattr() -> None:
    """``FaultyStore.claim_ttl`` is the inner store's (set on the wrapper, the wrapper's
    wins), read without the forwarding ``__getattr__``; an inner store without one has none."""
    faulty = FaultyStore(InMemoryCheckpointStore(claim_ttl=7.5), clock=VirtualClock())
    calls: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            calls.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        ttl = faulty.claim_ttl
    finally:
        sys.setprofile(None)
    assert ttl == 7.5
    assert "__getattr__" not in calls, calls
    assert store_claim_ttl(faulty) == 7.5
    faulty.claim_ttl = 2.0
    assert faulty.claim_ttl == 2.0
    assert faulty.inner.claim_ttl == 7.5

    class Bare(InMemoryCheckpointStore):
        def __getattribute__(self, name: str) -> Any:
            if name == "claim_ttl":
                raise AttributeError(name)
            return super().__getattribute__(name)

    bare = FaultyStore(Bare())
    with pytest.raises(AttributeError):
        _ = bare.claim_ttl
    assert store_claim_ttl(bare) == DEFAULT_CLAIM_TTL


@pytest.fixture
def model_reads() -> Iterator[collections.Counter[tuple[str, str]]]:
    """Every attribute read of a pydantic model, by (model, attribute), while counting."""
    counts: collections.Counter[tuple[str, str]] = collections.Counter()
    plain = object.__getattribute__

    def counted(self: Any, name: str) -> Any:
        counts[type(self).__name__, name] += 1
        return plain(self, name)

    BaseModel.__getattribute__ = counted  # type: ignore[method-assign]
    try:
        yield counts
    finally:
        del BaseModel.__getattribute__


def test_a_resume_reads_its_checkpoint_from_its_dict(
        model_reads: collections.Counter[tuple[str, str]]) -> None:
    """A resume on the in-memory store reads its checkpoint's fields from the model's dict:
    at most 16 reads of a ``Checkpoint`` go through the slow path (49 before this pass, 14
    after: 8 of them the ``__dict__`` reads themselves), and the resumed run ends as a
    resume always ended it."""
    graph = approval_graph()
    runtime = GraphRuntime(clock=VirtualClock(), seed=0)
    paused = runtime.invoke(graph, {"n": 1})
    model_reads.clear()
    done = runtime.resume(paused.run_id, Resume("yes"))
    reads = {key: n for key, n in model_reads.items() if key[0] == "Checkpoint"}
    assert sum(reads.values()) <= 16, reads
    assert done.status == "completed"
    assert done.data == {"n": 12, "answer": "yes"}


def test_resumes_read_the_same_checkpoint_fields_as_before() -> None:
    """What the dict reads stand for: a resume from a run id and from a checkpoint id (time
    travel: not the run's latest) give the events and states the checkpoint's own fields
    give, the same for the same seed."""
    def legs(seed: int) -> list[Any]:
        graph = approval_graph()
        runtime = GraphRuntime(clock=VirtualClock(), seed=seed)
        paused = runtime.invoke(graph, {"n": 1})
        first = runtime.resume_trace(paused.run_id, Resume("yes"))
        again = runtime.resume_trace(paused.checkpoint_id, Resume("no"))  # time travel
        return [first.to_json(), again.to_json(), first.result.data, again.result.data]

    one, two = legs(3), legs(3)
    assert one == two
    assert one[2] == {"n": 12, "answer": "yes"}
    assert one[3] == {"n": 12, "answer": "no"}
