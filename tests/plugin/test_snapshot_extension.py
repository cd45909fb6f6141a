"""GraphEventsExtension: the text format, and syrupy's create / pass / fail / update cycle."""

from __future__ import annotations

import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
from syrupy.filters import props
from syrupy.matchers import path_type

from graphflow_test_time import at
from pytest_graphflow._assert._snapshot import (
    FORMAT_MARKER,
    GraphEventsExtension,
    parse_snapshot_text,
    serialize_events,
)
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
    parse_event,
)
from pytest_graphflow.errors import InvalidArgument, UnsupportedFormat

RUN = "run-1"



def sample() -> list[EventBase]:
    """One event of every type, with values that need quoting and nested dicts."""
    return [
        RunStart(seq=0, run_id=RUN, step=0, time=at(0), graph_id="checkout", revision="r1",
                 thread_id="th-1"),
        NodeStart(seq=1, run_id=RUN, step=0, time=at(0), node="plan", task_id="task-1"),
        NodeEnd(seq=2, run_id=RUN, step=0, time=at(1), node="plan", task_id="task-1",
                patch={"total": 1, "note": "two words", "a": {"z": 1, "b": [True, None]}},
                started_at=at(0), finished_at=at(1)),
        EdgeTransition(seq=3, run_id=RUN, step=0, time=at(1), node="plan", source="plan",
                       target="__end__"),
        CustomEvent(seq=4, run_id=RUN, step=1, time=at(1), node="plan", channel="progress",
                    value="50"),
        InterruptEvent(seq=5, run_id=RUN, step=1, time=at(2), node="review", task_id="task-2",
                       interrupts=[Interrupt(key="task-2:ok", id="ok", node="review",
                                             task_id="task-2", payload={"q": "ship?"})]),
        ErrorEvent(seq=6, run_id=RUN, step=1, time=at(2), node="charge", task_id="task-3",
                   error_type="NodeFailed", message='said "no"\nthen\u2028left',
                   attempt=2, will_retry=True),
        CheckpointSaved(seq=7, run_id=RUN, step=1, time=at(2), checkpoint_id="cp-1"),
        RunEnd(seq=8, run_id=RUN, step=1, time=at(2), status="interrupted",
               state={"total": 1, "items": []}),
        RunStart(seq=9, run_id="run-2", step=1, time=at(5), graph_id="checkout",
                 revision="r1", thread_id="th-1", resumed_from="cp-1"),
        NodeEnd(seq=10, run_id="run-2", step=1, time=at(6), node="true", task_id="task-2",
                replayed=True, started_at=at(5), finished_at=at(5)),
    ]


EXPECTED = f"""\
{FORMAT_MARKER}
0 step=0 run_start graph_id=checkout revision=r1 run_id=run-1 thread_id=th-1 time=2025-01-01T00:00:00Z
1 step=0 node_start plan task_id=task-1
2 step=0 node_end plan patch={{"a":{{"b":[true,null],"z":1}},"note":"two words","total":1}} replayed=false started_at=2025-01-01T00:00:00Z task_id=task-1 time=2025-01-01T00:00:01Z
3 step=0 edge_transition plan source=plan target=__end__
4 step=1 custom plan channel=progress value="50"
5 step=1 interrupt review interrupts=[{{"id":"ok","key":"task-2:ok","node":"review","payload":{{"q":"ship?"}},"task_id":"task-2"}}] task_id=task-2 time=2025-01-01T00:00:02Z
6 step=1 error charge attempt=2 error_type=NodeFailed message="said \\"no\\"\\nthen\\u2028left" task_id=task-3 will_retry=true
7 step=1 checkpoint_saved checkpoint_id=cp-1
8 step=1 run_end state={{"items":[],"total":1}} status=interrupted
9 step=1 run_start graph_id=checkout resumed_from=cp-1 revision=r1 run_id=run-2 thread_id=th-1 time=2025-01-01T00:00:05Z
10 step=1 node_end "true" finished_at=2025-01-01T00:00:05Z replayed=true started_at=2025-01-01T00:00:05Z task_id=task-2 time=2025-01-01T00:00:06Z
"""  # noqa: E501


