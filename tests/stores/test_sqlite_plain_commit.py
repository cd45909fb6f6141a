"""A step the runtime commits to SQLite (its checkpoint and the events it dumped itself,
``DumpedEvents``) takes a short path under what the connection's previous commit knows
(issue 29). What a user relies on: the file holds exactly the bytes the general commit
writes, and every refusal of the general commit still happens — another connection taking
the thread over, a parent that is not the latest, events out of order or naming another
checkpoint, a NaN — with nothing written."""

from __future__ import annotations

import cProfile
import pstats
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from graphflow_sqlite import sqlite_rows
from pytest_graphflow import SQLiteCheckpointStore
from pytest_graphflow._records._checkpoint import Checkpoint
from pytest_graphflow._records._json import DumpedEvents
from pytest_graphflow._stores.sqlite._tail import FOLD_AT
from pytest_graphflow.errors import InvalidArgument, MalformedCommit, ParentNotLatest, StaleClaim

pytestmark = pytest.mark.anyio

T0 = datetime(2025, 1, 1, tzinfo=UTC)
RUN, THREAD = "run-p", "thread-p"


def _cp(n: int, parent: str | None = None) -> Checkpoint:
    return Checkpoint(
        id=f"cp-{n}", run_id=RUN, thread_id=THREAD, graph_id="g", revision="rev-x", step=n,
        timestamp=T0 + timedelta(seconds=n), state={"n": n, "text": "é\n\"x\""},
        parent_id=parent if parent is not None else f"cp-{n - 1}" if n else None,
        visited=tuple(f"node{i}" for i in range(n)))


def _events(n: int) -> list[dict[str, Any]]:
    return [{"seq": 3 * n, "type": "node_end", "run_id": RUN, "node": f"n{n}",
             "patch": {"text": "é\n", "x": 1.5}},
            {"seq": 3 * n + 1, "type": "edge_transition", "run_id": RUN, "target": "ü"},
            {"seq": 3 * n + 2, "type": "checkpoint_saved", "run_id": RUN,
             "checkpoint_id": f"cp-{n}"}]


async def _run(path: Path, dumped: bool, steps: int) -> None:
    with SQLiteCheckpointStore(path) as store:
        token = await store.claim(THREAD, RUN, now=T0)
        for n in range(steps):
            events = _events(n)
            await store.commit(THREAD, token, run_id=RUN, checkpoints=[_cp(n)],
                               events=DumpedEvents(events) if dumped else events)


async def test_the_runtimes_steps_store_the_bytes_the_general_commit_stores(
        tmp_path: Path) -> None:
    steps = 2 * FOLD_AT + 3  # folded twice, and pieces left in the log
    await _run(tmp_path / "plain.db", True, steps)
    await _run(tmp_path / "general.db", False, steps)
    plain, general = sqlite_rows(tmp_path / "plain.db"), sqlite_rows(tmp_path / "general.db")
    assert plain == general
    assert plain["event_pieces"]  # folded pieces
    assert plain["log"]  # and pieces in the log


async def _warm(store: SQLiteCheckpointStore, token: int, steps: int) -> None:
    for n in range(steps):
        await store.commit(THREAD, token, run_id=RUN, checkpoints=[_cp(n)],
                           events=DumpedEvents(_events(n)))


async def test_another_connection_taking_the_thread_is_seen(tmp_path: Path) -> None:
    a = SQLiteCheckpointStore(tmp_path / "s.db", claim_ttl=10)
    b = SQLiteCheckpointStore(tmp_path / "s.db")
    old = await a.claim(THREAD, RUN, now=T0)
    await _warm(a, old, 3)
    new = await b.claim(THREAD, RUN, now=T0 + timedelta(seconds=11))  # expired: taken over
    with pytest.raises(StaleClaim) as stale:
        await a.commit(THREAD, old, run_id=RUN, checkpoints=[_cp(3)],
                       events=DumpedEvents(_events(3)))
    assert (stale.value.token, stale.value.current) == (old, new)
    assert [c.id for c in await b.list(RUN)] == ["cp-0", "cp-1", "cp-2"]
    a.close()
    b.close()


