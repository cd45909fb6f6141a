"""The pytest plugin behind the ``pytest11`` entry point :mod:`pytest_graphflow.plugin`.

Owns the marker and options, per-test seeds, the recording runtime the fixtures hand out, the
per-test state, the failure report, recording and replaying histories. May import everything
below it: ``_replay``, ``_properties``, ``_assert``, ``_engine``, ``_graph``, ``_stores``,
``_time``, ``_records`` and :mod:`pytest_graphflow.errors`; never the CLI.
"""
