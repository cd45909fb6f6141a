"""Worker processes on one PostgreSQL database: crashes, takeovers, graceful shutdown.

Real processes (``graphflow worker``), a real server, real SIGKILL and SIGTERM. Crashes are
placed exactly (a worker kills itself at a chosen point of a chosen run, see ``wgraphs``), so
each run of the test exercises the same interleaving and counts the same effects.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import anyio

from pytest_graphflow import PostgresCheckpointStore

HERE = Path(__file__).parent
GRAPHFLOW = Path(sys.executable).parent / "graphflow"


def spawn(
    dsn: str, schema: str, name: str, *, ttl: float = 1.0,
    graphs: tuple[str, ...] = ("wgraphs:effects", "wgraphs:approval"),
    options: tuple[str, ...] = (), **env: str,
) -> subprocess.Popen[str]:
    """Start ``graphflow worker`` serving ``graphs`` until no job of theirs is queued."""
    return subprocess.Popen(
        [str(GRAPHFLOW), "worker", dsn, *graphs, "--schema", schema, "--claim-ttl", str(ttl),
         "--poll", "0.05", "--name", name, "--until-done", *options],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(  # the caller's path kept after
            [str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])]), **env}, cwd=HERE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def finish(proc: subprocess.Popen[str], timeout: float = 600) -> tuple[int, str]:
    """Wait for the worker to exit; kill it (and fail) if it does not within ``timeout``."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"the worker did not exit within {timeout} s:\n{out}{err}") from None
    return proc.returncode, out + err


def effect_lines(log: Path) -> list[tuple[str, str]]:
    """(thread, attempt) of every effect the external node performed."""
    rows = [line.split("\t") for line in log.read_text().splitlines()]
    return [(thread, attempt) for thread, _n, attempt in rows]


async def enqueue(store: PostgresCheckpointStore, count: int, log: Path) -> list[str]:
    return [await store.enqueue("effects", {"n": n, "log": str(log)}) for n in range(count)]


async def audit(store: PostgresCheckpointStore, threads: list[str]) -> dict[str, str]:
    """Check every thread's run is complete and intact; return thread -> checkpointed effect."""
    effect_of: dict[str, str] = {}
    checkpoints = await store.list()
    by_thread: dict[str, list[object]] = {}
    for cp in checkpoints:
        by_thread.setdefault(cp.thread_id, []).append(cp)
    for thread in threads:
        cps = by_thread[thread]
        last = cps[-1]
        assert last.status == "completed", (thread, last.status)  # type: ignore[attr-defined]
        assert last.state["settled"] is True  # type: ignore[attr-defined]
        ids = {cp.id for cp in cps}  # type: ignore[attr-defined]
        # no checkpoint lost: every parent a run names is still there
        assert all(cp.parent_id in ids or cp.parent_id is None for cp in cps)  # type: ignore[attr-defined]
        events = await store.events(last.run_id)  # type: ignore[attr-defined]
        assert [e["seq"] for e in events] == list(range(len(events))), thread
        assert events[-1]["type"] == "run_end"
        assert events[-1]["status"] == "completed"
        effect_of[thread] = last.state["effect"]  # type: ignore[attr-defined]
    return effect_of


RUNS = int(os.environ.get("GRAPHFLOW_WORKER_RUNS", "1000"))


