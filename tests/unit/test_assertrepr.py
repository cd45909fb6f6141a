"""graphflow_assertrepr_compare: ``==`` between event sequences explains the first difference."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from graphflow_test_time import T0, at
from pytest_graphflow._assert._repr import format_event, graphflow_assertrepr_compare
from pytest_graphflow._records._events import (
    CheckpointSaved,
    EventBase,
    Interrupt,
    InterruptEvent,
    NodeEnd,
    NodeStart,
    RunEnd,
    RunStart,
)


def trace(total: int = 3) -> list[EventBase]:
    t1 = at(1)
    return [
        RunStart(seq=0, run_id="run-1", step=0, time=T0, graph_id="g", revision="r",
                 thread_id="th-1"),
        NodeStart(seq=1, run_id="run-1", step=0, time=T0, node="a", task_id="task-1"),
        NodeEnd(seq=2, run_id="run-1", step=0, time=t1, node="a", task_id="task-1",
                patch={"total": total}, started_at=T0, finished_at=t1),
        RunEnd(seq=3, run_id="run-1", step=0, time=t1, status="completed",
               state={"total": total}),
    ]


@dataclass
class FakeTrace:
    events: list[EventBase]


def test_explains_two_differing_event_lists() -> None:
    lines = graphflow_assertrepr_compare("==", trace(3), trace(4))
    assert lines is not None
    assert lines[:4] == [
        "event sequences differ at position 2 (left has 4 events, right has 4)",
        "  left:  #2 node_end a patch={'total': 3}",
        "  right: #2 node_end a patch={'total': 4}",
        "  patch: {'total': 3} != {'total': 4}",
    ]


def test_explains_trace_like_objects_and_tuples() -> None:
    lines = graphflow_assertrepr_compare("==", FakeTrace(trace(3)), tuple(trace(3)[:2]))
    assert lines is not None
    assert lines[0] == "event sequences differ at position 2 (left has 4 events, right has 2)"
    assert lines[2] == "  right: <end of events>"


@pytest.mark.parametrize(
    ("op", "left", "right"),
    [
        pytest.param("!=", trace(), trace(4), id="other-operator"),
        pytest.param("==", [1, 2], [1, 3], id="not-events"),
        pytest.param("==", trace(), [1, 2], id="one-side-not-events"),
        pytest.param("==", [], [], id="both-empty"),
        pytest.param("==", trace(), trace(), id="equal"),
        pytest.param("==", "abc", "abd", id="strings"),
        pytest.param("==", {"events": trace()}, trace(4), id="dict-is-not-a-trace"),
    ],
)
def test_declines_what_it_does_not_explain(op: str, left: object, right: object) -> None:
    assert graphflow_assertrepr_compare(op, left, right) is None


def test_a_property_that_raises_is_not_an_event_sequence() -> None:
    class Exploding:
        @property
        def events(self) -> list[EventBase]:
            raise RuntimeError("boom")

    assert graphflow_assertrepr_compare("==", Exploding(), trace()) is None


def test_pytest_shows_the_explanation(pytester: pytest.Pytester) -> None:
    # The plugin wires this hook; the inner conftest stands in for it here.
    pytester.makeconftest(
        """
        from pytest_graphflow._assert._repr import graphflow_assertrepr_compare

        def pytest_assertrepr_compare(config, op, left, right):
            return graphflow_assertrepr_compare(op, left, right)
        """
    )
    pytester.makepyfile(
        """
        from datetime import UTC, datetime
        from pytest_graphflow._records._events import NodeStart

        def ev(seq, node):
            return NodeStart(seq=seq, run_id="run-1", step=0,
                             time=datetime(2025, 1, 1, tzinfo=UTC), node=node)

        def test_events():
            assert [ev(0, "a"), ev(1, "b")] == [ev(0, "a"), ev(1, "c")]
        """
    )
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", "-vv")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "E * assert event sequences differ at position 1 (left has 2 events, right has 2)",
            "E *   left:  #1 node_start b",
            "E *   right: #1 node_start c",
            "E *   node: 'b' != 'c'",
        ]
    )


# --------------------------------------------------------------------------- long values


def paused(amount: int) -> list[EventBase]:
    """A leg that pauses at an interrupt whose payload sits deep in a long value."""
    run = "run-6732483e51aa"
    task = "task-6732483e51aa-4"
    return [
        RunStart(seq=0, run_id=run, step=0, time=T0, graph_id="order", revision="r",
                 thread_id="thread-6732483e51aa"),
        NodeStart(seq=1, run_id=run, step=0, time=T0, node="review", task_id=task),
        InterruptEvent(seq=2, run_id=run, step=0, time=T0, node="review", task_id=task,
                       interrupts=[Interrupt(key=f"{task}:ok", id="ok", node="review",
                                             task_id=task, payload={"amount": amount})]),
        CheckpointSaved(seq=3, run_id=run, step=0, time=T0,
                        checkpoint_id="cp-6732483e51aa-4"),
        RunEnd(seq=4, run_id=run, step=0, time=T0, status="interrupted",
               state={"amount": amount, "checks": ["plan", "fraud", "credit"],
                      "approved": None, "receipt": ""}),
    ]


def field_lines(lines: list[str]) -> list[str]:
    """The lines between the ``right:`` line and the window."""
    start = next(k for k, line in enumerate(lines) if line.startswith("  right: ")) + 1
    end = next(k for k, line in enumerate(lines) if line.startswith("window "))
    return lines[start:end]


def test_a_difference_deep_in_a_long_field_is_shown() -> None:
    lines = graphflow_assertrepr_compare("==", paused(120), paused(130))
    assert lines is not None
    assert lines[0] == "event sequences differ at position 2 (left has 5 events, right has 5)"
    shown = field_lines(lines)
    assert shown[0].startswith("  interrupts (long values; first difference at index ")
    left, right, caret = shown[1:4]
    assert left.startswith("    left:  …")
    assert "{'amount': 120}" in left
    assert right.startswith("    right: …")
    assert "{'amount': 130}" in right
    # The two windows start at the same character, and the caret points at the first one
    # that differs.
    col = caret.index("^")
    assert caret.strip() == "^"
    label = len("    left:  ")
    assert left[label:col] == right[label:col]
    assert (left[col], right[col]) == ("2", "3")
    assert len(shown) == 4


def test_a_long_field_that_differs_early_is_shown_from_its_start() -> None:
    a, b = trace(3), trace(4)
    long = "x" * 100
    a[2] = a[2].model_copy(update={"patch": {"total": 3, "note": long}})
    b[2] = b[2].model_copy(update={"patch": {"total": 4, "note": long}})
    lines = graphflow_assertrepr_compare("==", a, b)
    assert lines is not None
    head, left, right, caret = field_lines(lines)
    assert head == "  patch (long values; first difference at index 10):"
    assert left == "    left:  {'total': 3, 'note': '" + "x" * 58 + "…"
    assert right == "    right: {'total': 4, 'note': '" + "x" * 58 + "…"
    assert caret == " " * 21 + "^"


def test_short_fields_keep_the_one_line_form() -> None:
    lines = graphflow_assertrepr_compare("==", trace(3), trace(4))
    assert lines is not None
    assert field_lines(lines) == ["  patch: {'total': 3} != {'total': 4}"]


def test_the_window_columns_stay_aligned_with_long_events() -> None:
    lines = graphflow_assertrepr_compare("==", paused(120), paused(130))
    assert lines is not None
    window = lines[next(k for k, x in enumerate(lines) if x.startswith("window ")) + 1 :]
    # Every "|" is in one column; a left cell too wide for its column has a line of its own,
    # and its right cell follows on the next line.
    bars = {line.index(" | ") for line in window if " | " in line}
    assert len(bars) == 1, "\n".join(window)
    bar = bars.pop()
    alone = [k for k, line in enumerate(window) if " | " not in line]
    assert alone, "the interrupt rows are too wide for one line"
    for k in alone:
        assert window[k + 1][:bar].strip() in ("", ">")
    # Nothing is cut: every event of both sides is in the window as format_event renders it.
    for side in (paused(120), paused(130)):
        for ev in side:
            assert any(line.endswith(format_event(ev)) for line in window)
    # The first divergent event's rows carry the marker on both of its lines.
    marked = [line for line in window if line.startswith("  > ")]
    assert [m.split(" | ")[-1] if " | " in m else m[4:] for m in marked] == [
        format_event(paused(120)[2]), format_event(paused(130)[2])
    ]