@pytest.mark.parametrize("case", ["parent", "order", "names", "nan", "surrogate"])
async def test_a_warm_commit_is_refused_as_the_general_one_is(tmp_path: Path, case: str
                                                              ) -> None:
    with SQLiteCheckpointStore(tmp_path / "s.db") as store:
        token = await store.claim(THREAD, RUN, now=T0)
        await _warm(store, token, 3)
        cp, events = _cp(3, parent="cp-1" if case == "parent" else None), _events(3)
        if case == "order":
            events.reverse()
        elif case == "names":
            events[2]["checkpoint_id"] = "cp-9"
        elif case == "nan":
            events[0]["patch"]["x"] = float("nan")
        elif case == "surrogate":  # a checkpoint with no UTF-8 form
            cp = cp.model_copy(update={"state": {"n": 3, "text": "\ud800"}})
        raised = {"parent": ParentNotLatest, "order": MalformedCommit,
                  "names": MalformedCommit, "nan": InvalidArgument,
                  "surrogate": InvalidArgument}[case]
        with pytest.raises(raised):
            await store.commit(THREAD, token, run_id=RUN, checkpoints=[cp],
                               events=DumpedEvents(events))
        assert [c.id for c in await store.list(RUN)] == ["cp-0", "cp-1", "cp-2"]
        assert [e["seq"] for e in await store.events(RUN)] == list(range(9))
        await store.commit(THREAD, token, run_id=RUN, checkpoints=[_cp(3)],
                           events=DumpedEvents(_events(3)))  # the right one goes on
        assert [c.id for c in await store.list(RUN)] == ["cp-0", "cp-1", "cp-2", "cp-3"]


async def _steps_then(path: Path, dumped: bool, last: Checkpoint, after: int) -> None:
    """Warm steps past a fold, then ``last`` (through the plain commit when ``dumped``),
    then one more step."""
    with SQLiteCheckpointStore(path) as store:
        token = await store.claim(THREAD, RUN, now=T0)
        for n in range(after):
            await store.commit(THREAD, token, run_id=RUN, checkpoints=[_cp(n)],
                               events=DumpedEvents(_events(n)) if dumped else _events(n))
        events = [{"seq": 3 * after, "type": "checkpoint_saved", "run_id": RUN,
                   "checkpoint_id": last.id}]
        await store.commit(THREAD, token, run_id=RUN, checkpoints=[last],
                           events=DumpedEvents(events) if dumped else events)
        events = _events(after + 1)
        events[2]["checkpoint_id"] = "cp-next"
        nxt = _cp(after + 1, parent=last.id).model_copy(update={"id": "cp-next"})
        await store.commit(THREAD, token, run_id=RUN, checkpoints=[nxt],
                           events=DumpedEvents(events) if dumped else events)


@pytest.mark.parametrize("case", ["folded id", "nodes"])
async def test_a_plain_step_the_short_path_hands_on_stores_the_general_bytes(
        tmp_path: Path, case: str) -> None:
    # A checkpoint whose id the indexed table holds already (folded there) replaces that
    # row; one with several nodes gets their rows: both as the general commit writes them.
    after = FOLD_AT + 3
    latest = f"cp-{after - 1}"
    if case == "folded id":
        last = _cp(1, parent=latest).model_copy(
            update={"timestamp": T0 + timedelta(seconds=after)})
    else:
        last = _cp(after, parent=latest).model_copy(
            update={"node_id": "a", "node_ids": ["a", "b"]})
    await _steps_then(tmp_path / "plain.db", True, last, after)
    await _steps_then(tmp_path / "general.db", False, last, after)
    plain, general = sqlite_rows(tmp_path / "plain.db"), sqlite_rows(tmp_path / "general.db")
    assert plain == general
    with SQLiteCheckpointStore(tmp_path / "plain.db", readonly=True) as store:
        listed = [c.id for c in await store.list(RUN)]
        assert listed[-2:] == [last.id, "cp-next"]
        assert listed.count(last.id) == 1
        if case == "nodes":
            assert (await store.load(RUN, "b")) is not None


def _calls(fn: Callable[[], Awaitable[None]]) -> Callable[[], Awaitable[int]]:
    async def counted() -> int:
        profile = cProfile.Profile()
        profile.enable()
        await fn()
        profile.disable()
        return int(pstats.Stats(profile).total_calls)  # type: ignore[attr-defined]
    return counted