# --------------------------------------------------------------------------- the format


def test_serializes_to_the_documented_text() -> None:
    assert serialize_events(sample()) == EXPECTED


def test_serialization_is_deterministic_and_round_trips() -> None:
    events = sample()
    text = serialize_events(events)
    assert serialize_events(list(events)) == text
    rebuilt = [parse_event(d) for d in parse_snapshot_text(text)]
    assert rebuilt == events
    assert serialize_events(rebuilt) == text


def test_every_line_is_one_event_and_keys_are_sorted() -> None:
    lines = serialize_events(sample()).splitlines()
    assert lines[0] == FORMAT_MARKER
    assert len(lines) == 1 + len(sample())
    for line in lines[1:]:
        keys = re.findall(r" ([a-z_]+)=", line)[1:]  # after step=
        assert keys == sorted(keys), line


def test_empty_sequence_is_just_the_marker() -> None:
    assert serialize_events([]) == FORMAT_MARKER + "\n"
    assert parse_snapshot_text(FORMAT_MARKER + "\n") == []


@dataclass
class FakeTrace:
    events: list[EventBase]


def test_accepts_trace_like_objects_and_wire_dicts() -> None:
    events = sample()
    assert serialize_events(FakeTrace(events)) == EXPECTED
    assert serialize_events([e.model_dump(mode="json") for e in events]) == EXPECTED
    assert GraphEventsExtension().serialize(events) == EXPECTED


def test_rejects_what_is_not_events() -> None:
    with pytest.raises(InvalidArgument):
        serialize_events({"a": 1})


def test_syrupy_filters_and_matchers_apply_to_fields() -> None:
    text = serialize_events(sample()[:2], exclude=props("task_id", "revision"))
    assert text.splitlines()[1:] == [
        "0 step=0 run_start graph_id=checkout run_id=run-1 thread_id=th-1 "
        "time=2025-01-01T00:00:00Z",
        "1 step=0 node_start plan",
    ]
    masked = serialize_events(
        sample()[:2], matcher=path_type({r"\d+\.time": (str,)}, regex=True)
    )
    assert masked.splitlines()[1].endswith(' time="str"')


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("0 step=0 node_start a\n", id="no-marker"),
        pytest.param("# graphflow-events v9\n", id="other-version"),
        pytest.param(f"{FORMAT_MARKER}\n0 step=0 nonsense a\n", id="unknown-type"),
        pytest.param(f'{FORMAT_MARKER}\n0 step=0 node_end a patch={{"x":\n', id="garbled-json"),
    ],
)
def test_parse_rejects_other_text(text: str) -> None:
    with pytest.raises(UnsupportedFormat):
        parse_snapshot_text(text)


def test_extension_settings() -> None:
    assert GraphEventsExtension.file_extension == "events.txt"
    assert GraphEventsExtension.get_supported_dataclass() is str


# --------------------------------------------------------------------------- with syrupy

TEST_FILE = """
from datetime import UTC, datetime, timedelta

from pytest_graphflow._records._events import NodeEnd, NodeStart, RunEnd, RunStart
from pytest_graphflow._assert._snapshot import GraphEventsExtension

T0 = datetime(2025, 1, 1, tzinfo=UTC)
T1 = T0 + timedelta(seconds=1)


def test_events(snapshot):
    events = [
        RunStart(seq=0, run_id="run-1", step=0, time=T0, graph_id="g", revision="r",
                 thread_id="th-1"),
        NodeStart(seq=1, run_id="run-1", step=0, time=T0, node="a", task_id="task-1"),
        NodeEnd(seq=2, run_id="run-1", step=0, time=T1, node="a", task_id="task-1",
                patch={{"total": {total}}}, started_at=T0, finished_at=T1),
        RunEnd(seq=3, run_id="run-1", step=0, time=T1, status="completed",
               state={{"total": {total}}}),
    ]
    assert events == snapshot(extension_class=GraphEventsExtension)
"""


