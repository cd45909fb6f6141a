"""``check_upgrade``: can these paused runs resume under the new graph?

It applies exactly the rules the runtime applies when it resumes
(:func:`~pytest_graphflow._engine._upgrade.upgrade_problems`), plus the ones that compare
with the graph a run was recorded under when a history carries that graph's contract.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._engine._upgrade import GraphContract, Incompatibility, upgrade_problems
from .._graph._builder import CompiledGraph
from .._records._checkpoint import Checkpoint
from ..errors import InvalidArgument, SnapshotMismatch
from ._history import History, load_history

__all__ = ["UpgradeReport", "check_upgrade"]


@dataclass(frozen=True)
class UpgradeReport:
    """What :func:`check_upgrade` found.

    Attributes:
        checkpoint_id: the checkpoint checked (the run's last one, for a history).
        old_revision: the revision it was written under.
        new_revision: the new graph's revision.
        problems: every incompatibility; empty when the checkpoint can resume.
    """

    checkpoint_id: str
    old_revision: str
    new_revision: str
    problems: list[Incompatibility] = field(default_factory=list)

    @property
    def compatible(self) -> bool:
        """Whether the checkpoint can resume under the new graph."""
        return not self.problems

    def __bool__(self) -> bool:
        return self.compatible

    @property
    def kinds(self) -> list[str]:
        """The kinds of the problems, in order (``["node_removed", "key_type"]``)."""
        return [p.kind for p in self.problems]

    def __str__(self) -> str:
        head = (f"checkpoint {self.checkpoint_id} ({self.old_revision}) -> graph revision "
                f"{self.new_revision}: ")
        if not self.problems:
            return head + "compatible"
        lines = [head + f"{len(self.problems)} incompatibilit"
                 + ("y" if len(self.problems) == 1 else "ies")]
        lines.extend(f"  - [{p.kind}] {p.message}" for p in self.problems)
        return "\n".join(lines)

    def raise_if_incompatible(self) -> UpgradeReport:
        """Raise :class:`SnapshotMismatch` listing every problem; return ``self`` otherwise."""
        if self.problems:
            raise SnapshotMismatch(str(self), self.problems)
        return self


def check_upgrade(
    checkpoint_or_history: Checkpoint | History | str | Path,
    new_graph: CompiledGraph,
    *,
    old_graph: CompiledGraph | None = None,
) -> UpgradeReport:
    """Whether a paused (or failed) run can resume under ``new_graph``, and every reason not.

    The rules are the runtime's own: a resume under ``new_graph`` refuses exactly when this
    reports problems (a history adds the rules that compare with the recorded graph's effect
    classes, which a bare checkpoint does not carry; pass ``old_graph`` to add them for one).

    Args:
        checkpoint_or_history: a :class:`Checkpoint`, a :class:`History` (its last
            checkpoint is checked) or a path to a history file.
        new_graph: the changed graph.
        old_graph: the graph the checkpoint was written under, if at hand.

    Raises:
        InvalidArgument: a history without checkpoints, or a bad argument.
        UnsupportedFormat: a history file of another format version.
    """
    if not isinstance(new_graph, CompiledGraph):
        raise InvalidArgument(f"check_upgrade(new_graph={new_graph!r}): pass a CompiledGraph")
    old: GraphContract | None = None if old_graph is None else GraphContract.of(old_graph)
    source: Any = checkpoint_or_history
    if isinstance(source, (str, Path)):
        source = load_history(source)
    if isinstance(source, History):
        cp = source.last_checkpoint()
        if cp is None:
            raise InvalidArgument(f"history of run {source.run_id} has no checkpoint to check "
                                  "(its graph saved none: compile it with a checkpoint policy)")
        if old is None:
            old = source.contract()
    elif isinstance(source, Checkpoint):
        cp = source
    else:
        raise InvalidArgument(f"check_upgrade({checkpoint_or_history!r}, ...): pass a "
                              "Checkpoint, a History or a path to a history file")
    return UpgradeReport(checkpoint_id=cp.id, old_revision=cp.revision,
                         new_revision=new_graph.revision,
                         problems=upgrade_problems(cp, new_graph, old))
