"""``check_determinism``: one seed, run several times per backend on fresh runtimes (or in
fresh interpreters), gives identical JSON event streams.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..._stores._memory import InMemoryCheckpointStore
from ...errors import InvalidArgument
from ..checks._checks import Violation
from ._compare import Compare, Normalize
from ._deadlock import deadlock_violation
from ._drive import (
    Answers,
    Drive,
    GraphLike,
    Input,
    _first_difference,
    _lines,
    _on_owned_loop,
    _runtime,
    _wall,
    drive,
    graph_maker,
)
from ._pairs import report_pair

__all__ = ["check_determinism"]


def check_determinism(
    graph: GraphLike,
    input: Input = None,
    seed: int = 0,
    *,
    answers: Answers = None,
    runs: int = 5,
    backends: Iterable[str] = ("asyncio",),
    ignore: Iterable[str] | str | None = None,
    normalize: Normalize | None = None,
    processes: int | None = None,
) -> list[Violation]:
    """One seed, run ``runs`` times per backend on fresh runtimes: identical JSON streams.

    Interrupts pause the run and are resumed with ``answers`` (all legs are compared). Every
    run is compared with the first, so a decision that differs only now and then is caught
    far more often than by two runs (a 30% coin agrees in two runs more than half the time;
    in five, under a fifth). A run that can never end (``VirtualDeadlock``) is reported at
    once as a ``"deadlock"`` violation naming the waiting nodes. The first divergent event
    is reported (only the fields that differ), with how many of the runs diverged and the
    streams' SHA-256 in the example.
    With ``processes=N``, the runs happen in N fresh interpreters with different
    ``PYTHONHASHSEED`` values instead (:func:`check_determinism_across_processes`; the graph
    is then ``"module:attr"``, a module-level factory, or a graph a module holds).

    Args:
        runs: runs per backend (at least 2).
        ignore: state paths left out of the comparison, in the events' patches and states.
        normalize: a function ``state -> state`` applied to each ``run_end`` state.
    """
    if processes is not None:
        from ._xprocess import check_determinism_across_processes

        return check_determinism_across_processes(graph, input, seed, answers=answers,
                                                  processes=processes)
    import hashlib

    if isinstance(runs, bool) or not isinstance(runs, int) or runs < 2:
        raise InvalidArgument(f"check_determinism(runs={runs!r}): compare at least 2 runs")
    make = graph_maker(graph, "check_determinism")
    cmp = Compare.of(ignore, normalize)
    seen: list[tuple[str, list[str]]] = []
    for backend in backends:
        for _ in range(runs):
            g = make()
            rt = _runtime(InMemoryCheckpointStore(), seed, backend=backend, wall=_wall(graph))
            d: Drive = _on_owned_loop(rt, lambda r, g=g: drive(  # type: ignore[misc]
                r, g, input, answers))
            stuck = deadlock_violation(d.result, f"seed {seed} on {backend}")
            if stuck is not None:
                return [stuck]  # every other run would wait the same way
            seen.append((backend, _lines(d.events, cmp)))
    out: list[Violation] = []
    base_backend, base = seen[0]
    digest = hashlib.sha256("\n".join(base).encode()).hexdigest()
    differ = [(b, lines) for b, lines in seen[1:] if lines != base]
    if differ:
        backend, lines = differ[0]
        i, diff = _first_difference(base, lines)
        other = hashlib.sha256("\n".join(lines).encode()).hexdigest()
        out.append(Violation("determinism", i, f"seed {seed}: {len(differ)} of {len(seen) - 1} "
                             f"repeated runs gave another stream than the first "
                             f"({base_backend} vs {backend}): {diff}", example=(digest, other)))
        report_pair("check_determinism", str(out[-1]), (f"first run ({base_backend})",
                    f"a repeated run ({backend})"), base, lines, first=i, make_graph=make)
    return out
