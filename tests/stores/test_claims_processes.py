"""Exactly once across processes (issue 11, SPEC §5, seed 004): real processes race on one
SQLite file, and on one PostgreSQL database — a live run against another process's
recover/resume, N racing recovers, N racing resumes, N racing new runs — and exactly one
advances each time, the others get
``ThreadBusy``/``NotSuspended``/``NothingToRecover`` with a message naming the fix, and no
``external`` effect runs twice (effects are counted as lines appended to a file).

The deterministic tests force the interleaving with ``multiprocessing.Event``s: the winner
holds the thread inside its ``external`` node until every other process has answered. The
randomised stress run lets them race freely for 24 rounds. No test sleeps: processes wait on
queues and events (each wait bounded).
"""

from __future__ import annotations

import multiprocessing
import queue
import random
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

from pytest_graphflow import (
    FaultyStore,
    GraphRuntime,
    SimulatedCrash,
    VirtualClock,
)

HERE = Path(__file__).parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
import race_worker  # noqa: E402

WORKERS = 4
WAIT = 60.0
"""Seconds any one wait may take before the test gives up (never reached when it passes)."""

FIXES = {
    "ThreadBusy": ["retry once that run has suspended or completed"],
    "NotSuspended": ["nothing to resume. Start a new run", "resume it without a Resume"],
    "NothingToRecover": ["start a new run on it instead"],
}
"""What each loser's message must say to do."""


