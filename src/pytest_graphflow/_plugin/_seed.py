"""Seeds of the pytest plugin: one session seed, one seed per test (the pytest-randomly way).

The session seed is resolved once, on the xdist controller (or the only process): from
``--graphflow-seed``, else the ``graphflow_seed`` ini key, else at random from ``os.urandom``.
Workers receive it through ``workerinput`` instead of resolving their own.

A test's seed is ``(session_seed + crc32(node id)) % 2**32``. It depends on nothing but the
session seed and the test's own node id, so a test keeps its seed when other tests are
added, deselected, reordered or spread over xdist workers. ``zlib.crc32`` is used rather than
``hash()``, which changes from process to process with ``PYTHONHASHSEED``.

A test that takes a snapshot (``graph_snapshot``, or syrupy's ``snapshot``) compares what it
ran with a file recorded in an earlier session, so its seed must not follow the session seed:
it is ``crc32(node id)`` alone (:func:`snapshot_seed`), the same in every session.

This module imports nothing heavy: ``plugin.py`` uses it at configure time.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass, replace
from typing import Any, Final, Literal

import pytest

__all__ = [
    "SEED_LIMIT",
    "STORES",
    "SessionSettings",
    "XdistHooks",
    "parse_seed",
    "parse_store",
    "random_seed",
    "resolve_session",
    "snapshot_seed",
    "test_seed",
]

SEED_LIMIT: Final = 2**32
"""Seeds are integers in ``range(SEED_LIMIT)``."""

STORES: Final = ("memory", "sqlite", "postgres")
"""The checkpoint stores the plugin can build (``--graphflow-store``, the marker's ``store``)."""

StoreKind = Literal["memory", "sqlite", "postgres"]

POSTGRES_DSN_ENV: Final = "GRAPHFLOW_POSTGRES_DSN"
"""The environment variable read when neither the option nor the ini key gives a DSN."""
SeedSource = Literal["option", "ini", "random", "controller"]

WORKERINPUT_KEY: Final = "graphflow_seed"


@dataclass(frozen=True)
class SessionSettings:
    """What the whole session shares.

    Attributes:
        seed: the session seed.
        seed_source: where it came from (``option``, ``ini``, ``random`` or ``controller``
            on an xdist worker).
        store: the default checkpoint store of the session.
        store_from_option: whether ``store`` was given on the command line (then the
            reproduce command repeats it).
        postgres_dsn: the PostgreSQL server of ``postgres`` stores, if one was given.
    """

    seed: int
    seed_source: SeedSource
    store: StoreKind
    store_from_option: bool = False
    postgres_dsn: str | None = None


def random_seed() -> int:
    """A fresh seed from ``os.urandom`` (never from the time, never from ``random``)."""
    return int.from_bytes(os.urandom(4), "big")


def parse_seed(value: object, where: str) -> int | None:
    """Parse a seed given as text or int; ``None`` for ``"random"``.

    Raises:
        pytest.UsageError: for anything but an int in ``range(2**32)`` or ``"random"``.
    """
    if isinstance(value, bool):
        raise _seed_error(value, where)
    if isinstance(value, int):
        seed = value
    else:
        text = str(value).strip()
        if text.lower() == "random":
            return None
        try:
            seed = int(text, 10)
        except ValueError:
            raise _seed_error(value, where) from None
    if not 0 <= seed < SEED_LIMIT:
        raise _seed_error(value, where)
    return seed


def _seed_error(value: object, where: str) -> pytest.UsageError:
    return pytest.UsageError(
        f"{where}={value!r} is not a valid graphflow seed: use an integer from 0 to "
        f"{SEED_LIMIT - 1}, 'random' for a fresh session seed, or 'last' (option only) for "
        "the previous session's"
    )


def parse_store(value: object, where: str) -> StoreKind:
    """Check a store name.

    Raises:
        pytest.UsageError: when ``value`` is not one of :data:`STORES`.
    """
    if value == "memory":
        return "memory"
    if value == "sqlite":
        return "sqlite"
    if value == "postgres":
        return "postgres"
    valid = ", ".join(repr(s) for s in STORES)
    raise pytest.UsageError(f"{where}={value!r} is not a graphflow store: use one of {valid}")


def resolve_session(config: pytest.Config) -> SessionSettings:
    """Resolve the session's seed, default store and PostgreSQL DSN (once, in
    ``pytest_configure``).

    Raises:
        pytest.UsageError: for a bad ``--graphflow-seed``/``--graphflow-store`` or ini value,
            or the ``postgres`` store without a DSN.
    """
    session = _resolve_seed_and_store(config)
    dsn = (config.getoption("graphflow_postgres_dsn", None)
           or str(config.getini("graphflow_postgres_dsn") or "").strip()
           or os.environ.get(POSTGRES_DSN_ENV) or None)
    if session.store == "postgres" and dsn is None:
        raise pytest.UsageError(
            "the graphflow 'postgres' store needs a server: give --graphflow-postgres-dsn=DSN "
            f"(or the graphflow_postgres_dsn ini key, or {POSTGRES_DSN_ENV})"
        )
    return replace(session, postgres_dsn=dsn)


def _resolve_seed_and_store(config: pytest.Config) -> SessionSettings:
    option_store = config.getoption("graphflow_store", None)
    if option_store is not None:
        store = parse_store(option_store, "--graphflow-store")
    else:
        ini_store = str(config.getini("graphflow_store") or "memory").strip()
        store = parse_store(ini_store, "graphflow_store (ini)")

    workerinput: dict[str, Any] | None = getattr(config, "workerinput", None)
    if workerinput is not None and WORKERINPUT_KEY in workerinput:
        seed = int(workerinput[WORKERINPUT_KEY])
        return SessionSettings(seed, "controller", store, option_store is not None)

    option_seed = config.getoption("graphflow_seed", None)
    if option_seed is not None and str(option_seed).strip().lower() == "last":
        return SessionSettings(_last_seed(config), "option", store, option_store is not None)
    if option_seed is not None:
        parsed = parse_seed(option_seed, "--graphflow-seed")
        source: SeedSource = "option"
    else:
        ini_seed = str(config.getini("graphflow_seed") or "").strip()
        parsed = parse_seed(ini_seed, "graphflow_seed (ini)") if ini_seed else None
        source = "ini"
    if parsed is None:
        return SessionSettings(random_seed(), "random", store, option_store is not None)
    return SessionSettings(parsed, source, store, option_store is not None)


CACHE_KEY = "graphflow/session_seed"
"""Where the session seed is kept in pytest's cache, for ``--graphflow-seed=last``."""


def _last_seed(config: pytest.Config) -> int:
    cache = getattr(config, "cache", None)
    found = None if cache is None else cache.get(CACHE_KEY, None)
    if not isinstance(found, int) or not 0 <= found < SEED_LIMIT:
        why = "the cache plugin is off (-p no:cacheprovider)" if cache is None else \
            "no earlier session stored one"
        raise pytest.UsageError(
            f"--graphflow-seed=last: no seed of an earlier session to reuse ({why}); pass "
            "--graphflow-seed=<int> (the header of the failing session prints it)"
        )
    return found


def remember_seed(config: pytest.Config, seed: int) -> None:
    """Keep the session seed in pytest's cache, for ``--graphflow-seed=last``."""
    cache = getattr(config, "cache", None)
    if cache is not None and getattr(config, "workerinput", None) is None:
        cache.set(CACHE_KEY, seed)


def test_seed(session_seed: int, nodeid: str) -> int:
    """The seed of the test ``nodeid``: ``(session_seed + crc32(nodeid)) % 2**32``."""
    return (session_seed + zlib.crc32(nodeid.encode("utf-8"))) % SEED_LIMIT


# Not collected by pytest when a test module imports this module's names.
test_seed.__test__ = False  # type: ignore[attr-defined]

SNAPSHOT_FIXTURES: Final = frozenset({"graph_snapshot", "snapshot"})
"""Fixtures whose tests compare with a recorded file: their seed is :func:`snapshot_seed`."""


def snapshot_seed(nodeid: str) -> int:
    """The seed of a test that takes a snapshot: ``crc32(nodeid)``, whatever the session seed
    (a snapshot recorded in one session must match in the next)."""
    return test_seed(0, nodeid)


class XdistHooks:
    """pytest-xdist hooks of the controller, registered only when xdist is installed (the
    hooks are xdist's)."""

    def __init__(self, seed: int, config: pytest.Config) -> None:
        self.seed = seed
        self.config = config

    def pytest_configure_node(self, node: Any) -> None:
        """Hand the controller's session seed to a starting worker."""
        node.workerinput[WORKERINPUT_KEY] = self.seed

    def pytest_testnodedown(self, node: Any, error: object) -> None:
        """Add what a finished worker's ``--graphflow-processes`` checks counted to the
        controller's counts (its terminal summary prints them)."""
        from ._processes import add_worker_counts

        add_worker_counts(self.config, getattr(node, "workeroutput", None))
