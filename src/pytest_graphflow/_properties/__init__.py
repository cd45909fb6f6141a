"""Property testing, in four rooms: conformance, checks, strategies and runs.

* :mod:`.conformance` — the store conformance state machine behind
  :mod:`pytest_graphflow.conformance`;
* :mod:`.checks` — checkers that judge what they are given (an event list, a reducer, a
  graph's node code) and return violations: C1–C10 and the rules behind
  :mod:`pytest_graphflow.invariants`; they never run a graph;
* :mod:`.strategies` — graph specs, the Hypothesis strategies behind
  :mod:`pytest_graphflow.strategies`, node instrumentation and the settings profiles;
* :mod:`.runs` — whole-run tools that run graphs and judge them: ``explore()``, determinism,
  interrupt/resume equivalence, crash recovery, clock start, run recording and the
  cross-process checks with their worker pool. Only this room imports ``checks`` and
  ``strategies``.

Beside the rooms: ``_progress`` (progress reports, which ``conformance`` and ``runs`` both
send; it imports no room) and ``_hypothesis_entry`` (the ``hypothesis`` entry point, whose path
is written in every installed copy's metadata; it imports ``strategies``). The direction is
enforced by ``PROPERTY_ROOMS`` in ``tests/layout/test_layering.py``.

The subpackage may import the runtime and everything below it (``_engine``, ``_graph``,
``_stores``, ``_time``, ``_records``), ``_assert`` and :mod:`pytest_graphflow.errors`; never
the pytest plugin or the CLI.
"""