class Pool:
    """Worker processes (spawned once per module) and the gate they share."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.inside = ctx.Event()
        self.go = ctx.Event()
        self.results: Any = ctx.Queue()
        self.queues: list[Any] = [ctx.Queue() for _ in range(WORKERS)]
        self.procs = [ctx.Process(target=race_worker.serve, daemon=True,
                                  args=(i, q, self.results, self.inside, self.go))
                      for i, q in enumerate(self.queues)]
        for p in self.procs:
            p.start()
        ready = {self._get()[0] for _ in self.procs}
        assert ready == set(range(WORKERS))

    def _get(self) -> tuple[Any, ...]:
        try:
            return tuple(self.results.get(timeout=WAIT))
        except queue.Empty:
            self.go.set()  # free a blocked winner before failing
            raise AssertionError("a worker did not answer: more than one run may be holding "
                                 "the gate (two winners) or a worker hung") from None

    def race(self, cmds: list[dict[str, Any]], *, gated: bool,
             holder: dict[str, Any] | None = None) -> tuple[Any, list[Any]]:
        """Run ``cmds`` on workers at once; with ``gated`` the winner holds the thread in its
        effect until all the others answered. ``holder`` first takes the thread (and holds it)
        before the others start. Returns (the holder's outcome, the others' outcomes)."""
        self.inside.clear()
        self.go.clear()
        held = None
        offset = 0
        if holder is not None:
            self.queues[0].put({**holder, "gated": True})
            assert self.inside.wait(WAIT), "the holder never reached its effect"
            offset = 1
        for i, cmd in enumerate(cmds):
            self.queues[i + offset].put({**cmd, "gated": gated})
        outcomes: list[Any] = []
        expected = len(cmds) + offset
        first = len(cmds) - 1 if gated and holder is None else len(cmds)
        while len(outcomes) < first:
            got = self._get()
            if got[0] == 0 and holder is not None:
                held = got
                continue
            outcomes.append(got)
        self.go.set()
        while len(outcomes) + (held is not None) < expected:
            got = self._get()
            if got[0] == 0 and holder is not None:
                held = got
            else:
                outcomes.append(got)
        return held, outcomes

    def close(self) -> None:
        for q in self.queues:
            q.put(None)
        for p in self.procs:
            p.join(timeout=WAIT)
            if p.is_alive():  # pragma: no cover - a hung worker
                p.kill()


@pytest.fixture(scope="module")
def pool() -> Iterator[Pool]:
    workers = Pool()
    yield workers
    workers.close()


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, ...]:
    """Where the races run: a SQLite file, or a PostgreSQL schema (dropped afterwards)."""
    if request.param == "sqlite":
        return ("sqlite", str(tmp_path))
    dsn: str = request.getfixturevalue("postgres_dsn")
    return ("postgres", dsn, request.getfixturevalue("fresh_pg_schema"))


class Scene:
    """One race's store, thread, effects file and base run."""

    def __init__(self, tmp: Path, name: str, backend: tuple[str, ...]) -> None:
        # a file per scene; on PostgreSQL the test's schema (each scene has its own thread)
        self.store = ((backend[0], str(tmp / f"{name}.db")) if backend[0] == "sqlite"
                      else backend)
        self.effects = tmp / f"{name}.effects"
        self.effects.touch()
        self.fail_flag = str(tmp / f"{name}.decline")
        self.thread = f"thread-{name}"
        self.run_id: str | None = None

    def cmd(self, kind: str, graph: str = "plain") -> dict[str, Any]:
        return {"kind": kind, "store": self.store, "thread": self.thread, "run_id": self.run_id,
                "graph": graph, "effects": str(self.effects), "fail_flag": self.fail_flag}

    def base(self, how: str) -> None:
        """Leave the thread failed, interrupted, crashed (claim left behind) or empty."""
        graph = race_worker.build("asking" if how == "interrupted" else "plain",
                                  str(self.effects), self.fail_flag)
        with race_worker.open_store(self.store) as store:
            if how == "failed":
                Path(self.fail_flag).touch()
                result = GraphRuntime(store).invoke(graph, thread_id=self.thread)
                assert result.status == "failed"
                self.run_id = result.run_id
            elif how == "interrupted":
                result = GraphRuntime(store).invoke(graph, thread_id=self.thread)
                assert result.status == "interrupted"
                self.run_id = result.run_id
            elif how == "crashed":
                # A process died after prep's commit; its claim (on its clock, long ago)
                # stays in the store until it expires.
                faulty = FaultyStore(store).crash_at("commit", nth=2, phase="after")
                past = VirtualClock(start=datetime(2020, 1, 1, tzinfo=UTC))
                with pytest.raises(SimulatedCrash):
                    GraphRuntime(faulty, clock=past, seed=0).invoke(graph,
                                                                    thread_id=self.thread)
                claim = anyio.run(store.current_claim, self.thread)
                assert claim is not None  # the dead process never released it
                self.run_id = claim[0]
        assert self.effect_lines() == []

    def effect_lines(self) -> list[str]:
        return self.effects.read_text().splitlines()

    def check_store(self, advanced: list[str]) -> None:
        """Runs never interleave on the thread; every advanced run's log has no seq gap and
        ends with run_end; its run record says what its last checkpoint says."""
        with race_worker.open_store(self.store) as store:
            cps = anyio.run(lambda: store.list(thread_id=self.thread))
            order = [c.run_id for c in cps]
            blocks = [r for i, r in enumerate(order) if i == 0 or order[i - 1] != r]
            assert len(blocks) == len(set(blocks)), f"runs interleaved on the thread: {order}"
            for run_id in advanced:
                seqs = [e["seq"] for e in anyio.run(store.events, run_id)]
                assert seqs == list(range(len(seqs))), f"gap in the events of {run_id}"
                record = anyio.run(store.run, run_id)
                latest = anyio.run(store.latest, run_id)
                assert record is not None
                assert latest is not None
                assert record["status"] == latest.status == "completed"


def _losers(outcomes: list[Any], allowed: set[str]) -> list[Any]:
    advanced = [o for o in outcomes if o[1] == "advanced"]
    for _idx, name, message, _run in outcomes:
        if name == "advanced":
            continue
        assert name in allowed, f"unexpected outcome {name}: {message}"
        assert any(fix in message for fix in FIXES[name]), \
            f"{name} does not name the fix: {message}"
    return advanced


# -- deterministic interleavings ----------------------------------------------------------------


