"""An ``interrupt`` event carries its own copy of each question (issue 29: built without
pydantic's ``model_copy``, ~12 calls an interrupt of a recorded leg): the same model
``model_copy(update={"payload": jcopy(payload)})`` gives, field for field, and its payload
shares nothing with the checkpoint's."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from pytest_graphflow._engine._report import interrupt_copy
from pytest_graphflow._records._events import Interrupt
from pytest_graphflow._records._json import jcopy

_PAYLOADS: list[Any] = [None, "text", 3, 2.5, True, [1, {"a": [2]}], {"draft": {"n": [1, 2]}}]


def _general(pending: Interrupt) -> Interrupt:
    return pending.model_copy(update={"payload": jcopy(pending.payload)})


def _same(ours: Interrupt, general: Interrupt) -> None:
    assert type(ours) is type(general)
    assert ours.__dict__ == general.__dict__
    assert list(ours.__dict__) == list(general.__dict__)
    assert ours.model_fields_set == general.model_fields_set
    assert ours.__pydantic_extra__ == general.__pydantic_extra__
    assert ours.__pydantic_private__ == general.__pydantic_private__
    assert ours.model_dump_json() == general.model_dump_json()
    assert ours == general


@pytest.mark.parametrize("payload", _PAYLOADS)
@pytest.mark.parametrize("deadline", [None, datetime(2026, 1, 2, tzinfo=UTC)])
def test_an_interrupts_copy_is_the_model_copy_of_pydantic(payload: Any,
                                                          deadline: datetime | None) -> None:
    built = Interrupt(key="t:ok", id="ok", node="approve", task_id="t", payload=payload,
                      deadline=deadline)
    _same(interrupt_copy(built), _general(built))
    # fields left unset when built (payload and deadline defaulted): the set grows alike
    bare = Interrupt(key="t:ok", id="ok", node="approve", task_id="t")
    _same(interrupt_copy(bare), _general(bare))
    constructed = Interrupt.model_construct(key="t:ok", id="ok", node="n", task_id="t",
                                            payload=payload)
    _same(interrupt_copy(constructed), _general(constructed))


def test_the_copys_payload_shares_nothing_with_the_question() -> None:
    pending = Interrupt(key="t:ok", id="ok", node="n", task_id="t",
                        payload={"draft": {"items": [1, 2]}})
    copied = interrupt_copy(pending)
    copied.payload["draft"]["items"].append(3)
    assert pending.payload == {"draft": {"items": [1, 2]}}


def test_a_subclass_takes_pydantics_copy() -> None:
    class Asked(Interrupt):
        pass

    pending = Asked(key="t:ok", id="ok", node="n", task_id="t", payload=[1])
    copied = interrupt_copy(pending)
    assert type(copied) is Asked
    _same(copied, _general(pending))
