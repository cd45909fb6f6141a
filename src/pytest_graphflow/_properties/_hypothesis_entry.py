"""Hypothesis entry point: makes ``st.from_type(GraphSpec)`` draw ``graphs()``.

Hypothesis calls :func:`_hypothesis_setup_hook` when it is imported (entry point group
``hypothesis``; ``HYPOTHESIS_NO_PLUGINS`` disables it). Importing Hypothesis must not import
pytest-graphflow's runtime in a process where the package is merely installed, so the hook
does nothing unless ``GraphSpec`` exists already; then it imports the strategies module, which
registers ``graphs()`` for ``GraphSpec`` (as it does whenever it is imported, so either import
order ends with the strategy registered).
"""

from __future__ import annotations

import sys

_GENSPEC = "pytest_graphflow._properties.strategies._genspec"


def _hypothesis_setup_hook() -> None:
    if _GENSPEC in sys.modules:
        from .strategies import _strategies  # registers graphs() for GraphSpec

        del _strategies
