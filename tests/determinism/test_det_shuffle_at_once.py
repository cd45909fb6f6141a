"""Issue 29 — a wide batch's seeded start order, drawn at once, is the reference's.

SPEC §7: "``seed``: decides the order in which a parallel batch's tasks start". A batch of
sync nodes starts in the order of a Fisher–Yates shuffle drawn from SplitMix64
(``tests/graphflow_schedule_reference.py``). Over ``_rng._WIDE`` items, the shuffle makes
its draws all at once (every state a 128-bit lane of one integer, mixed in a dozen integer
operations) instead of one Python loop a draw: 100 items 37 → 17 µs, 1,000 items 483 → 166
µs. These tests hold it to the reference at every width around the switch and far above it,
with the lanes it keeps for the next shuffle made again, and count its calls: the same at
any width.
"""

from __future__ import annotations

import cProfile
import pstats
import random

import pytest
from pydantic import BaseModel

from graphflow_schedule_reference import SplitMix64, sync_order
from pytest_graphflow import END, START, Graph, GraphRuntime, VirtualClock
from pytest_graphflow._time import _rng
from pytest_graphflow._time._rng import ScheduleRng


class S(BaseModel):
    n: int = 0


WIDTHS = [*range(0, 27), 100, 257, 1_000, 4_099]  # around the switch at 12, and far over it


@pytest.mark.parametrize("width", WIDTHS)
def test_a_shuffle_is_the_reference_shuffle_at_every_width(width: int) -> None:
    """The same order as the reference's loop, and the stream left where the reference's
    is after ``width - 1`` draws (its next draw the same)."""
    draw = random.Random(width)
    for _ in range(4):
        seed, step = draw.randrange(2**32), draw.randrange(1_000)
        run_id = f"run-{draw.getrandbits(48):012x}"
        names = [f"n{i}" for i in range(width)]
        rng = ScheduleRng(seed, run_id, step)
        order = list(names)
        rng.shuffle(order)
        assert order == sync_order(seed, run_id, step, names)
        ref = SplitMix64(seed, run_id, step)
        for _ in range(width - 1):
            ref.next()
        assert rng._state == ref.state
        assert rng._next() == ref.next()


def test_the_kept_lanes_serve_only_their_width() -> None:
    """The lanes kept from one shuffle serve the next of the same width only; a width over
    ``_KEEP_LANES`` is drawn right and not kept (nothing of its size stays in memory)."""
    names = [f"n{i}" for i in range(300)]
    for width in (300, 299, 300, 300, 13, 300):
        order = names[:width]
        ScheduleRng(7, "run-kept", width).shuffle(order)
        assert order == sync_order(7, "run-kept", width, names[:width])
        assert _rng._lanes_of[0] == width - 1
    huge = _rng._KEEP_LANES + 2
    order = list(range(huge))
    ScheduleRng(3, "run-huge", 1).shuffle(order)
    assert order == sync_order(3, "run-huge", 1, list(range(huge)))
    assert _rng._lanes_of[0] == 299  # the last kept


def _shuffle_calls(width: int) -> int:
    items = list(range(width))
    rng = ScheduleRng(0, "run-calls", 1)
    profile = cProfile.Profile()
    profile.enable()
    rng.shuffle(items)
    profile.disable()
    return pstats.Stats(profile).total_calls  # type: ignore[attr-defined, no-any-return]


def test_a_wide_shuffle_makes_the_same_few_calls_at_any_width() -> None:
    """Drawn at once, a shuffle of 100, 1,000 or 10,000 items makes 8 calls (the lanes
    made: the shuffle, its draws, three conversions), 5 with the lanes kept from the shuffle
    before (up to ``_KEEP_LANES`` wide), not one a draw."""
    assert _shuffle_calls(100) <= 8
    assert _shuffle_calls(100) <= 5  # the lanes kept from the call before
    assert _shuffle_calls(1_000) <= 8
    assert _shuffle_calls(1_000) <= 5
    assert _shuffle_calls(10_000) <= 8
    assert _shuffle_calls(10_000) <= 8  # too wide to keep


def test_a_fan_out_of_100_starts_its_tasks_in_the_reference_order() -> None:
    """A 1→100→1 fan-out of sync nodes (the lean batch) runs its tasks in the seed's order."""
    started: list[str] = []
    g = Graph("fan", S)
    names = [f"w{i}" for i in range(100)]
    g.node("split", lambda s: None)
    for name in names:
        g.node(name, lambda s, ctx: started.append(ctx.node))
    g.edge(START, "split").edge("split", names).edge(names, END)
    runtime = GraphRuntime(clock=VirtualClock(), seed=29)
    result = runtime.invoke(g.compile(), {})
    assert result.status == "completed"
    assert started == sync_order(29, result.run_id, 1, names)  # step 0: split
    assert started != names


def test_from_the_switch_on_the_draws_are_made_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Widths up to ``_WIDE`` draw in the loop; wider ones through ``_draws`` (so the
    reference tests above compare the draws made at once)."""
    made: list[int] = []
    draws = _rng._draws

    def counted(state: int, m: int) -> object:
        made.append(m)
        return draws(state, m)

    monkeypatch.setattr(_rng, "_draws", counted)
    for width in (2, _rng._WIDE, _rng._WIDE + 1, 100):
        ScheduleRng(0, "run-switch", 0).shuffle(list(range(width)))
    assert made == [_rng._WIDE, 99]
