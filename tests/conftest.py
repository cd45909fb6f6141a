"""The project's own test settings: Hypothesis profiles sized for where the tests run.

``CI`` set: ``graphflow-ci`` (30 derandomized examples, no database, blobs printed);
otherwise ``graphflow-dev``. ``--hypothesis-profile=...`` still wins (Hypothesis loads it in
``pytest_configure``, after this file).
"""

from __future__ import annotations

import os

from hypothesis import settings

from pytest_graphflow._properties.strategies._profiles import register_profiles

pytest_plugins = ["graphflow_postgres"]  # postgres_dsn, pg_schema, make_pg_store

register_profiles()
settings.load_profile("graphflow-ci" if os.environ.get("CI") else "graphflow-dev")
