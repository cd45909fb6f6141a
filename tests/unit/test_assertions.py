"""assert_events: every pattern form passes on a trace and fails on its twin; the diff text."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from unittest.mock import ANY

import pytest

from graphflow_test_time import at
from pytest_graphflow._records._events import (
    CheckpointSaved,
    CustomEvent,
    EdgeTransition,
    ErrorEvent,
    EventBase,
    Interrupt,
    InterruptEvent,
    NodeEnd,
    NodeStart,
    RunEnd,
    RunStart,
)
from pytest_graphflow.assertions import (
    EventPatternError,
    EventPatternMismatch,
    assert_events,
    events_diff,
    format_events,
)
from pytest_graphflow.errors import GraphflowError, InvalidArgument

RUN = "run-1"



def interrupted_trace() -> list[EventBase]:
    """plan, then a and b in parallel (b replayed), then review interrupts."""
    return [
        RunStart(
            seq=0, run_id=RUN, step=0, time=at(0), graph_id="checkout", revision="r1",
            thread_id="th-1",
        ),
        NodeStart(seq=1, run_id=RUN, step=0, time=at(0), node="plan", task_id="task-1"),
        NodeEnd(
            seq=2, run_id=RUN, step=0, time=at(1), node="plan", task_id="task-1",
            patch={"total": 1}, started_at=at(0), finished_at=at(1),
        ),
        EdgeTransition(seq=3, run_id=RUN, step=0, time=at(1), node="plan", source="plan",
                       target="a"),
        EdgeTransition(seq=4, run_id=RUN, step=0, time=at(1), node="plan", source="plan",
                       target="b"),
        NodeStart(seq=5, run_id=RUN, step=1, time=at(1), node="a", task_id="task-2"),
        NodeEnd(
            seq=6, run_id=RUN, step=1, time=at(1), node="a", task_id="task-2",
            patch={"items": ["a"]}, started_at=at(1), finished_at=at(1),
        ),
        NodeStart(seq=7, run_id=RUN, step=1, time=at(1), node="b", task_id="task-3"),
        NodeEnd(
            seq=8, run_id=RUN, step=1, time=at(1), node="b", task_id="task-3",
            patch={"items": ["b"]}, replayed=True, started_at=at(1), finished_at=at(1),
        ),
        CustomEvent(seq=9, run_id=RUN, step=1, time=at(1), node="b", channel="progress",
                    value={"pct": 50}),
        InterruptEvent(
            seq=10, run_id=RUN, step=2, time=at(2), node="review", task_id="task-4",
            interrupts=[Interrupt(key="task-4:ok", id="ok", node="review", task_id="task-4",
                                  payload="ship it?")],
        ),
        CheckpointSaved(seq=11, run_id=RUN, step=2, time=at(2), checkpoint_id="cp-1"),
        RunEnd(seq=12, run_id=RUN, step=2, time=at(2), status="interrupted",
               state={"total": 1, "items": ["a", "b"]}),
    ]


def failed_trace() -> list[EventBase]:
    """charge fails, then goes to END through its failure route's edge."""
    return [
        RunStart(seq=0, run_id=RUN, step=0, time=at(0), graph_id="pay", revision="r2",
                 thread_id="th-2"),
        NodeStart(seq=1, run_id=RUN, step=0, time=at(0), node="charge", task_id="task-1"),
        ErrorEvent(seq=2, run_id=RUN, step=0, time=at(3), node="charge", task_id="task-1",
                   error_type="NodeFailed", message="card declined: insufficient funds"),
        EdgeTransition(seq=3, run_id=RUN, step=0, time=at(3), node="charge", source="charge",
                       target="__end__"),
        CheckpointSaved(seq=4, run_id=RUN, step=0, time=at(3), checkpoint_id="cp-9"),
        RunEnd(seq=5, run_id=RUN, step=0, time=at(3), status="failed", state={},
               error_type="NodeFailed"),
    ]


class IsInstance:
    """A dirty-equals-style matcher: equal to any instance of ``cls``."""

    def __init__(self, cls: type) -> None:
        self.cls = cls

    def __eq__(self, other: object) -> bool:
        return isinstance(other, self.cls)

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True)
class Case:
    trace: Callable[[], list[EventBase]]
    passing: Any
    failing: Any


