"""``--graphflow-report=html:DIR``: a page for every failing test that ran a graph.

The page (``DIR/<test id>.html``, written by the process that ran the test, so it works the
same under xdist) shows the test's seed and reproduce command, the two runs of every
divergence a whole-run checker reported during the test (``explore``, ``check_determinism``,
the interrupt/resume equivalence, crash recovery, ``assert_replays``) side by side with the
first differing event marked, and the test's last run: its graph and path, timeline, state
diffs, interrupts, checkpoints, store faults and events. The failure's ``graphflow`` section
names the page.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

if TYPE_CHECKING:
    from .._engine._results import RunLeg
    from .._properties.runs._pairs import RunPair
    from ._state import ItemState

__all__ = ["PAGE_LINE", "PAIRS", "html_dir", "pages_of", "report_option", "write_page"]

PAIRS: Final = pytest.StashKey["list[RunPair]"]()
PAGE_LINE: Final = "html page: "
"""How the ``graphflow`` section of a failure names its page."""
MAX_PAIRS: Final = 3
"""Divergences a page shows (the first ones a test's checkers reported)."""


def report_option(value: str) -> str:
    """The ``--graphflow-report`` value, checked: ``short``, ``full`` or ``html:DIR``."""
    if value in ("short", "full") or (value.startswith("html:") and value[5:].strip()):
        return value
    raise argparse.ArgumentTypeError(
        f"{value!r} is not a report mode; use 'short', 'full' or 'html:DIR' (a folder for a "
        "page per failing test, e.g. html:graphflow-report)")


def html_dir(config: pytest.Config) -> Path | None:
    """The folder of ``--graphflow-report=html:DIR`` (relative to where pytest was invoked),
    or ``None``."""
    value = config.getoption("graphflow_report", None) or ""
    if not value.startswith("html:"):
        return None
    path = Path(value[5:])
    return path if path.is_absolute() else Path(config.invocation_params.dir) / path


def pages_of(reports: list[Any]) -> list[str]:
    """The pages the ``graphflow`` sections of ``reports`` name (xdist hands the sections of
    its workers' reports to the controller)."""
    return [line[len(PAGE_LINE):] for report in reports
            for name, text in getattr(report, "sections", ()) if name == "graphflow"
            for line in text.splitlines() if line.startswith(PAGE_LINE)]


def write_page(item: pytest.Item, state: ItemState | None, pairs: list[RunPair],
               folder: Path) -> Path:
    """Write the test's page into ``folder`` (created if needed); return its path."""
    from .._html._assets import document
    from .._html._pair import pair_section
    from ._record import _safe
    from ._report import reproduce_command

    parts = []
    meta = ""
    if state is not None:
        meta = (f"seed {state.settings.seed} · reproduce: "
                f"<code>{escape(reproduce_command(item, state))}</code>")
    for n, pair in enumerate(pairs[:MAX_PAIRS]):
        parts.append(pair_section(pair.left, pair.right, verdict=f"{pair.tool}: {pair.verdict}",
                                  labels=pair.labels, first=pair.first, graph=pair.graph,
                                  ident=f"pair{n}"))
    if state is not None and state.runs:
        parts.append(_last_run(list(state.runs), state))
    if not parts:
        parts.append('<section><p class="note">The test ran no graph that was recorded.</p>'
                     "</section>")
    body = (f"<header><h1>{escape(item.nodeid)}</h1><div class=\"meta\">failed · {meta}"
            f"</div></header><main>{''.join(parts)}</main>")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{_safe(item.nodeid)}.html"
    path.write_text(document(f"graphflow: {item.nodeid}", body), encoding="utf-8")
    return path


def _last_run(runs: list[RunLeg], state: ItemState) -> str:
    """The sections of the test's last run (all its legs)."""
    from .._html._model import read_run
    from .._html._page import run_sections

    legs = [runs[-1]]
    for prev in reversed(runs[:-1]):
        if not (legs[0].resumed and prev.run_id == legs[0].run_id):
            break
        legs.insert(0, prev)
    events = [e.model_dump(mode="json") for leg in legs for e in leg.events]
    answers: dict[str, Any] = {}
    for leg in legs:
        answers.update(leg.answers)
    from .._graph._builder import CompiledGraph

    store = legs[-1].store
    graph = legs[0].graph if isinstance(legs[0].graph, CompiledGraph) else None  # LangGraph's
    view = read_run(events, graph=graph, checkpoints=_checkpoints(store, legs[0].run_id),
                    initial_state=legs[0].initial_state, answers=answers,
                    faults=_faults(store if store is not None else state.faults))
    raised = legs[-1].error
    note = "" if raised is None else (
        f'<div class="verdict">the run raised {escape(type(raised).__name__)}: '
        f"{escape(str(raised))}</div>")
    return (f'<section id="last-run"><h2>The last run: {escape(view.run_id)} '
            f'<span class="status {escape(view.status)}">{escape(legs[-1].status)}</span>'
            f"</h2>{note}</section>" + run_sections(view, graph))


def _checkpoints(store: Any, run_id: str) -> list[dict[str, Any]]:
    """The run's checkpoints from its store, or none when the store cannot say (closed,
    crashed by a fault rule): the page never hides the test's own failure."""
    if store is None:
        return []
    import anyio

    from .._stores.faults._store import FaultyStore

    while isinstance(store, FaultyStore):  # read past the fault rules (and their call log)
        store = store.inner

    try:
        return [c.model_dump(mode="json") for c in anyio.run(store.list, run_id)]
    except BaseException:  # a SimulatedCrash rule is a BaseException
        return []


def _faults(store: Any) -> list[dict[str, Any]]:
    """The failed calls a FaultyStore logged."""
    from .._stores.faults._store import FaultyStore

    if not isinstance(store, FaultyStore):
        return []
    return [asdict(c) for c in store.calls if c.outcome not in ("ok", "pending")]
