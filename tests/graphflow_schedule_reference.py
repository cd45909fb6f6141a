"""A straightforward reference of the seeded schedule (SPEC §7: ``seed`` decides the order a
parallel batch's tasks start and interleave in), written apart from the runtime's own code
so that an optimisation of the scheduler cannot change the order a seed gives unnoticed.

- The stream: SplitMix64 seeded from the runtime's seed, the run id (CRC-32) and the step.
- A batch of sync nodes runs inline in the order of a Fisher–Yates shuffle of the tasks.
- A batch of async nodes takes turns: the tasks ready to run are a list in the order they
  became ready (first the batch's tasks in declared order, then those a timer woke, in the
  order of their wake-up time and of their sleeps); each turn pops the task at
  ``randrange(len(ready))`` (no draw when one is ready), which runs until it sleeps or ends.
  When none is ready, virtual time jumps to the earliest wake-up and every task due then
  becomes ready.
"""

from __future__ import annotations

import heapq
import zlib

MASK = (1 << 64) - 1


class SplitMix64:
    """The schedule's stream, as the runtime derives it for one batch."""

    def __init__(self, seed: int, run_id: str, step: int) -> None:
        self.state = (seed * 0x9E3779B97F4A7C15 + zlib.crc32(run_id.encode()) * 0xBF58476D1CE4E5B9
                      + step * 0x94D049BB133111EB) & MASK

    def next(self) -> int:
        self.state = z = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)


def sync_order(seed: int, run_id: str, step: int, names: list[str]) -> list[str]:
    """The order a batch of sync nodes ``names`` (declared order) runs in."""
    rng = SplitMix64(seed, run_id, step)
    order = list(names)
    for i in range(len(order) - 1, 0, -1):
        j = rng.next() % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def async_turns(seed: int, run_id: str, step: int,
                sleeps: list[list[int]]) -> list[tuple[int, int]]:
    """The turns of a batch of async tasks, ``(task, turn)`` in the order they run: task ``k``
    (declared order) sleeps ``sleeps[k][0]`` seconds in its first turn, then ``sleeps[k][1]``,
    and so on; its last turn is the one after its last sleep."""
    rng = SplitMix64(seed, run_id, step)
    ready: list[tuple[int, int]] = [(k, 0) for k in range(len(sleeps))]
    timers: list[tuple[int, int, int, int]] = []  # (wake, sleep counter, task, turn)
    now = counter = 0
    turns: list[tuple[int, int]] = []
    while ready or timers:
        if not ready:
            now = timers[0][0]
            while timers and timers[0][0] == now:
                _, _, key, turn = heapq.heappop(timers)
                ready.append((key, turn))
        i = 0 if len(ready) == 1 else rng.next() % len(ready)
        key, turn = ready.pop(i)
        turns.append((key, turn))
        if turn < len(sleeps[key]):
            counter += 1
            heapq.heappush(timers, (now + sleeps[key][turn], counter, key, turn + 1))
    return turns
