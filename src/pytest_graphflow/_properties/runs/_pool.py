"""The parent side of the cross-process checks: a pool of worker interpreters, reused.

Starting an interpreter and importing the runtime costs a few hundred milliseconds, so the
checks share workers for the whole session: :func:`pool` returns the live workers for a set of
``PYTHONHASHSEED`` values, starting the missing ones (in parallel) on first use; they exit
when the session's interpreter does. A request is one JSON line; a worker that does not answer
within ``timeout`` seconds is killed and the check fails with a clear error.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import selectors
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any

from ...errors import GraphflowError

__all__ = ["Worker", "WorkerError", "close_all", "pool"]

DEFAULT_TIMEOUT = 120.0
"""Seconds a worker may take for one request before it is killed."""


class WorkerError(GraphflowError, RuntimeError):
    """A worker process failed: it died, timed out or could not run the request."""


class Worker:
    """One worker interpreter with a fixed ``PYTHONHASHSEED``."""

    def __init__(self, hashseed: int) -> None:
        self.hashseed = hashseed
        env = dict(os.environ)
        env["PYTHONHASHSEED"] = str(hashseed)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        # The parent's wall-clock patch (time-machine, during a run) must not leak into how a child
        # starts; the runtime patches node code itself.
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pytest_graphflow._properties.runs._worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env=env, text=True, bufsize=1,
        )
        self.requests = 0

    @property
    def alive(self) -> bool:
        """Whether the process still runs."""
        return self.proc.poll() is None

    def send(self, request: dict[str, Any]) -> None:
        """Write one request (answer it with :meth:`receive`)."""
        assert self.proc.stdin is not None
        request = {**request, "path": [p for p in sys.path if p]}
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except OSError as exc:
            raise WorkerError(f"worker (PYTHONHASHSEED={self.hashseed}) is gone: {exc}") \
                from None
        self.requests += 1

    def receive(self, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:
        """The answer to the last request.

        Raises:
            WorkerError: the worker died, timed out, or reported an error.
        """
        out = self.proc.stdout
        assert out is not None
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(out, selectors.EVENT_READ)
            while not sel.select(timeout=max(0.0, deadline - time.monotonic())):
                if time.monotonic() >= deadline:
                    self.kill()
                    raise WorkerError(f"worker (PYTHONHASHSEED={self.hashseed}) did not answer "
                                      f"within {timeout} s; it was stopped")
        line = out.readline()
        if not line:
            raise WorkerError(f"worker (PYTHONHASHSEED={self.hashseed}) exited (status "
                              f"{self.proc.wait()}) before answering")
        answer: dict[str, Any] = json.loads(line)
        if not answer.get("ok"):
            raise WorkerError(f"worker (PYTHONHASHSEED={self.hashseed}) could not run the "
                              f"request: {answer.get('error')}\n{answer.get('traceback', '')}")
        return answer

    def request(self, request: dict[str, Any], timeout: float = DEFAULT_TIMEOUT
                ) -> dict[str, Any]:
        """Send ``request`` and return its answer."""
        self.send(request)
        return self.receive(timeout)

    def kill(self) -> None:
        """Stop the process."""
        if self.alive:
            self.proc.kill()
        self.proc.wait()

    def close(self) -> None:
        """Let the process finish (closing its stdin), or stop it."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


_WORKERS: dict[tuple[str, int], Worker] = {}


def pool(hashseeds: Iterable[int], *, tag: str = "") -> list[Worker]:
    """Live workers for ``hashseeds`` (one each), started on first use and then reused.

    Workers of another ``tag`` are others: the ``fresh_call`` workers of
    ``--graphflow-processes`` (tag ``"fresh"``) must never have run a plain ``call``, which
    imports the user's modules into the worker itself.
    """
    out: list[Worker] = []
    for seed in hashseeds:
        worker = _WORKERS.get((tag, seed))
        if worker is None or not worker.alive:
            worker = _WORKERS[tag, seed] = Worker(seed)
        out.append(worker)
    return out


def request_all(workers: Sequence[Worker], requests: Sequence[dict[str, Any]],
                timeout: float = DEFAULT_TIMEOUT) -> list[dict[str, Any]]:
    """Send one request to each worker, then collect the answers (they run in parallel)."""
    for worker, req in zip(workers, requests, strict=True):
        worker.send(req)
    return [worker.receive(timeout) for worker in workers]


@atexit.register
def close_all() -> None:
    """Stop every worker (at exit, or by hand to free the processes)."""
    workers = list(_WORKERS.values())
    _WORKERS.clear()
    for worker in workers:
        worker.close()
