"""The store conformance machine: one Hypothesis state machine that drives any store.

Owns the machine behind :mod:`pytest_graphflow.conformance` (``_machine``), the store as the
machine calls it (``_calls``), what it draws (``_draws``, ``_rare``), the contract checks
(``_checks``) and the ways to run it (``_run``). May import ``.._progress`` and the layers
below ``_properties``; never the ``checks``, ``strategies`` or ``runs`` rooms.
"""
