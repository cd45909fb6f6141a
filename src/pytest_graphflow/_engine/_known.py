"""The compiled graphs a runtime knows, to resume a run by id alone (without ``graph=``).

A checkpoint names its graph by id and revision only; one builder compiled twice (plain, and
with breakpoints or another policy) gives two graphs under one id that run differently. So a
run resumes under the compiled graph it started (or last resumed) with; a run this runtime
did not see resumes under the graph ``register()`` named, or the one compile of that id it
knows — and when it knows several that differ, it refuses and asks for ``graph=`` rather
than pick one.
"""

from __future__ import annotations

from collections import OrderedDict

from .._graph._builder import CompiledGraph
from .._records._checkpoint import Checkpoint
from ..errors import GraphExecutionError

__all__ = ["KnownGraphs"]

_RUNS_KEPT = 10_000
"""How many runs' graphs are remembered (the most recent): a long-lived runtime stays small,
and an older run is resumed by the rules for a run this runtime did not see."""

_Compile = tuple[str, str, tuple[str, ...], tuple[str, ...]]


def _compile_of(graph: CompiledGraph) -> _Compile:
    """What tells two compiles of one graph id apart: structure, policy, breakpoints."""
    before, after = graph.interrupt_before, graph.interrupt_after
    return (graph.revision, graph.checkpoint_policy,
            tuple(sorted(before)) if before else (), tuple(sorted(after)) if after else ())


def _describe(key: _Compile) -> str:
    revision, policy, before, after = key
    return (f"{revision} checkpoint_policy={policy!r} interrupt_before={list(before)} "
            f"interrupt_after={list(after)}")


class KnownGraphs:
    """Compiled graphs by id, and the one each recent run used (internal)."""

    def __init__(self) -> None:
        self._registered: dict[str, CompiledGraph] = {}
        self._compiles: dict[str, dict[_Compile, CompiledGraph]] = {}
        self._runs: OrderedDict[str, CompiledGraph] = OrderedDict()

    def register(self, graph: CompiledGraph) -> None:
        """``graph`` is the one to resume runs of its id this runtime did not see."""
        self._registered[graph.graph_id] = graph
        self.ran(None, graph)

    def ran(self, run_id: str | None, graph: CompiledGraph) -> None:
        """A leg of ``run_id`` runs under ``graph`` (as compiled, before any runtime policy)."""
        compiles = self._compiles.get(graph.graph_id)
        if compiles is None:
            compiles = self._compiles[graph.graph_id] = {}
        compiles[_compile_of(graph)] = graph
        if run_id is not None:
            runs = self._runs
            if run_id in runs:
                runs.move_to_end(run_id)
            runs[run_id] = graph
            if len(runs) > _RUNS_KEPT:
                runs.popitem(last=False)

    def for_checkpoint(self, cp: Checkpoint) -> CompiledGraph:
        """The compiled graph to resume ``cp`` under.

        Raises:
            GraphExecutionError: no compile of the graph id is known, or several that differ
                and none is the run's own; both name ``graph=``.
        """
        own = self._runs.get(cp.run_id)
        if own is not None and own.graph_id == cp.graph_id:
            return own
        registered = self._registered.get(cp.graph_id)
        if registered is not None:
            return registered
        compiles = self._compiles.get(cp.graph_id, {})
        if not compiles:
            raise GraphExecutionError(
                f"this runtime does not know graph {cp.graph_id!r} of checkpoint {cp.id}; "
                "pass graph= (a fresh runtime in another process must be given the graph)")
        # A compile under the checkpoint's revision is the candidate; another revision is
        # one only when none matches (the upgrade rules then judge it).
        same = {k: g for k, g in compiles.items() if k[0] == cp.revision} or compiles
        if len(same) == 1:
            return next(iter(same.values()))
        ways = "; ".join(_describe(k) for k in same)
        raise GraphExecutionError(
            f"this runtime ran graph {cp.graph_id!r} compiled {len(same)} different ways "
            f"({ways}) and has no record of which one run {cp.run_id} started with; pass "
            f"graph= (the CompiledGraph the run started with) to resume it")
