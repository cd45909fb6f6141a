"""Run ids come from the seed's own stream (SPEC §5: ``run-…``): ``IdSource(seed)`` is
``random.Random(f"graphflow-ids:{seed}")``'s stream however often the seed is used, and a
runtime's ids are the first of it, past the cached first few too."""

from __future__ import annotations

import random

import pytest
from pydantic import BaseModel

from pytest_graphflow import END, START, Graph, GraphRuntime, VirtualClock
from pytest_graphflow._records._ids import IdSource


def _stream(seed: int, n: int) -> list[str]:
    rng = random.Random(f"graphflow-ids:{seed}")
    return [f"{rng.getrandbits(48):012x}" for _ in range(n)]


@pytest.mark.parametrize("seed", [0, 7, 2**40 + 3])
def test_an_id_source_gives_the_seeds_stream_the_first_and_every_later_time(seed: int) -> None:
    # the first time a seed is seen, the second (its state then kept), and after
    for _ in range(4):
        source = IdSource(seed)
        assert [source.run_hex() for _ in range(6)] == _stream(seed, 6)


def test_many_seeds_past_the_bounded_cache_keep_their_streams() -> None:
    for round_ in range(2):
        for seed in range(600):
            source = IdSource(seed)
            assert source.run_hex() == _stream(seed, 1)[0], (round_, seed)


class S(BaseModel):
    n: int = 0


def test_a_runtimes_run_ids_are_the_seeds_stream_past_the_first_four() -> None:
    g = Graph("ids", S)
    g.node("a", lambda s: {"n": s.n + 1})
    g.edge(START, "a").edge("a", END)
    graph = g.compile()
    for seed in (11, 11, 12):
        runtime = GraphRuntime(None, clock=VirtualClock(), seed=seed)
        ids = [runtime.invoke(graph, {}).run_id for _ in range(7)]
        assert len(set(ids)) == 7
        assert all(h in run_id for h, run_id in zip(_stream(seed, 7), ids, strict=True)), ids


def test_runtimes_of_one_seed_taking_turns_each_get_the_seeds_stream() -> None:
    # The first ids of a seed are made one at a time, as runtimes ask: two runtimes of the
    # same seed asking in turns, one ahead of the other, both get the stream from its start.
    from pytest_graphflow._engine._host import SeededIds

    seed = 2**41 + 17
    first, second = SeededIds(seed), SeededIds(seed)
    got_first = [first.run_hex(), first.run_hex(), first.run_hex()]
    got_second = [second.run_hex()]
    got_first += [first.run_hex() for _ in range(3)]
    got_second += [second.run_hex() for _ in range(6)]
    assert got_first == _stream(seed, 6)
    assert got_second == _stream(seed, 7)


def test_a_seeds_ids_go_on_past_the_bounded_cache_being_cleared() -> None:
    from pytest_graphflow._engine import _host

    seed = 2**41 + 18
    ids = _host.SeededIds(seed)
    got = [ids.run_hex(), ids.run_hex()]
    _host._first_hexes.clear()  # (what 256 other seeds do meanwhile)
    got += [ids.run_hex() for _ in range(5)]
    assert got == _stream(seed, 7)


def test_a_fresh_seed_makes_only_the_ids_its_runtime_takes() -> None:
    # A test's runtime mostly has a seed of its own and runs one run: one id is made for
    # it (the seeded generator asked once), not the first four.
    from pytest_graphflow._engine import _host

    seed = 2**41 + 19
    _host.SeededIds(seed).run_hex()
    assert _host._first_hexes[seed][1] == _stream(seed, 1)
