"""The ``@pytest.mark.graphflow(...)`` marker and the settings it gives one test.

Markers merge the way users expect: a module's ``pytestmark`` or a class's marker sets
defaults, and the marker closest to the test wins key by key. Everything is checked at
collection, so a typo stops the session with :class:`pytest.UsageError` before any test runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

import pytest

from ._seed import (
    SNAPSHOT_FIXTURES,
    SessionSettings,
    StoreKind,
    parse_store,
    snapshot_seed,
    test_seed,
)

__all__ = [
    "MARKER_HELP",
    "MARKER_KEYS",
    "TestSettings",
    "marker_kwargs",
    "settings_for",
]

MARKER_KEYS: Final = ("seed", "start", "store", "checkpoint_policy")

MARKER_HELP: Final = (
    "graphflow(seed=None, start=None, store=None, checkpoint_policy=None): settings of the "
    "graphflow fixtures for this test: a fixed seed (int, instead of the one derived from the "
    "session seed), the virtual clock's start (datetime or ISO-8601 text), the checkpoint "
    "store ('memory', 'sqlite' or 'postgres') and a checkpoint policy that overrides the "
    "graphs' own ('every_step', 'on_halt' or 'never')."
)

SETTINGS_KEY: Final = pytest.StashKey["TestSettings"]()


@dataclass(frozen=True)
class TestSettings:
    """The graphflow settings of one test.

    Attributes:
        seed: the test's seed.
        seed_from_marker: whether a marker fixed it.
        seed_from_snapshot: whether it is :func:`snapshot_seed` of the node id (the test
            takes a snapshot and no marker fixed the seed).
        start: the virtual clock's start, or ``None`` for the clock's default.
        store: which checkpoint store the fixtures build.
        checkpoint_policy: a policy that overrides the graphs' own, or ``None``.
    """

    __test__ = False  # not a test class, despite the name

    seed: int
    seed_from_marker: bool
    seed_from_snapshot: bool
    start: datetime | None
    store: StoreKind
    checkpoint_policy: Literal["every_step", "on_halt", "never"] | None


def marker_kwargs(item: pytest.Item) -> dict[str, Any]:
    """The merged keyword arguments of every ``graphflow`` marker on ``item``, checked.

    Raises:
        pytest.UsageError: for positional arguments, unknown keys or bad values.
    """
    merged: dict[str, Any] = {}
    for mark in item.iter_markers("graphflow"):  # closest first
        where = f"@pytest.mark.graphflow on {item.nodeid}"
        if mark.args:
            raise pytest.UsageError(
                f"{where}: takes keyword arguments only ({', '.join(MARKER_KEYS)}), got "
                f"positional {mark.args!r}"
            )
        for key, value in mark.kwargs.items():
            merged.setdefault(key, value)
    return _check(merged, item.nodeid)


def _check(kwargs: Mapping[str, Any], nodeid: str) -> dict[str, Any]:
    where = f"@pytest.mark.graphflow on {nodeid}"
    unknown = sorted(set(kwargs) - set(MARKER_KEYS))
    if unknown:
        raise pytest.UsageError(
            f"{where}: unknown argument(s) {', '.join(unknown)}; valid arguments are "
            f"{', '.join(MARKER_KEYS)}"
        )
    out: dict[str, Any] = {}
    seed = kwargs.get("seed")
    if seed is not None:
        from ._seed import SEED_LIMIT

        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < SEED_LIMIT:
            raise pytest.UsageError(
                f"{where}: seed={seed!r} must be an int from 0 to {SEED_LIMIT - 1} (or None "
                "for the seed derived from the session seed)"
            )
        out["seed"] = seed
    start = kwargs.get("start")
    if start is not None:
        out["start"] = _parse_start(start, where)
    store = kwargs.get("store")
    if store is not None:
        out["store"] = parse_store(store, f"{where}: store")
    policy = kwargs.get("checkpoint_policy")
    if policy is not None:
        from .._graph._builder import POLICIES

        if policy not in POLICIES:
            valid = ", ".join(repr(p) for p in sorted(POLICIES))
            raise pytest.UsageError(
                f"{where}: checkpoint_policy={policy!r} is not a checkpoint policy: use one "
                f"of {valid}, or None to keep each graph's own"
            )
        out["checkpoint_policy"] = policy
    return out


def _parse_start(value: object, where: str) -> datetime:
    if isinstance(value, datetime):
        start = value
    elif isinstance(value, str):
        try:
            start = datetime.fromisoformat(value)
        except ValueError:
            raise pytest.UsageError(
                f"{where}: start={value!r} is not an ISO-8601 date-time; pass a datetime or "
                "text such as '2025-01-01T00:00:00+00:00'"
            ) from None
    else:
        raise pytest.UsageError(
            f"{where}: start={value!r} must be a datetime or ISO-8601 text (naive times are UTC)"
        )
    return start if start.tzinfo is not None else start.replace(tzinfo=UTC)


_CHAIN_MARKED: Final = pytest.StashKey[bool]()


def _marked(item: pytest.Item) -> bool:
    """Whether a ``graphflow`` marker sits on ``item`` or on a node above it (a module's
    ``pytestmark``, a class): the item's own markers are looked at every time, what is above
    once per parent node (``iter_markers`` walks the whole chain for every test)."""
    for mark in item.own_markers:
        if mark.name == "graphflow":
            return True
    parent = item.parent
    if parent is None:
        return False
    found = parent.stash.get(_CHAIN_MARKED, None)
    if found is None:
        found = parent.stash[_CHAIN_MARKED] = parent.get_closest_marker("graphflow") is not None
    return found


def settings_for(item: pytest.Item, session: SessionSettings) -> TestSettings:
    """The settings of ``item`` (computed once, then kept in the item's stash)."""
    cached = item.stash.get(SETTINGS_KEY, None)
    if cached is not None:
        return cached
    kwargs = marker_kwargs(item) if _marked(item) else {}
    seed: int | None = kwargs.get("seed")
    snapshot = seed is None and not SNAPSHOT_FIXTURES.isdisjoint(
        getattr(item, "fixturenames", ()))
    settings = TestSettings(
        seed=(seed if seed is not None else snapshot_seed(item.nodeid) if snapshot
              else test_seed(session.seed, item.nodeid)),
        seed_from_marker=seed is not None,
        seed_from_snapshot=snapshot,
        start=kwargs.get("start"),
        store=kwargs.get("store", session.store),
        checkpoint_policy=kwargs.get("checkpoint_policy"),
    )
    item.stash[SETTINGS_KEY] = settings
    return settings
