"""Hypothesis settings profiles for graph tests (registered on request, never loaded for you).

* ``graphflow-ci``: sized for a 2-core CI runner. Few examples, no deadline (a virtual-time
  run's real duration says nothing about the code), derandomized so a red build is red again
  on rerun, no example database (CI machines start empty anyway), ``print_blob=True`` so a
  failure prints the ``@reproduce_failure`` line, and ``too_slow`` suppressed because shared
  runners stall at random.
* ``graphflow-dev``: local work: Hypothesis' defaults (randomness, example database, 100
  examples) without the deadline: a first run pays for imports and warm-up, and a test's
  real duration is not what a virtual-time test is about.
* ``graphflow-thorough``: a nightly or pre-release sweep with many more examples.

Use them from a ``conftest.py``::

    import os
    from hypothesis import settings
    from pytest_graphflow._properties.strategies._profiles import register_profiles

    register_profiles()
    settings.load_profile("graphflow-ci" if os.environ.get("CI") else "graphflow-dev")

or with Hypothesis' own option: ``pytest --hypothesis-profile=graphflow-thorough``, which
works without the conftest: the pytest plugin registers the profiles before Hypothesis loads
the one asked for.
"""

from __future__ import annotations

from typing import Final

__all__ = ["PROFILES", "register_profiles"]

PROFILES: Final = ("graphflow-ci", "graphflow-dev", "graphflow-thorough")


def register_profiles() -> None:
    """Register the ``graphflow-*`` profiles with Hypothesis (idempotent; loads none)."""
    from hypothesis import HealthCheck, settings

    # Parent each profile on Hypothesis' defaults, not on whichever profile is loaded now,
    # so registering again after loading one changes nothing.
    base = settings.get_profile("default")
    settings.register_profile(
        "graphflow-ci",
        parent=base,
        max_examples=30,
        deadline=None,
        derandomize=True,
        database=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    settings.register_profile("graphflow-dev", parent=base, deadline=None)
    settings.register_profile(
        "graphflow-thorough",
        parent=base,
        max_examples=1000,
        deadline=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
