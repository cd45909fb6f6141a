"""Property testing: generated graphs, invariant checkers, conformance and exploration.

Owns the graph specs and strategies behind :mod:`pytest_graphflow.strategies`, the C1–C10 and
whole-run checkers behind :mod:`pytest_graphflow.invariants`, the store conformance machine
behind :mod:`pytest_graphflow.conformance`, ``explore()``, reducer laws, run recording and the
Hypothesis profiles and entry point. May import the runtime and everything below it
(``_engine``, ``_graph``, ``_stores``, ``_time``, ``_records``), ``_assert`` and
:mod:`pytest_graphflow.errors`; never the pytest plugin or the CLI.
"""
