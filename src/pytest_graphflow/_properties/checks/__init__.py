"""Checkers: judge what they are given and return violations, never running a graph.

Owns C1–C10 over an event list (``_checks`` gathers ``_order``, ``_durable``, ``_deadline``,
``_join``, ``_tools``; ``_legs`` holds the ``Violation`` they share), the effect ledger rules
(``_ledger``), the node-code lint (``_lint``) and reducer laws (``_reducer_laws``). May import
the layers below ``_properties``; never another room (``runs`` imports this one).
"""
