"""Running the store conformance machine: a machine class for a store factory, a one-line
run inside any test, and a ``unittest.TestCase`` for pytest to collect.
"""

from __future__ import annotations

import unittest
from collections.abc import Callable, Mapping
from typing import Any

from hypothesis import HealthCheck, Phase
from hypothesis import settings as Settings
from hypothesis.stateful import run_state_machine_as_test

from .._progress import Progress, ProgressCallback, check_progress, report_progress
from ._machine import StoreConformance

__all__ = ["run_store_conformance", "store_conformance_machine", "store_conformance_test"]


def store_conformance_machine(
    factory: Callable[[], Any],
    *,
    backend: str = "asyncio",
    backend_options: Mapping[str, Any] | None = None,
    name: str | None = None,
    virtual_time: bool = True,
    progress: ProgressCallback | None = None,
) -> type[StoreConformance]:
    """A :class:`StoreConformance` subclass whose stores come from ``factory``.

    Args:
        factory: returns a fresh, empty store (or an awaitable of one) each time it is called.
        backend: the anyio backend to run the store on.
        backend_options: options for that backend.
        name: the class name (default: ``StoreConformance[<factory name>]``).
        virtual_time: run the store's loop on a virtual clock; ``False`` for a store doing
            network I/O on the loop (see :class:`StoreConformance`).
        progress: ``progress(p: Progress)``, called as each example (a program of store
            calls, shrinking included) starts (phase ``"examples"``).

    Returns:
        The machine class; run it with ``run_state_machine_as_test`` or expose ``.TestCase``.
    """
    callback = check_progress(progress, "store_conformance_machine")
    examples = [0]

    class FactoryConformance(StoreConformance):
        def __init__(self) -> None:
            examples[0] += 1
            report_progress(callback, Progress("store conformance", "examples", examples[0],
                                               detail=f"example {examples[0]}"))
            super().__init__()

        def make_store(self) -> Any:
            return factory()

    FactoryConformance.backend = backend
    FactoryConformance.virtual_time = virtual_time
    FactoryConformance.backend_options = None if backend_options is None else dict(
        backend_options
    )
    label = name or f"StoreConformance[{getattr(factory, '__qualname__', repr(factory))}]"
    FactoryConformance.__name__ = FactoryConformance.__qualname__ = label
    return FactoryConformance


STEPS = 50
"""Rule steps per example by default (at most): every rule of the contract fails within a
few calls, so longer programs only cost time (a store's run stays within seconds under the
``graphflow-ci`` profile); pass ``settings=`` for longer ones."""


def _default_settings() -> Settings:
    # Each example starts an event loop in a thread: a deadline would measure that, not the store.
    # The explain phase re-runs the shrunk program many times; the report's list of store
    # calls explains a failure already. One bug is reported: looking on for more stops after
    # ten seconds of real time, so which failure gets shrunk (and the calls the report lists)
    # would depend on how loaded the machine is.
    profile = Settings.default
    assert profile is not None  # Hypothesis always has a loaded profile
    return Settings(deadline=None, suppress_health_check=[HealthCheck.too_slow],
                    stateful_step_count=min(STEPS, profile.stateful_step_count),
                    report_multiple_bugs=False,
                    phases=[p for p in profile.phases if p is not Phase.explain])


def run_store_conformance(
    factory: Callable[[], Any],
    *,
    backend: str = "asyncio",
    backend_options: Mapping[str, Any] | None = None,
    settings: Settings | None = None,
    virtual_time: bool = True,
    progress: ProgressCallback | None = None,
) -> None:
    """Run the store conformance machine against stores made by ``factory``.

    Example:
        >>> def test_sqlite_store_conforms(tmp_path):
        ...     run_store_conformance(lambda: SQLiteCheckpointStore(tmp_path / f"{uuid4()}.db"))

    Args:
        factory: returns a fresh, empty store (or an awaitable of one).
        backend: ``"asyncio"`` or ``"trio"``.
        backend_options: options for the backend.
        settings: Hypothesis settings (``max_examples``, ``stateful_step_count``, ...); by
            default the active profile with no deadline, no explain phase and at most
            ``STEPS`` (50) steps per example.
        virtual_time: run the store's loop on a virtual clock (each call then has
            ``call_timeout`` virtual seconds); ``False`` for a store doing network I/O on
            the loop.
        progress: ``progress(p: Progress)``, called as each example starts and once all are
            done (phase ``"examples"``).

    Raises:
        AssertionError: naming the store method and the contract rule it broke, after
            Hypothesis has shrunk the failing program of calls (printed above it).
    """
    progress = check_progress(progress, "run_store_conformance")
    done: list[Progress] = []

    def seen(p: Progress) -> None:
        done[:] = [p]
        if progress is not None:
            progress(p)

    machine = store_conformance_machine(factory, backend=backend, backend_options=backend_options,
                                        virtual_time=virtual_time, progress=seen)
    run_state_machine_as_test(machine, settings=settings or _default_settings())
    count = done[0].done if done else 0
    report_progress(progress, Progress("store conformance", "examples", count, count,
                                       finished=True, detail="every contract rule held"))


def store_conformance_test(
    factory: Callable[[], Any],
    *,
    backend: str = "asyncio",
    backend_options: Mapping[str, Any] | None = None,
    settings: Settings | None = None,
    name: str | None = None,
    virtual_time: bool = True,
) -> type[unittest.TestCase]:
    """A ``unittest.TestCase`` class running the conformance machine, for pytest to collect.

    Example:
        >>> TestMyStore = store_conformance_test(lambda: MyStore())

    Args:
        factory: returns a fresh, empty store (or an awaitable of one).
        backend: ``"asyncio"`` or ``"trio"``.
        backend_options: options for the backend.
        settings: Hypothesis settings; by default as for :func:`run_store_conformance`.
        virtual_time: as for :func:`run_store_conformance`.
        name: the machine's name in reports.

    Returns:
        The test case class (its one test is ``runTest``).
    """
    machine = store_conformance_machine(
        factory, backend=backend, backend_options=backend_options, name=name,
        virtual_time=virtual_time,
    )
    case = machine.TestCase
    case.settings = settings or _default_settings()
    return case