def test_four_workers_one_killed_every_run_completes_effects_exactly_once(
    postgres_dsn: str, fresh_pg_schema: str, tmp_path: Path
) -> None:
    """4 workers, RUNS runs; worker 0 is SIGKILLed after a checkpointed effect (in ``settle``
    of its 20th run), worker 1 right after performing an effect whose result was never
    checkpointed (in ``charge`` of its 30th run). The others take their runs over once the
    claims expire (ttl 1 s)."""
    log = tmp_path / "effects.log"
    log.touch()
    store = PostgresCheckpointStore(postgres_dsn, schema=fresh_pg_schema, claim_ttl=1.0)
    try:
        threads = anyio.run(enqueue, store, RUNS, log)
        started = time.perf_counter()
        procs = [
            spawn(postgres_dsn, fresh_pg_schema, "w0", GRAPHFLOW_TEST_DIE="settle:20"),
            spawn(postgres_dsn, fresh_pg_schema, "w1", GRAPHFLOW_TEST_DIE="charge:30"),
            spawn(postgres_dsn, fresh_pg_schema, "w2"),
            spawn(postgres_dsn, fresh_pg_schema, "w3"),
        ]
        results = [finish(p) for p in procs]
        wall = time.perf_counter() - started
        assert [code for code, _ in results] == [-signal.SIGKILL, -signal.SIGKILL, 0, 0], results
        print(f"{RUNS} runs on 4 workers (2 killed): {wall:.1f} s wall")

        jobs = anyio.run(store.jobs)
        assert Counter(j["status"] for j in jobs) == {"completed": RUNS}
        effect_of = anyio.run(audit, store, threads)
    finally:
        store.close()

    lines = effect_lines(log)
    per_attempt = Counter(attempt for _thread, attempt in lines)
    per_thread = Counter(thread for thread, _attempt in lines)
    # the checkpointed effect of every run was performed exactly once
    assert all(per_attempt[effect_of[t]] == 1 for t in threads)
    # one extra effect in all: worker 1's, performed but never checkpointed, then re-run by
    # the worker that took its run over; worker 0 died after its effect was checkpointed,
    # so its run's effect was replayed, not repeated
    assert len(lines) == RUNS + 1
    assert sorted(per_thread.values()) == [1] * (RUNS - 1) + [2]


def test_sigterm_finishes_the_step_releases_the_claim_and_hands_the_job_back(
    postgres_dsn: str, fresh_pg_schema: str, tmp_path: Path
) -> None:
    log = tmp_path / "effects.log"
    log.touch()
    store = PostgresCheckpointStore(postgres_dsn, schema=fresh_pg_schema, claim_ttl=600)
    try:
        (thread,) = anyio.run(enqueue, store, 1, log)
        code, output = finish(spawn(postgres_dsn, fresh_pg_schema, "w0", ttl=600,
                                    GRAPHFLOW_TEST_TERM="charge:1"))
        assert code == 0, output
        assert "0 runs ended (1 started, 0 continued), 1 handed back" in output
        # the step that was running finished and was saved; the claim is free at once
        latest = anyio.run(store.latest, anyio.run(store.list)[-1].run_id)
        assert latest is not None
        assert (latest.status, latest.state["effect"] != "") == ("running", True)
        claim = anyio.run(store.current_claim, thread)
        assert claim is None
        # handed back, the job is as it was: the stop was not an attempt
        assert [(j["status"], j["attempts"]) for j in anyio.run(store.jobs)] == [("queued", 0)]

        # with a claim ttl of 600 s, only a released claim lets another worker go on now
        code, output = finish(spawn(postgres_dsn, fresh_pg_schema, "w1", ttl=600))
        assert code == 0, output
        assert "1 runs ended (0 started, 1 continued)" in output
        assert [j["status"] for j in anyio.run(store.jobs)] == ["completed"]
        effect = anyio.run(audit, store, [thread])[thread]
    finally:
        store.close()
    assert effect_lines(log) == [(thread, effect)]  # charge ran once, and was replayed


# -- jobs that cannot run, and workers serving different graphs (issue 23) ----------------------


def test_poison_jobs_fail_with_their_reason_and_the_worker_moves_on(
    postgres_dsn: str, fresh_pg_schema: str, tmp_path: Path
) -> None:
    """Issue 23: "A poison job (input the graph rejects, answers that do not match, another
    tenant's thread) is retried forever, so `graphflow worker --until-done` never exits:
    cap attempts, mark it failed with the reason, move on." """
    log = tmp_path / "effects.log"
    log.touch()
    store = PostgresCheckpointStore(postgres_dsn, schema=fresh_pg_schema, claim_ttl=0.5)
    try:
        waiting = anyio.run(store.enqueue, "approval", {"n": 1})
        owned = anyio.run(lambda: store.enqueue("effects", {"n": 2, "log": str(log)},
                                                tenant_id="acme"))
        code, output = finish(spawn(postgres_dsn, fresh_pg_schema, "setup", ttl=0.5),
                              timeout=120)
        assert code == 0, output
        assert {j["thread_id"]: j["status"] for j in anyio.run(store.jobs)} == {
            waiting: "interrupted", owned: "completed"}

        refused = anyio.run(store.enqueue, "effects", {"n": "two", "log": str(log)})
        anyio.run(lambda: store.enqueue_resume(waiting, answers={"no-such-key": True}))
        anyio.run(lambda: store.enqueue("effects", {"n": 3, "log": str(log)}, thread_id=owned,
                                        tenant_id="other"))
        fine = anyio.run(store.enqueue, "effects", {"n": 4, "log": str(log)})
        code, output = finish(spawn(postgres_dsn, fresh_pg_schema, "w0", ttl=0.5,
                                    options=("--max-attempts", "2")), timeout=120)
        assert code == 0, output  # --until-done exited
        assert "3 failed after 2 attempts" in output
        jobs = {j["thread_id"]: j for j in anyio.run(store.jobs)}
    finally:
        store.close()
    assert jobs[fine]["status"] == "completed"
    reasons = {refused: "UpdateRejected: update of key 'n' by node '<input>' was rejected",
               waiting: "ResumeError: Resume answers must answer every pending interrupt",
               owned: "TenantMismatch: tenant 'other' may not use thread"}
    for thread, reason in reasons.items():
        job = jobs[thread]
        assert (job["status"], job["attempts"]) == ("failed", 2), job
        assert job["error"].startswith(f"gave up after 2 attempt(s): {reason}"), job


