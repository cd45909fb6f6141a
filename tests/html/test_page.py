"""The HTML page of a run (issue 28): "the graph with the path taken and the node where the
run paused or failed highlighted; a timeline in virtual time with one lane per task (parallel
batches side by side, sleeps and retries visible); the event table with filters; the state
after each step, as a diff from the step before; interrupts with their payloads and answers;
checkpoints and store faults where they hit." One self-contained file: no network, no CDN.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import asdict
from typing import Any

import pytest
from graphflow_html_graph import build, record, ticker_events
from pydantic import BaseModel

from pytest_graphflow import (
    FaultyStore,
    InMemoryCheckpointStore,
    StoreFault,
    VirtualClock,
    render_run_html,
)
from pytest_graphflow._html._diff import Change, state_diff
from pytest_graphflow.testing import RecordingRuntime


def page_of(**kwargs: Any) -> str:
    history, graph = record(**kwargs)
    return render_run_html(history.events, graph=graph, checkpoints=history.checkpoints,
                           initial_state=history.initial_state)


def lanes(page: str) -> list[dict[str, Any]]:
    """Each lane of the timeline: its classes, node, step, bar's x and width, and note."""
    found = re.finditer(
        r'<g class="lane ([^"]*)" data-task="[^"]*" data-node="([^"]*)" data-step="(\d+)">'
        r'.*?<rect x="([\d.]+)" y="[\d.]+" width="([\d.]+)".*?<text class="note"[^>]*>'
        r"([^<]*)</text></g>", page, re.S)
    return [{"classes": m[1].split(), "node": m[2], "step": int(m[3]), "x": float(m[4]),
             "width": float(m[5]), "note": m[6]} for m in found]


def node_classes(page: str) -> dict[str, list[str]]:
    return {m[2]: m[1].split() for m in re.finditer(
        r'<g class="(node[^"]*)" data-node="([^"]*)">', page)}


def taken_edges(page: str) -> set[tuple[str, str]]:
    return {(m[2], m[3]) for m in re.finditer(
        r'<g class="edge ([^"]*)" data-source="([^"]*)" data-target="([^"]*)">', page)
        if "taken" in m[1].split()}


def diff_rows(page: str, step: str) -> list[tuple[str, str, str, str]]:
    """``(kind, path, before, after)`` rows of the diff of ``step`` (``"leg 2 · step 3"``)."""
    section = page.split(f"<h3 id=\"step-{step}\">", 1)[1].split("<h3", 1)[0]
    return [(m[1], m[2], m[3], m[4]) for m in re.finditer(
        r'<tr class="diff-row (\w+)"><td class="v">([^<]*)</td><td class="v before">([^<]*)'
        r'</td><td class="v after">([^<]*)</td></tr>', section)]


def test_the_graph_shows_the_path_taken_and_the_node_where_the_run_paused() -> None:
    page = page_of(answer=None)
    nodes = node_classes(page)
    assert "halt" in nodes["review"]
    assert "ran" in nodes["review"]
    assert "ran" not in nodes["charge"]
    assert "halt" not in nodes["plan"]
    assert taken_edges(page) == {("__start__", "plan"), ("plan", "risk"), ("plan", "stock"),
                                 ("risk", "review"), ("stock", "review")}
    assert "The run paused at <b class=\"halted\">review</b>" in page


def test_the_graph_highlights_the_node_where_the_run_failed() -> None:
    page = page_of(broken=True)
    assert '<span class="status failed">failed</span>' in page
    nodes = node_classes(page)
    assert [n for n, c in nodes.items() if "halt" in c] == ["charge"]
    assert "The run failed at <b class=\"halted\">charge</b>" in page


def test_the_timeline_has_a_lane_per_task_with_parallel_tasks_sleeps_and_retries() -> None:
    found = lanes(page_of())
    assert [(lane["node"], lane["step"]) for lane in found] == [
        ("plan", 0), ("risk", 1), ("stock", 1), ("review", 2), ("review", 2), ("charge", 3)]
    _plan, risk, stock, paused, resumed, charge = found
    assert risk["x"] == stock["x"]  # the parallel batch, side by side
    assert paused["x"] == pytest.approx(risk["x"] + risk["width"])  # after the batch's 1 s
    assert risk["width"] == pytest.approx(2 * stock["width"], abs=0.2)  # slept 1 s, 0.5 s
    assert risk["note"] == "1s"
    assert stock["note"] == "0.5s"
    assert "paused" in paused["classes"]
    assert "done" in resumed["classes"]
    assert "retried" in charge["classes"]
    assert charge["note"] == "2.5s, 2 attempts"  # 0.25 s, a 2 s backoff, 0.25 s


def test_the_state_after_each_step_is_a_diff_from_the_step_before() -> None:
    page = page_of()
    assert diff_rows(page, "1-0") == [("added", "log[0]", "", "&quot;plan&quot;")]
    assert diff_rows(page, "1-1") == [("added", "log[1]", "", "&quot;risk&quot;"),
                                      ("added", "log[2]", "", "&quot;stock&quot;")]
    assert diff_rows(page, "2-2") == [("added", "log[3]", "", "&quot;review:yes&quot;"),
                                      ("changed", "approved", "null", "true")]
    assert diff_rows(page, "2-3") == [("added", "log[4]", "", "&quot;charge&quot;"),
                                      ("changed", "receipt", "&quot;&quot;",
                                       "&quot;rcpt-2&quot;")]


