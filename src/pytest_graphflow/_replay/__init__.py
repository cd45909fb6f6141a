"""Recorded histories: files of past runs, replays against new code, upgrade checks.

May import the runtime and everything below it (``_engine``, ``_graph``, ``_stores``,
``_time``, ``_records``), ``_assert`` (event diffs) and ``_properties``; the plugin and the
CLI import it. Public names are re-exported from :mod:`pytest_graphflow`.
"""
