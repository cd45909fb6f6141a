"""Acceptance tests of the runtime core (seeds 000, 001, 003; SPEC §1–§6)."""
