"""A Hypothesis state machine any :class:`CheckpointStore` implementation can be run against.

The machine drives the store through random sequences of ``save`` (new ids and overwrites),
``get``, ``load``, ``latest``, ``list``, ``delete`` and ``fork``, mirrors every call in a plain
dict model, and fails as soon as the store and the model disagree, naming the store method and
the rule of the contract it broke (SPEC §5, seed 003). Hypothesis then shrinks the failure to a
short program of calls.

Hypothesis' stateful testing is synchronous, so the async store runs in an event loop in a
background thread (``anyio.from_thread.start_blocking_portal``), opened when the machine is
created and closed in ``teardown``. Any backend anyio supports works (``"asyncio"``,
``"trio"``).

Three ways to use it::

    # 1. one line, inside any test
    def test_my_store_conforms():
        run_store_conformance(MyStore, backend="trio")

    # 2. a test class pytest collects
    TestMyStore = store_conformance_test(MyStore)

    # 3. subclass, to add rules or tune the budget
    class MyStoreConformance(StoreConformance):
        backend = "trio"

        def make_store(self):
            return MyStore()

    TestMyStoreConformance = MyStoreConformance.TestCase
    TestMyStoreConformance.settings = settings(max_examples=200)
"""

from __future__ import annotations

from ._exports import show_public as _show_public
from ._properties.conformance._machine import StoreConformance
from ._properties.conformance._run import (
    run_store_conformance,
    store_conformance_machine,
    store_conformance_test,
)

__all__ = [
    "StoreConformance",
    "run_store_conformance",
    "store_conformance_machine",
    "store_conformance_test",
]

# reprs and pickles name this module, not the private one that defines each name
_show_public(__name__, globals(), __all__)
