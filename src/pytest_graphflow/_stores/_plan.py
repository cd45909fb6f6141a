"""Fault plans: sets of :class:`Fault` rules as values, applied to any store."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ._protocol import CheckpointStore
from .faults._faults import Fault
from .faults._store import FaultyStore

__all__ = ["FaultPlan"]


@dataclass(frozen=True)
class FaultPlan:
    """A set of fault rules as a value, so tests and Hypothesis can build and print them.

    Example:
        >>> plan = FaultPlan((Fault.reject_save(nth=2), Fault.delay("get", 1.0)))
        >>> store = plan.apply(InMemoryCheckpointStore())   # a FaultyStore

    Attributes:
        faults: the rules, in the order they are added.
    """

    faults: tuple[Fault, ...] = ()

    @classmethod
    def of(cls, *faults: Fault) -> FaultPlan:
        """A plan of the given faults.

        Returns:
            The plan.
        """
        return cls(tuple(faults))

    def apply(self, store: CheckpointStore) -> FaultyStore:
        """Add the plan's rules to ``store`` (wrapped in a :class:`FaultyStore` unless it is one).

        Returns:
            The :class:`FaultyStore` holding the rules.
        """
        faulty = store if isinstance(store, FaultyStore) else FaultyStore(store)
        for fault in self.faults:
            faulty.add_fault(fault)
        return faulty

    def describe(self) -> str:
        """The plan as readable text: one ``FaultyStore`` call per rule, or ``no faults``."""
        return "; ".join(f.describe() for f in self.faults) or "no faults"

    def __iter__(self) -> Iterator[Fault]:
        return iter(self.faults)

    def __len__(self) -> int:
        return len(self.faults)
