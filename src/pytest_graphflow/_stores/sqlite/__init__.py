"""The SQLite store: ``SQLiteCheckpointStore`` (``_store``) and its parts — the file and its
migrations (``_file``, ``_migrate``, ``_schema``), rows (``_rows``), transactions (``_tx``),
the run log (``_log``) and thread claims (``_claims``). May import the top of ``_stores``
(protocol, features, rules), ``_records``, ``_time`` and :mod:`pytest_graphflow.errors`.
"""
