"""Reading event streams: patterns, diffs, readable text and snapshots.

Owns the pattern language behind ``assert_events``, the event formatting used by diffs and
failure reports, and the syrupy extension ``GraphEventsExtension``. Works on records only: may
import ``_records`` and :mod:`pytest_graphflow.errors`.
"""
