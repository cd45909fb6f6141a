"""The ``graphflow-*`` Hypothesis profiles: registered on request, never loaded for users."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from pytest_graphflow._properties.strategies._profiles import PROFILES, register_profiles


def test_profiles_are_registered_with_their_settings() -> None:
    register_profiles()
    ci = settings.get_profile("graphflow-ci")
    assert ci.max_examples == 30
    assert ci.deadline is None
    assert ci.derandomize
    assert ci.database is None
    assert ci.print_blob
    assert HealthCheck.too_slow in ci.suppress_health_check
    thorough = settings.get_profile("graphflow-thorough")
    assert thorough.max_examples > ci.max_examples
    assert thorough.deadline is None
    assert {name for name in PROFILES} == {"graphflow-ci", "graphflow-dev", "graphflow-thorough"}


def test_registering_does_not_load_a_profile() -> None:
    before = settings.get_current_profile_name()
    register_profiles()
    assert settings.get_current_profile_name() == before


def test_this_projects_conftest_picks_the_profile_by_the_ci_variable(
    pytestconfig: pytest.Config,
) -> None:
    chosen = pytestconfig.getoption("hypothesis_profile", None)
    expected = chosen or ("graphflow-ci" if os.environ.get("CI") else "graphflow-dev")
    assert settings.get_current_profile_name() == expected


# That the plugin loads no profile for its users is checked in a fresh interpreter, in
# test_entry_point.py.