async def test_calls_a_plain_commit(tmp_path: Path) -> None:
    # The runtime's step commits through the store's short path: checks, one serialisation
    # each of the checkpoint and the events, four statements (counted, not timed).
    with SQLiteCheckpointStore(tmp_path / "s.db") as store:
        token = await store.claim(THREAD, RUN, now=T0)
        await _warm(store, token, 2)
        steps = [(_cp(n), DumpedEvents(_events(n))) for n in range(2, 34)]

        async def commits() -> None:
            for cp, events in steps:
                await store.commit(THREAD, token, run_id=RUN, checkpoints=[cp],
                                   events=events)

        per_commit = await _calls(commits)() / len(steps)
    # 51.6 before the short path wrote the row itself; 48.6 -> 46.6 when the events were
    # serialised at once and the row's timestamp text made inline; 43.6 with the
    # checkpoint's serialisation inline; 41.6 with the events' keys one string grown and
    # their Piece made by tuple.__new__ (no join, no generated __new__)
    assert per_commit <= 42, per_commit


_TIMES = {
    # several steps in one second, one on the second, then the next second: the row's
    # ``timestamp`` text is kept up to the second between steps (issue 29)
    "utc": [T0 + timedelta(microseconds=us) for us in (0, 1, 999_999, 1_000_000, 1_000_010,
                                                       1_500_000, 2_000_000, 2_000_001)],
    "before 1970": [datetime(1969, 12, 31, 23, 59, 59, 999_998, tzinfo=UTC)
                    + timedelta(microseconds=us) for us in range(4)],
    "other zone": [datetime(2025, 1, 1, 1, 0, 0, 5, tzinfo=timezone(timedelta(hours=2)))
                   + timedelta(seconds=n) for n in range(3)],
    "naive": [datetime(2025, 1, 1, 0, 0, 0, 7) + timedelta(microseconds=n) for n in range(3)],
}


def _odd_events(n: int, case: str) -> list[dict[str, Any]]:
    events = _events(n)
    if case == "objects in a list":  # "},{" inside an event too: each is serialised alone
        events[0]["patch"] = {"items": [{"a": 1}, {"b": "},{"}], "text": "},{\"x\":1},{"}
    elif case == "letters":  # "N" and "I", no NaN: the short path
        events[1]["target"] = "Nina In Iceland"
    elif case == "the word NaN":  # a string, not a number: the general commit stores it
        events[1]["target"] = "NaN and Infinity"
    return events


async def _odd_run(path: Path, dumped: bool, times: list[datetime], case: str) -> None:
    with SQLiteCheckpointStore(path) as store:
        token = await store.claim(THREAD, RUN, now=T0)
        for n, moment in enumerate(times):
            events = _odd_events(n, case)
            await store.commit(THREAD, token, run_id=RUN,
                               checkpoints=[_cp(n).model_copy(update={"timestamp": moment})],
                               events=DumpedEvents(events) if dumped else events)


@pytest.mark.parametrize("case", ["objects in a list", "letters", "the word NaN", *_TIMES])
async def test_the_plain_steps_events_and_times_are_the_general_bytes(
        tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The short path serialises a step's events at once and cuts them apart, and writes the
    # row's timestamp text from the second it last saw: the same rows, events and
    # checkpoints as the general commit, whatever the events hold and the times are.
    times = _TIMES.get(case, _TIMES["utc"])
    short = SQLiteCheckpointStore._commit_plain
    taken: list[str] = []

    def counted(self: SQLiteCheckpointStore, cp: Checkpoint, events: Any) -> bool:
        taken.append(cp.id)
        return short(self, cp, events)

    monkeypatch.setattr(SQLiteCheckpointStore, "_commit_plain", counted)
    await _odd_run(tmp_path / "plain.db", True, times, case)
    # every step after the first (which reads what the file holds) took the short path
    assert len(taken) == (0 if case == "the word NaN" else len(times) - 1)
    await _odd_run(tmp_path / "general.db", False, times, case)
    plain, general = sqlite_rows(tmp_path / "plain.db"), sqlite_rows(tmp_path / "general.db")
    assert plain == general
    stamps = [row[11] for row in sorted(plain["log"], key=lambda row: row[1])]
    assert stamps == [moment.isoformat() for moment in times]
    with SQLiteCheckpointStore(tmp_path / "plain.db", readonly=True) as store:
        events = await store.events(RUN)
        assert events == [e for n in range(len(times)) for e in _odd_events(n, case)]
        assert [c.timestamp for c in await store.list(RUN)] == times