def snapshot_text(total: int) -> str:
    return textwrap.dedent(
        f"""\
        {FORMAT_MARKER}
        0 step=0 run_start graph_id=g revision=r run_id=run-1 thread_id=th-1 time=2025-01-01T00:00:00Z
        1 step=0 node_start a task_id=task-1
        2 step=0 node_end a patch={{"total":{total}}} replayed=false started_at=2025-01-01T00:00:00Z task_id=task-1 time=2025-01-01T00:00:01Z
        3 step=0 run_end state={{"total":{total}}} status=completed
        """  # noqa: E501
    )


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", *args)


@pytest.fixture
def inner(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    # The inner test file is rewritten between runs of one process: no stale bytecode.
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    # Under ``-n``, syrupy would take the in-process inner session for an xdist worker and
    # leave out the snapshot report these tests read.
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    return pytester


def snapshot_file(pytester: pytest.Pytester) -> Path:
    return pytester.path / "__snapshots__" / "test_flow" / "test_events.events.txt"


def test_snapshot_lifecycle(inner: pytest.Pytester) -> None:
    inner.makepyfile(test_flow=TEST_FILE.format(total=3))

    missing = run(inner)
    missing.assert_outcomes(failed=1)
    missing.stdout.fnmatch_lines(["*Snapshot 'test_events' does not exist!*"])
    assert not snapshot_file(inner).exists()

    created = run(inner, "--snapshot-update")
    created.assert_outcomes(passed=1)
    created.stdout.fnmatch_lines(["*1 snapshot generated*"])
    assert snapshot_file(inner).read_text(encoding="utf-8") == snapshot_text(3)

    run(inner).assert_outcomes(passed=1)

    inner.makepyfile(test_flow=TEST_FILE.format(total=4))
    changed = run(inner)
    changed.assert_outcomes(failed=1)
    changed.stdout.fnmatch_lines(
        [
            "*- 2 step=0 node_end a patch={\"total\":3} replayed=false *",
            "*+ 2 step=0 node_end a patch={\"total\":4} replayed=false *",
            "*- 3 step=0 run_end state={\"total\":3} status=completed",
            "*+ 3 step=0 run_end state={\"total\":4} status=completed",
            "*1 snapshot failed*",
        ]
    )
    assert snapshot_file(inner).read_text(encoding="utf-8") == snapshot_text(3)

    updated = run(inner, "--snapshot-update")
    updated.assert_outcomes(passed=1)
    updated.stdout.fnmatch_lines(["*1 snapshot updated*"])
    assert snapshot_file(inner).read_text(encoding="utf-8") == snapshot_text(4)

    run(inner).assert_outcomes(passed=1)


def test_graph_snapshot_fixture_defaults_to_the_extension(inner: pytest.Pytester) -> None:
    # The plugin will expose this fixture; the inner conftest stands in for it here.
    inner.makeconftest(
        """
        import pytest
        from pytest_graphflow._assert._snapshot import graph_snapshot_fixture

        @pytest.fixture
        def graph_snapshot(snapshot):
            return graph_snapshot_fixture(snapshot)
        """
    )
    inner.makepyfile(
        test_flow=TEST_FILE.format(total=3).replace(
            "test_events(snapshot)", "test_events(graph_snapshot)"
        ).replace("snapshot(extension_class=GraphEventsExtension)", "graph_snapshot")
    )
    run(inner, "--snapshot-update").assert_outcomes(passed=1)
    assert snapshot_file(inner).read_text(encoding="utf-8") == snapshot_text(3)
    run(inner).assert_outcomes(passed=1)
