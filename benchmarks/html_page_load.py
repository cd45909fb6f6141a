"""How big a 10,000-event run's HTML page is and how long headless Chromium takes to load it
(issue 28: "a 10,000-event run's page opens in under 2 s and stays under 5 MB").

The size is also asserted in ``tests/html/test_page.py``; the load time is measured here only
(timings are never asserted in tests). Needs Debian's ``chromium``.

    .venv/bin/python benchmarks/html_page_load.py [ROUNDS]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from pydantic import BaseModel

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "html"))

from graphflow_chromium import open_page

from pytest_graphflow import (
    END,
    Graph,
    GraphRuntime,
    InMemoryCheckpointStore,
    VirtualClock,
    render_run_html,
)

PROBE = ("JSON.stringify({load: performance.timing.loadEventEnd"
         " - performance.timing.navigationStart, rows: document.querySelectorAll('tr').length})")


class Counter(BaseModel):
    """The ticker's state."""

    n: int = 0


def main(rounds: int) -> None:
    g = Graph("ticker", Counter)
    g.node("tick", lambda s: {"n": s.n + 1})
    g.edge("__start__", "tick")
    g.branch("tick", lambda s: "tick" if s.n < 2500 else "done", {"tick": "tick", "done": END})
    graph = g.compile()
    runtime = GraphRuntime(InMemoryCheckpointStore(), clock=VirtualClock(), seed=1,
                           max_supersteps=3000)
    events = [e.model_dump(mode="json") for e in runtime.trace(graph, {}).events]
    page_text = render_run_html(events, graph=graph)
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "run.html"
        page.write_text(page_text, encoding="utf-8")
        print(f"{len(events)} events, page {page.stat().st_size / 1e6:.2f} MB")
        for k in range(rounds):
            loaded = open_page(page, probe=PROBE, screenshot=None,
                               profile=Path(tmp) / f"profile-{k}")
            print(f"round {k + 1}: {loaded.probe}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
