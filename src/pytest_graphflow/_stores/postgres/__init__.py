"""The PostgreSQL store: ``PostgresCheckpointStore`` (``_store``) and its parts — connections
(``_conn``), the schema (``_schema``), claims (``_claims``), fenced commits (``_commit``),
thread deletion (``_delete``) and the run queue (``_queue``). Needs the ``postgres`` extra
(psycopg); nothing imports it until a PostgreSQL store is asked for. May import the top of
``_stores`` (protocol, features, rules), ``_records``, ``_time`` and
:mod:`pytest_graphflow.errors`.
"""