@pytest.mark.parametrize("challenge", ["recover", "resume"])
def test_a_live_run_against_other_processes(
    pool: Pool, tmp_path: Path, challenge: str, backend: tuple[str, ...]
) -> None:
    """A live run holds the thread: other processes' recover/resume get ThreadBusy until it
    ends, and its effect runs once."""
    scene = Scene(tmp_path, "live", backend)
    scene.base("failed")  # a failed run, recovered by a holder process that stays live
    held, outcomes = pool.race([scene.cmd(challenge)] * (WORKERS - 1), gated=False,
                               holder=scene.cmd("recover"))
    assert held is not None
    assert held[1:3] == ("advanced", "completed"), held
    assert _losers(outcomes, {"ThreadBusy"}) == []
    assert len(outcomes) == WORKERS - 1
    assert len(scene.effect_lines()) == 1
    scene.check_store([held[3]])


@pytest.mark.parametrize(("kind", "base", "graph"), [
    ("recover", "failed", "plain"),
    ("recover", "crashed", "plain"),
    ("resume", "interrupted", "asking"),
    ("new", "none", "plain"),
], ids=["recovers-of-a-failed-run", "recovers-of-a-crashed-run", "resumes-of-an-interrupt",
        "new-runs-on-one-thread"])
def test_n_racing_processes_one_advances(
    pool: Pool, tmp_path: Path, kind: str, base: str, graph: str, backend: tuple[str, ...]
) -> None:
    """N processes ask for the same thread at once; the winner holds it until all the others
    answered: exactly one advances, the others get ThreadBusy, one effect."""
    scene = Scene(tmp_path, kind, backend)
    scene.base(base)
    _, outcomes = pool.race([scene.cmd(kind, graph)] * WORKERS, gated=True)
    advanced = _losers(outcomes, {"ThreadBusy"})
    assert [(o[1], o[2]) for o in advanced] == [("advanced", "completed")], outcomes
    assert len(scene.effect_lines()) == 1
    scene.check_store([advanced[0][3]])


# -- randomised stress ---------------------------------------------------------------------------

ROUNDS = 24


def test_randomised_races_never_run_an_effect_twice(
    pool: Pool, tmp_path: Path, backend: tuple[str, ...]
) -> None:
    """24 rounds of free races (random scenario, 2–4 processes, no gate): runs on the thread
    never interleave, recovers and resumes of one run advance exactly once, and every effect
    belongs to exactly one advanced run."""
    rng = random.Random(11)
    tally = {"rounds": 0, "advanced": 0, "lost": 0}
    for n in range(ROUNDS):
        kind, base, graph, allowed = rng.choice([
            ("recover", "failed", "plain", {"ThreadBusy", "NothingToRecover"}),
            ("recover", "crashed", "plain", {"ThreadBusy", "NothingToRecover"}),
            ("resume", "interrupted", "asking", {"ThreadBusy", "NotSuspended"}),
            ("new", "none", "plain", {"ThreadBusy"}),
        ])
        scene = Scene(tmp_path, f"r{n}", backend)
        scene.base(base)
        racers = rng.randint(2, WORKERS)
        _, outcomes = pool.race([scene.cmd(kind, graph)] * racers, gated=False)
        advanced = _losers(outcomes, allowed)
        assert all(o[2] == "completed" for o in advanced), outcomes
        if kind == "new":
            assert advanced, outcomes  # someone got the thread
        else:
            assert len(advanced) == 1, f"round {n} ({kind} of a {base} run): {outcomes}"
        effects = scene.effect_lines()
        assert sorted(line.split()[0] for line in effects) == sorted(o[3] for o in advanced), \
            f"round {n}: effects {effects} vs advanced {advanced}"
        scene.check_store([o[3] for o in advanced])
        tally["rounds"] += 1
        tally["advanced"] += len(advanced)
        tally["lost"] += racers - len(advanced)
    assert tally["rounds"] == ROUNDS
    assert tally["lost"] > 0
    print(f"stress: {tally}")
