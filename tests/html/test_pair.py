"""Two runs side by side (issue 28): "the page puts the two runs side by side and marks the
first differing event"."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_graphflow._html._pair import first_difference, render_pair_html


def ev(seq: int, kind: str, run: str = "run-aaaa", **fields: Any) -> dict[str, Any]:
    return {"seq": seq, "run_id": run, "step": 0, "time": "2025-01-01T00:00:00Z",
            "type": kind, **fields}


RUN = [ev(0, "run_start", thread_id="thread-aaaa"), ev(1, "node_start", node="a"),
       ev(2, "run_end", status="completed", state={"n": 1})]


@pytest.mark.parametrize(("right", "expected"), [
    (RUN, None),
    ([{**e, "run_id": "run-bbbb", **({"thread_id": "thread-bbbb"} if "thread_id" in e else {})}
      for e in RUN], None),
    ([*RUN[:2], ev(2, "run_end", status="completed", state={"n": 2})], 2),
    (RUN[:2], 2),
    ([*RUN, ev(3, "custom")], 3),
    ([RUN[0], ev(1, "node_start", node="b"), RUN[2]], 1),
], ids=["same", "other-run-ids", "last-differs", "right-shorter", "right-longer",
        "other-node"])
def test_first_difference_is_the_first_event_that_differs_run_ids_aside(
        right: list[dict[str, Any]], expected: int | None) -> None:
    assert first_difference(RUN, right) == expected


def test_a_stream_that_ends_early_is_marked_where_it_ends() -> None:
    page = render_pair_html(RUN, RUN[:2], verdict="one run stopped",
                            labels=("whole", "cut short"))
    assert '<tr class="first-diff" id="pair-first-0"><td>2</td>' in page
    assert ('<tr class="first-diff" id="pair-first-1"><td>2</td><td colspan="3">(no more '
            "events: the stream ends here)</td></tr>") in page
    assert '<a href="#pair-first-0">#2</a>' in page
