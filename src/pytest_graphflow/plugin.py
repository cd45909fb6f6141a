"""The pytest plugin of pytest-graphflow (entry point ``pytest11``)."""