def test_a_job_whose_workers_all_die_fails_after_its_attempts(
    postgres_dsn: str, fresh_pg_schema: str, tmp_path: Path
) -> None:
    """A job that kills every worker that runs it (here: each dies right after its effect)
    is failed by the worker that takes it once more than ``--max-attempts`` times."""
    log = tmp_path / "effects.log"
    log.touch()
    store = PostgresCheckpointStore(postgres_dsn, schema=fresh_pg_schema, claim_ttl=0.5)
    try:
        (thread,) = anyio.run(enqueue, store, 1, log)
        options = ("--max-attempts", "2")
        for name in ("w0", "w1"):
            code, output = finish(spawn(postgres_dsn, fresh_pg_schema, name, ttl=0.5,
                                        options=options, GRAPHFLOW_TEST_DIE="charge:1"),
                                  timeout=120)
            assert code == -signal.SIGKILL, output
        code, output = finish(spawn(postgres_dsn, fresh_pg_schema, "w2", ttl=0.5,
                                    options=options), timeout=120)
        assert code == 0, output
        (job,) = anyio.run(store.jobs)
    finally:
        store.close()
    assert (job["thread_id"], job["status"]) == (thread, "failed")
    assert job["error"] == ("gave up after 2 attempt(s): each worker that took it stopped or "
                            "died before its run ended")
    assert len(effect_lines(log)) == 2  # the third worker did not run it again


def test_workers_serving_different_graphs_share_one_queue(
    postgres_dsn: str, fresh_pg_schema: str, tmp_path: Path
) -> None:
    """Issue 23: "A worker marks jobs for graphs it does not serve as failed, so workers
    serving different graphs cannot share a queue: leave them for a worker that serves
    them." """
    log = tmp_path / "effects.log"
    log.touch()
    store = PostgresCheckpointStore(postgres_dsn, schema=fresh_pg_schema, claim_ttl=1.0)

    async def fill() -> tuple[list[str], list[str]]:
        runs, asks = [], []
        for n in range(10):  # interleaved: each worker meets the other's jobs first
            asks.append(await store.enqueue("approval", {"n": n}))
            runs.append(await store.enqueue("effects", {"n": n, "log": str(log)}))
        return runs, asks

    try:
        runs, asks = anyio.run(fill)
        procs = [spawn(postgres_dsn, fresh_pg_schema, "effects-only",
                       graphs=("wgraphs:effects",)),
                 spawn(postgres_dsn, fresh_pg_schema, "approval-only",
                       graphs=("wgraphs:approval",))]
        results = [finish(p, timeout=120) for p in procs]
        assert [code for code, _ in results] == [0, 0], results
        assert "10 runs ended (10 started" in results[0][1]
        assert "10 runs ended (10 started" in results[1][1]
        jobs = {j["thread_id"]: j for j in anyio.run(store.jobs)}
        anyio.run(audit, store, runs)
    finally:
        store.close()
    assert {t: jobs[t]["status"] for t in runs} == dict.fromkeys(runs, "completed")
    assert {t: jobs[t]["status"] for t in asks} == dict.fromkeys(asks, "interrupted")
    assert all(j["error"] is None and j["attempts"] == 1 for j in jobs.values())