def test_without_checkpoints_the_graph_s_reducers_fold_the_patches() -> None:
    history, graph = record()
    page = render_run_html(history.events, graph=graph, initial_state=history.initial_state)
    assert diff_rows(page, "1-1") == [("added", "log[1]", "", "&quot;risk&quot;"),
                                      ("added", "log[2]", "", "&quot;stock&quot;")]
    assert "patches folded with the graph's reducers" in page


def test_interrupts_show_their_payload_and_answer() -> None:
    answered = re.findall(r'<tr class="interrupt" data-key="[^"]*"><td>review</td><td>[^<]*'
                          r'</td><td class="v">([^<]*)</td><td class="v">([^<]*)</td>',
                          page_of())
    assert answered == [("{&quot;item&quot;:&quot;lamp&quot;}", "&quot;yes&quot;")]
    waiting = re.findall(r'<td class="v">([^<]*)</td></tr>', page_of(answer=None).split(
        'id="interrupts"')[1].split("</table>")[0])
    assert waiting == ["(not answered)"]


def test_checkpoints_and_store_faults_are_listed_where_they_hit() -> None:
    graph = build()
    store = FaultyStore(InMemoryCheckpointStore())
    store.fail("save", nth=3)
    runtime = RecordingRuntime(store, clock=VirtualClock(), seed=3)
    with pytest.raises(StoreFault):
        runtime.invoke(graph, {"item": "lamp"})
    assert runtime.last_recording is not None
    events = [e.model_dump(mode="json") for e in runtime.last_recording.events]
    faults = [asdict(c) for c in store.calls if c.outcome != "ok"]
    assert [f["op"] for f in faults] == ["save"]
    page = render_run_html(events, graph=graph, faults=faults)
    assert page.count('<tr class="checkpoint">') == 2  # the two saves that went through
    assert page.count('<tr class="fault">') == 1
    assert '<line class="fault"' in page  # a red line across the lanes
    assert "save(" in page.split('id="checkpoints"')[1]


class Note(BaseModel):
    text: str = ""


@pytest.mark.parametrize("value", [
    "<script>alert(1)</script>",
    "</td><img src=x onerror=alert(2)>",
    '"><svg onload=alert(3)>',
    "</style></script><!--",
], ids=["script-tag", "img-onerror", "attribute-breakout", "close-style-and-comment"])
def test_user_data_is_escaped_everywhere_it_is_shown(value: str) -> None:
    """A state, a payload, a node's patch and an answer all carry the value."""
    history, graph = record(item=value, answer=value)
    page = render_run_html(history.events, graph=graph, checkpoints=history.checkpoints,
                           initial_state=history.initial_state, title=value)
    assert page.count("<script") == 1  # the page's own, at the end
    for marker in ("<img", "<svg onload", "</style></script>", "<!--"):
        assert marker not in page
    assert "&lt;" in page


def test_the_page_can_load_nothing() -> None:
    """Its Content-Security-Policy allows no source at all but its own inline style and
    script (by hash), and nothing in it names a URL to fetch."""
    page = page_of()
    policy = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', page)
    assert policy is not None
    rules = dict(rule.strip().split(" ", 1) for rule in policy[1].split(";"))
    assert rules["default-src"] == "'none'"
    style = page.split("<style>", 1)[1].split("</style>", 1)[0]
    script = page.split("<script>", 1)[1].split("</script>", 1)[0]
    for text, rule in ((style, "style-src"), (script, "script-src")):
        digest = base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
        assert rules[rule] == f"'sha256-{digest}'"
    assert not re.search(r'\s(src|href|action|srcset)="(?!#)', page)
    assert "url(" not in page.replace("url(#run-arrow)", "")


def test_a_ten_thousand_event_run_s_page_stays_under_5_mb() -> None:
    events, graph = ticker_events()
    assert len(events) >= 10_000
    page = render_run_html(events, graph=graph)
    assert len(page.encode("utf-8")) < 5 * 1024 * 1024
    assert page.count('<tr class="t-') == len(events)  # every event is in the table


@pytest.mark.parametrize(("before", "after", "expected"), [
    ({"a": 1}, {"a": 1}, []),
    ({"a": 1}, {"a": 2}, [Change("a", "changed", 1, 2)]),
    ({}, {"a": 1}, [Change("a", "added", None, 1)]),
    ({"a": 1}, {}, [Change("a", "removed", 1, None)]),
    ({"log": ["x"]}, {"log": ["x", "y"]}, [Change("log[1]", "added", None, "y")]),
    ({"log": ["x", "y"]}, {"log": ["x"]}, [Change("log[1]", "removed", "y", None)]),
    ({"d": {"k": [1, {"z": 0}]}}, {"d": {"k": [1, {"z": 1}]}},
     [Change("d.k[1].z", "changed", 0, 1)]),
    ({"a": 1}, {"a": 1.0}, [Change("a", "changed", 1, 1.0)]),
    ({"a": 1}, {"a": "1"}, [Change("a", "changed", 1, "1")]),
], ids=["same", "changed", "added", "removed", "list-grew", "list-shrank", "nested",
        "int-to-float", "int-to-text"])
def test_state_diff_names_each_changed_path(before: dict[str, Any], after: dict[str, Any],
                                            expected: list[Change]) -> None:
    assert state_diff(before, after) == expected
