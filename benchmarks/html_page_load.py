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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "html"))

from graphflow_chromium import open_page
from graphflow_html_graph import ticker_events

from pytest_graphflow import render_run_html

PROBE = ("JSON.stringify({load: performance.timing.loadEventEnd"
         " - performance.timing.navigationStart, rows: document.querySelectorAll('tr').length})")


def main(rounds: int) -> None:
    events, graph = ticker_events()
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
