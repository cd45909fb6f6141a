"""graphflow_assertrepr_compare: ``==`` between event sequences explains the first difference."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from pytest_graphflow._assertrepr import graphflow_assertrepr_compare
from pytest_graphflow._events import EventBase, NodeEnd, NodeStart, RunEnd, RunStart

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def trace(total: int = 3) -> list[EventBase]:
    t1 = T0 + timedelta(seconds=1)
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
        from pytest_graphflow._assertrepr import graphflow_assertrepr_compare

        def pytest_assertrepr_compare(config, op, left, right):
            return graphflow_assertrepr_compare(op, left, right)
        """
    )
    pytester.makepyfile(
        """
        from datetime import UTC, datetime
        from pytest_graphflow._events import NodeStart

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