INT, FAIL = interrupted_trace, failed_trace
CASES: dict[str, Case] = {
    # type:node, and each type's argument
    "type-node": Case(INT, ["run_start", "node_start:plan", "node_end:plan", "..."],
                      ["run_start", "node_start:plan", "node_end:a", "..."]),
    "type-only": Case(INT, ["run_start", "node_start", "node_end", "..."],
                      ["run_start", "node_end", "..."]),
    "node-wildcard": Case(INT, ["run_start", "node_start:*", "..."], ["run_start:*", "run_start"]),
    "edge": Case(INT, ["...", "edge_transition:plan->a", "edge_transition:plan->b", "..."],
                 ["...", "edge_transition:plan->b", "edge_transition:plan->a", "..."]),
    "edge-wildcards": Case(INT, ["...", "edge_transition:plan->*", "edge_transition:*->b", "..."],
                           ["...", "edge_transition:a->*", "..."]),
    "edge-END": Case(FAIL, ["...", "edge_transition:charge->END", "..."],
                     ["...", "edge_transition:charge->START", "..."]),
    "run_end-status": Case(INT, ["...", "run_end:interrupted"], ["...", "run_end:completed"]),
    "run_start-graph": Case(INT, ["run_start:checkout", "..."], ["run_start:pay", "..."]),
    "interrupt": Case(INT, ["...", "interrupt:review", "checkpoint_saved", "run_end"],
                      ["...", "interrupt:plan", "checkpoint_saved", "run_end"]),
    "error": Case(FAIL, ["run_start", "node_start:charge", "error:charge", "..."],
                  ["run_start", "node_start:charge", "error:refund", "..."]),
    "checkpoint_saved": Case(INT, ["...", "checkpoint_saved", "run_end"],
                             ["...", "checkpoint_saved"]),
    "custom-channel": Case(INT, ["...", "custom:progress", "..."], ["...", "custom:tokens", "..."]),
    "star": Case(INT, ["*", "*", "node_end:plan", "..."], ["*", "node_end:plan", "..."]),
    # gaps
    "gap-middle": Case(INT, ["run_start", "...", "run_end"],
                       ["run_start", "...", "node_start:plan", "run_end"]),
    "gap-empty": Case(INT, ["run_start", "...", "node_start:plan", "..."],
                      ["run_start", "node_start:plan", "...", "node_start:plan", "..."]),
    "gap-ellipsis-object": Case(INT, [..., "run_end"], [..., "run_start"]),
    "no-gap-is-exact": Case(FAIL, ["run_start", "node_start", "error", "edge_transition",
                                "checkpoint_saved", "run_end"],
                            ["run_start", "node_start", "error", "edge_transition",
                             "checkpoint_saved"]),
    "gap-at-start-only": Case(FAIL, ["...", "checkpoint_saved", "run_end"],
                              ["...", "checkpoint_saved"]),
    # any-order groups
    "group-set": Case(INT, ["...", {"edge_transition:plan->b", "edge_transition:plan->a"}, "..."],
                      ["...", {"edge_transition:plan->a", "node_start:a"}, "..."]),
    "group-frozenset": Case(INT, ["...", frozenset({"node_end:b", "node_start:b"}), "..."],
                            ["...", frozenset({"node_end:b", "node_start:a"}), "..."]),
    "group-string": Case(INT, ["...", "{edge_transition:plan->b, edge_transition:plan->a}", "..."],
                         ["...", "{edge_transition:plan->b, node_end:plan}", "..."]),
    "group-string-matchers": Case(
        INT, ["...", "{node_end:b replayed=True, node_start:b}", "..."],
        ["...", "{node_end:b replayed=False, node_start:b}", "..."]),
    # field matchers: dicts
    "dict-plain": Case(INT, ["...", {"type": "node_end", "node": "b", "replayed": True,
                                   "patch": {"items": ["b"]}}, "..."],
                       ["...", {"type": "node_end", "node": "b", "replayed": False}, "..."]),
    "dict-partial-nested": Case(INT, ["...", {"type": "run_end", "state": {"total": 1}}],
                                ["...", {"type": "run_end", "state": {"total": 2}}]),
    "dict-no-type": Case(INT, ["...", {"checkpoint_id": "cp-1"}, "..."],
                         ["...", {"checkpoint_id": "cp-2"}, "..."]),
    "dict-predicate": Case(
        INT, ["...", {"type": "node_end", "patch": lambda p: p.get("total") == 1}, "..."],
        ["...", {"type": "node_end", "patch": lambda p: p.get("total") == 2}, "..."]),
    "dict-regex": Case(INT, ["...", {"type": "node_end", "node": re.compile("pl.*")}, "..."],
                       ["...", {"type": "node_end", "node": re.compile("pl")}, "..."]),
    "dict-custom-eq": Case(INT, ["...", {"type": "custom", "value": IsInstance(dict)}, "..."],
                           ["...", {"type": "custom", "value": IsInstance(list)}, "..."]),
    "dict-mock-ANY": Case(INT, ["...", {"type": "custom", "value": ANY, "node": "b"}, "..."],
                          ["...", {"type": "custom", "value": ANY, "node": "a"}, "..."]),
    "dict-type-object": Case(INT, ["...", {"type": "custom", "value": dict}, "..."],
                             ["...", {"type": "custom", "value": list}, "..."]),
    "dict-model-list": Case(INT,
                            ["...", {"type": "interrupt", "interrupts": [{"id": "ok"}]}, "..."],
                            ["...", {"type": "interrupt", "interrupts": [{"id": "no"}]}, "..."]),
    "dict-time-as-text": Case(INT, ["...", {"type": "node_end", "time": "2025-01-01T00:00:01Z"},
                                  "..."],
                              ["...", {"type": "node_end", "time": "2025-01-01T00:00:09Z"},
                               "..."]),
    # field matchers: trailing in a string item
    "str-bool": Case(INT, ["...", "node_end:b replayed=True", "..."],
                     ["...", "node_end:a replayed=True", "..."]),
    "str-dict-literal": Case(INT, ["...", "node_end:plan patch={'total': 1}", "..."],
                             ["...", "node_end:plan patch={'total': 2}", "..."]),
    "str-json-literal": Case(INT, ['...', 'node_end:b patch={"items":["b"]} replayed=true', "..."],
                             ['...', 'node_end:b patch={"items":["b"]} replayed=false', "..."]),
    "str-quoted-text": Case(FAIL,
                            ["...", "error:charge message='card declined: insufficient funds'",
                             "..."],
                            ["...", "error:charge message='card declined'", "..."]),
    "str-regex": Case(FAIL, ["...", "error:charge message~='card declined: .*'", "..."],
                      ["...", "error:charge message~=declined", "..."]),
    "str-regex-escaped-space": Case(FAIL,
                                    ["...", r"error:charge message~=card\ declined:.*", "..."],
                                    ["...", r"error:charge message~=card\ accepted:.*", "..."]),
    "dict-tuple": Case(INT, ["...", {"type": "node_end", "patch": {"items": ("a",)}}, "..."],
                       ["...", {"type": "node_end", "patch": {"items": ("c",)}}, "..."]),
    "str-star-with-field": Case(INT, ["...", "* checkpoint_id=cp-1", "..."],
                                ["...", "* checkpoint_id=cp-2", "..."]),
    "str-int": Case(INT, ["...", "custom:progress value={'pct': 50}", "..."],
                    ["...", "custom:progress value={'pct': 51}", "..."]),
    "str-time": Case(INT, ["...", "node_end:plan time=2025-01-01T00:00:01Z", "..."],
                     ["...", "node_end:plan time=2025-01-01T00:00:00Z", "..."]),
    # other item kinds
    "event-instance": Case(INT, [interrupted_trace()[0], "..."], [interrupted_trace()[1], "..."]),
    "callable-item": Case(INT, [lambda e: e.seq == 0, "..."], [lambda e: e.seq == 1, "..."]),
    "multi-line-string": Case(
        INT,
        """
        run_start:checkout
        # a comment line
        node_start:plan
        node_end:plan patch={'total': 1}
        {edge_transition:plan->b, edge_transition:plan->a}
        ...
        interrupt:review
        checkpoint_saved
        run_end:interrupted
        """,
        """
        run_start:checkout
        node_start:plan
        node_end:plan
        ...
        interrupt:review
        run_end:interrupted
        """,
    ),
    "single-set-pattern": Case(
        FAIL,
        {"run_start", "node_start", "error", "edge_transition", "checkpoint_saved", "run_end"},
        {"run_start", "node_start", "error", "edge_transition", "checkpoint_saved"},
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_pattern_form_passes(case: Case) -> None:
    assert_events(case.trace(), case.passing)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_pattern_form_failing_twin(case: Case) -> None:
    with pytest.raises(EventPatternMismatch):
        assert_events(case.trace(), case.failing)


def test_group_needs_backtracking() -> None:
    # Greedy assignment gives node_end:* to the first node_end and leaves node_end:a nothing.
    events = interrupted_trace()[6:9]  # node_end a, node_start b, node_end b
    assert_events(events, ["{node_end, node_end:a, node_start}"])


def test_string_group_with_repeated_items_needs_each() -> None:
    trace = interrupted_trace()
    assert_events(trace, ["...", "{edge_transition, edge_transition}", "..."])
    with pytest.raises(EventPatternMismatch):
        assert_events(trace, ["...", "{node_end, node_end, node_end}", "..."])


def test_field_matcher_that_raises_is_no_match() -> None:
    # ``p["total"]`` raises KeyError on a's and b's patches while the gap scans past them.
    pattern = ["...", {"type": "node_end", "patch": lambda p: p["total"] == 1}, "..."]
    assert_events(interrupted_trace(), pattern)


def test_bools_do_not_equal_ints() -> None:
    with pytest.raises(EventPatternMismatch):
        assert_events(interrupted_trace(), ["...", "node_end:b replayed=1", "..."])


def test_numeric_looking_node_name_matches_as_text() -> None:
    events = [NodeStart(seq=0, run_id=RUN, step=0, time=at(0), node="1", task_id="task-1")]
    assert_events(events, ["node_start node=1"])


# --------------------------------------------------------------------------- inputs


@dataclass
class FakeTrace:
    events: list[EventBase]


def test_accepts_trace_like_generator_and_wire_dicts() -> None:
    trace = interrupted_trace()
    assert_events(FakeTrace(trace), ["run_start", "..."])
    assert_events((e for e in trace), ["run_start", "..."])
    assert_events([e.model_dump(mode="json") for e in trace], ["run_start", "..."])


@pytest.mark.parametrize(
    "events",
    [pytest.param("run_start", id="string"), pytest.param([1, 2], id="not-events"),
     pytest.param(42, id="int"), pytest.param(interrupted_trace()[0], id="one-event")],
)
def test_events_that_are_not_events_are_rejected(events: object) -> None:
    with pytest.raises(InvalidArgument):
        assert_events(events, ["..."])


def test_empty_events_and_empty_pattern() -> None:
    assert_events([], [])
    assert_events([], ["..."])
    with pytest.raises(EventPatternMismatch):
        assert_events([], ["run_start"])


# --------------------------------------------------------------------------- bad patterns

BAD_PATTERNS: dict[str, tuple[Any, str]] = {
    "unknown-type": (["node_finish:a"], "unknown event type 'node_finish'"),
    "star-with-arg": (["*:a"], "'\\*' takes no ':' argument"),
    "type-colon-nothing": (["node_end:"], "nothing after node_end:"),
    "edge-without-arrow": (["edge_transition:a"], "edge_transition:SOURCE->TARGET"),
    "bad-status": (["run_end:done"], "run_end status 'done' is not one of"),
    "unknown-field": (["node_end:a bogus=1"], "node_end has no field 'bogus'"),
    "field-without-value": (["node_end:a replayed"], "expected 'field=value'"),
    "empty-value": (["node_end:a replayed= "], "no value after 'replayed='"),
    "unbalanced": (["node_end:a patch={'x': 1"], "unbalanced"),
    "bad-regex": (["error:x message~='('"], "bad regular expression"),
    "gap-in-group": (["{node_end:a, ...}"], "cannot be inside an any-order group"),
    "nested-group": (["{node_end:a, {node_end:b}}"], "groups cannot be nested"),
    "empty-group": (["{}"], "empty group"),
    "gap-in-set": ([{"node_end:a", "..."}], "cannot be inside an any-order group"),
    "dict-unknown-field": ([{"type": "node_end", "nod": "a"}], "node_end has no field 'nod'"),
    "dict-unknown-type": ([{"type": "nope"}], "unknown event type 'nope'"),
    "dict-non-str-key": ([{1: "a"}], "field names are strings"),
    "int-item": ([42], "items of type int are not understood"),
    "empty-item": ([""], "empty item"),
    "not-a-pattern": (42, "a pattern is a list of items"),
}


@pytest.mark.parametrize(("pattern", "message"), BAD_PATTERNS.values(), ids=BAD_PATTERNS.keys())
def test_bad_pattern_is_a_clear_value_error(pattern: Any, message: str) -> None:
    with pytest.raises(EventPatternError, match=message) as info:
        assert_events(interrupted_trace(), pattern)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, GraphflowError)
    assert "bad event pattern item" in str(info.value)
    assert "valid items:" in str(info.value)


def test_bad_pattern_is_reported_even_when_events_would_fail() -> None:
    with pytest.raises(EventPatternError):
        assert_events([], ["run_start", "bogus"])


# --------------------------------------------------------------------------- the diff


def test_mismatch_diff_marks_where_sequences_part() -> None:
    trace = failed_trace()
    pattern = ["run_start:pay", "node_start:charge", "node_end:charge", "..."]
    with pytest.raises(EventPatternMismatch) as info:
        assert_events(trace, pattern)
    err = info.value
    assert (err.position, err.pattern_index) == (2, 2)
    assert err.pattern == pattern
    assert err.events == trace
    lines = str(err).splitlines()
    assert lines[:3] == [
        "events do not match the pattern at position 2 (pattern item 2); events 0..1 matched",
        "  expected: node_end:charge",
        "  found:    #2 error charge error_type='NodeFailed' "
        "message='card declined: insufficient funds'",
    ]
    assert lines[4:] == [
        "    pattern           | events",
        "    run_start:pay     | #0 run_start pay thread_id='th-2'",
        "    node_start:charge | #1 node_start charge",
        "  > node_end:charge   | #2 error charge error_type='NodeFailed' "
        "message='card declined: insufficient funds'",
        "    ...               | #3 edge_transition charge->__end__",
        "                      | #4 checkpoint_saved checkpoint_id='cp-9'",
        "                      | #5 run_end failed state={} error_type='NodeFailed'",
    ]


def test_mismatch_after_gap_names_near_misses() -> None:
    with pytest.raises(EventPatternMismatch) as info:
        assert_events(interrupted_trace(), ["run_start", "...", "node_end:c", "..."])
    err = info.value
    assert (err.position, err.pattern_index) == (1, 2)
    lines = str(err).splitlines()
    assert lines[1] == "  expected: node_end:c"
    assert lines[2] == (
        "  found:    no match in positions 1..12 after the gap; node_end events there: "
        "#2 node_end plan patch={'total': 1}, #6 node_end a patch={'items': ['a']}, "
        "#8 node_end b patch={'items': ['b']} replayed=True"
    )
    assert lines[0] == (
        "events do not match the pattern at position 1 (pattern item 2); event 0 matched"
    )
    assert lines[5:9] == [
        "    run_start  | #0 run_start checkout thread_id='th-1'",
        "    ...        |",
        "  > node_end:c | #1 node_start plan",
        "    ...        | #2 node_end plan patch={'total': 1}",
    ]


def test_mismatch_when_pattern_runs_out() -> None:
    with pytest.raises(EventPatternMismatch) as info:
        assert_events(failed_trace(), ["run_start", "node_start", "error"])
    err = info.value
    assert (err.position, err.pattern_index) == (3, 3)
    lines = str(err).splitlines()
    assert lines[1:3] == [
        "  expected: end of events",
        "  found:    #3 edge_transition charge->__end__ (and 2 more events)",
    ]
    assert "  > <end of pattern> | #3 edge_transition charge->__end__" in lines


def test_mismatch_when_events_run_out() -> None:
    pattern = ["...", "checkpoint_saved", "run_end", "node_start"]
    with pytest.raises(EventPatternMismatch) as info:
        assert_events(failed_trace(), pattern)
    err = info.value
    assert (err.position, err.pattern_index) == (6, 3)
    lines = str(err).splitlines()
    assert lines[2] == "  found:    end of events"
    assert "  > node_start       | <end of events>" in lines


def test_mismatch_of_a_group_shows_the_events_it_covered() -> None:
    with pytest.raises(EventPatternMismatch) as info:
        assert_events(failed_trace(), ["run_start", {"node_start", "checkpoint_saved"}, "..."])
    lines = str(info.value).splitlines()
    assert lines[1:3] == [
        "  expected: {checkpoint_saved, node_start}",
        "  found:    #1 node_start charge; #2 error charge error_type='NodeFailed' "
        "message='card declined: insufficient funds'",
    ]


def test_matchers_are_shown_readably_in_the_diff() -> None:
    def big(patch: dict[str, int]) -> bool:
        return patch["total"] > 10

    pattern = [
        "run_start",
        {"type": "node_start", "node": re.compile("ch.*"), "attempt": lambda a: a > 1},
        big,
        "...",
    ]
    with pytest.raises(EventPatternMismatch) as info:
        assert_events(failed_trace(), pattern)
    lines = str(info.value).splitlines()
    assert lines[1] == "  expected: {type='node_start', node=re('ch.*'), attempt=<lambda>}"
    assert "    <big>" in "\n".join(lines)


def test_long_runs_are_elided_in_the_diff() -> None:
    events = [
        CustomEvent(seq=i, run_id=RUN, step=0, time=at(0), channel="tick", value=i)
        for i in range(200)
    ]
    assert_events(events, ["...", "custom:tick value=199"])
    with pytest.raises(EventPatternMismatch) as info:
        assert_events(events, ["custom"] * 150 + ["custom:tock", "..."])
    message = str(info.value)
    assert "matched rows not shown" in message
    assert "more rows" in message
    assert len(message.splitlines()) < 60


# --------------------------------------------------------------------------- format / diff


def test_format_events_one_compact_line_each() -> None:
    assert format_events(failed_trace()).splitlines() == [
        "#0 run_start pay thread_id='th-2'",
        "#1 node_start charge",
        "#2 error charge error_type='NodeFailed' message='card declined: insufficient funds'",
        "#3 edge_transition charge->__end__",
        "#4 checkpoint_saved checkpoint_id='cp-9'",
        "#5 run_end failed state={} error_type='NodeFailed'",
    ]


def test_format_events_shows_non_default_fields() -> None:
    lines = format_events(interrupted_trace()).splitlines()
    assert lines[8] == "#8 node_end b patch={'items': ['b']} replayed=True"
    assert lines[9] == "#9 custom progress node='b' value={'pct': 50}"
    assert lines[10].startswith("#10 interrupt review interrupts=[{'key': 'task-4:ok'")


def test_events_diff_first_divergent_event_and_window() -> None:
    left = interrupted_trace()
    right = list(left)
    right[6] = left[6].model_copy(update={"patch": {"items": ["z"]}})
    lines = events_diff(left, right)
    assert lines[:4] == [
        "event sequences differ at position 6 (left has 13 events, right has 13)",
        "  left:  #6 node_end a patch={'items': ['a']}",
        "  right: #6 node_end a patch={'items': ['z']}",
        "  patch: {'items': ['a']} != {'items': ['z']}",
    ]
    assert lines[4] == "window (positions 3..9):"
    assert "  > #6 node_end a patch={'items': ['a']}" in lines[6 + 3]
    assert lines[6 + 3].endswith("| #6 node_end a patch={'items': ['z']}")


def test_events_diff_of_different_lengths_and_equal() -> None:
    trace = failed_trace()
    assert events_diff(trace, list(trace)) == []
    lines = events_diff(trace, trace[:4])
    assert lines[:3] == [
        "event sequences differ at position 4 (left has 6 events, right has 4)",
        "  left:  #4 checkpoint_saved checkpoint_id='cp-9'",
        "  right: <end of events>",
    ]


def test_events_diff_of_different_types_lists_every_field() -> None:
    trace = failed_trace()
    other = list(trace)
    other[2] = NodeEnd(seq=2, run_id=RUN, step=0, time=at(3), node="charge", task_id="task-1",
                       started_at=at(0), finished_at=at(3))
    lines = events_diff(trace, other)
    assert "  type: 'error' != 'node_end'" in lines
    assert "  error_type: 'NodeFailed' != <absent>" in lines
    assert "  patch: <absent> != None" in lines
