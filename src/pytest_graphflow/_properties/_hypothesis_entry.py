"""Hypothesis entry point: registers ``graphs()`` as the strategy for :class:`GraphSpec`.

Hypothesis calls :func:`_hypothesis_setup_hook` when it is imported (entry point group
``hypothesis``; ``HYPOTHESIS_NO_PLUGINS`` disables it), so ``st.from_type(GraphSpec)`` and
``@given(spec=...)`` with a ``GraphSpec`` annotation work without importing our strategies.
"""

from __future__ import annotations


def _hypothesis_setup_hook() -> None:
    from hypothesis import strategies as st

    from ._genspec import GraphSpec

    def default_graphs(_: type) -> st.SearchStrategy[GraphSpec]:
        # Imported when first drawn: this hook may run while `strategies` is importing
        # Hypothesis, and importing `strategies` here would be circular.
        from ._strategies import graphs

        return graphs()

    st.register_type_strategy(GraphSpec, default_graphs)
