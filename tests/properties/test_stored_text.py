"""Issue 29: a plain lean step's events come to a durable store already written as JSON text
(``DumpedEvents.text``, ``_engine/_stored.py``), and the store keeps that text as it is. It
must be, byte for byte, what ``to_json`` writes of each event's dict (what the store wrote
before): key order, escapes, non-ASCII, ints of any size. Where the text cannot be written
so (a lone surrogate, an int ``str`` refuses), there is none and the store serialises the
dicts as before.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta, timezone
from json.encoder import encode_basestring_ascii
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st
from pydantic_core import to_json, to_jsonable_python

from pytest_graphflow._engine._stored import StepTimes, stored_step_events

_AWKWARD = st.sampled_from(['"', "\\", "\x00", "\n", "\x1f", "\x7f", "é", "\u2028", "😀",
                            "\ud800", "\udcff", "/", "<", "}},{{", " NaN ", "Infinity"])
TEXTS = st.lists(st.one_of(st.characters(codec=None), _AWKWARD), max_size=8).map("".join)
"""Strings of any character, lone surrogates and JSON's escapes among them."""

PLAIN_TEXTS = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E,
                                    exclude_characters='"\\'), max_size=12)
"""Strings JSON escapes nothing in."""

INTS = st.one_of(st.integers(), st.integers(min_value=-(10**5000), max_value=10**5000),
                 st.sampled_from([2**63, 2**64, -(2**63) - 1, 10**4299, 10**4300, -10**4300]))
VALUES = st.one_of(st.none(), st.booleans(), INTS, TEXTS)
PATCHES = st.one_of(st.none(), st.dictionaries(TEXTS, VALUES, max_size=4))
MOMENTS = st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
                       timezones=st.one_of(st.none(), st.just(UTC), st.timezones(), st.builds(
                           timezone, st.timedeltas(-timedelta(hours=23, minutes=59),
                                                   timedelta(hours=23, minutes=59)))))


def _step(strings: tuple[str, str, str, list[str], str | None], patch: dict[str, Any] | None,
          moment: datetime, ends: tuple[int, int]) -> Any:
    run_id, node, task_id, targets, cid = strings
    started = moment - timedelta(microseconds=ends[0])
    finished = moment if ends[1] == 0 else moment - timedelta(microseconds=ends[1])
    return stored_step_events(StepTimes(), run_id, moment, 7, 3, node, task_id, patch, started,
                              finished, targets, cid, False, None)


def _to_json(events: list[dict[str, Any]]) -> str | None:
    """The events' text as the store wrote it before (``dumped_row``), or ``None`` when
    ``to_json`` refuses one."""
    try:
        return "\n".join(to_json(e, inf_nan_mode="constants").decode() for e in events)
    except ValueError:  # (PydanticSerializationError: a lone surrogate)
        return None


def _plain(text: str) -> bool:
    return encode_basestring_ascii(text) == f'"{text}"'


STRINGS = st.tuples(TEXTS, TEXTS, TEXTS, st.lists(TEXTS, max_size=3),
                    st.one_of(st.none(), TEXTS))
ENDS = st.tuples(st.integers(0, 10**7), st.sampled_from([0, 1, 10**6]))


@given(STRINGS, PATCHES, MOMENTS, ENDS)
@example(("run-1", "a", "task-1", ["b"], "cp-1"), {"n": 10**4300}, datetime(2025, 1, 1), (0, 0))
@example(("run-1", "a", "task-1", ["b"], "cp-1"), {"s": "\ud800"}, datetime(2025, 1, 1), (0, 0))
@example(("run-1", "a\"", "task-1", ["b"], None), {"s": "x"}, datetime(2025, 1, 1), (0, 0))
def test_a_step_s_text_is_to_json_of_its_events(
        strings: tuple[str, str, str, list[str], str | None], patch: dict[str, Any] | None,
        moment: datetime, ends: tuple[int, int]) -> None:
    events = _step(strings, patch, moment, ends)
    expected = _to_json(events)
    if events.text is not None:
        assert events.text == expected
    # When there is none, it is for a reason: a string with an escape outside the patch,
    # to_json refusing a string, or an int str() refuses.
    run_id, node, task_id, targets, cid = strings
    ids = f"{run_id}{node}{task_id}{''.join(targets)}{cid or ''}"
    limit = sys.get_int_max_str_digits()
    huge = limit and any(type(v) is int and abs(v) >= 10**limit for v in (patch or {}).values())
    if _plain(ids) and expected is not None and not huge:
        assert events.text == expected


@given(st.tuples(PLAIN_TEXTS, PLAIN_TEXTS, PLAIN_TEXTS, st.lists(PLAIN_TEXTS, max_size=3),
                 st.one_of(st.none(), PLAIN_TEXTS)),
       st.one_of(st.none(), st.dictionaries(PLAIN_TEXTS, st.one_of(
           st.none(), st.booleans(), st.integers(), PLAIN_TEXTS), max_size=4)), MOMENTS, ENDS)
def test_a_step_of_plain_strings_is_written(
        strings: tuple[str, str, str, list[str], str | None], patch: dict[str, Any] | None,
        moment: datetime, ends: tuple[int, int]) -> None:
    events = _step(strings, patch, moment, ends)
    assert events.text is not None
    assert events.text == _to_json(events)


@given(MOMENTS)
def test_a_datetime_s_json_needs_no_escaping(moment: datetime) -> None:
    """What the text relies on to put the events' times in unchecked."""
    text = to_jsonable_python(moment)
    assert type(text) is str
    assert _plain(text)
    assert to_json(moment).decode() == f'"{text}"'
