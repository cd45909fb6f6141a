"""Wall time of ``run_store_conformance`` on each planted store bug and its fixed twin, and on
the correct stores (issue 25: a correct store in <= 10 s, no store past 30 s), each in a fresh
interpreter under the ``graphflow-ci`` profile, as tests/properties/test_store_conformance.py
runs them. A measurement, not a test: read it on an idle machine (under load the seconds
grow; the number of executions a hunt needs does not).

    .venv/bin/python benchmarks/conformance_times.py [planted-bug-name ...]
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent / "tests" / "properties"

SCRIPT = """
import json, sys, time
sys.path[:0] = {paths!r}
from hypothesis import settings
from pytest_graphflow._properties.strategies._profiles import register_profiles
register_profiles()
settings.load_profile("graphflow-ci")
from graphflow_dict_store import DictStore
from graphflow_planted_stores import PLANTED
import test_store_conformance as here
from pytest_graphflow import InMemoryCheckpointStore
from pytest_graphflow.conformance import run_store_conformance
which, bug = {which!r}, {bug!r}
stores = {{"DictStore": DictStore, "InMemoryCheckpointStore": InMemoryCheckpointStore}}
store = stores[bug] if bug in stores else getattr(PLANTED[bug], which)
start = time.perf_counter()
try:
    run_store_conformance(store, settings=here.run_settings(here.CI))
    passed = True
except AssertionError:
    passed = False
print(json.dumps([round(time.perf_counter() - start, 1), passed]))
"""


def main(names: list[str]) -> None:
    """Print seconds and pass/fail for each store, one fresh interpreter each."""
    sys.path.insert(0, str(HERE))
    from graphflow_planted_stores import PLANTED

    jobs = [("fixed", "DictStore"), ("fixed", "InMemoryCheckpointStore")]
    jobs += [(which, bug) for bug in PLANTED if not names or bug in names
             for which in ("buggy", "fixed")]
    for which, bug in jobs:
        script = SCRIPT.format(paths=[str(HERE), str(HERE.parent)], which=which, bug=bug)
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              cwd=HERE, check=False)
        if done.returncode != 0:
            print(f"{bug:36s} {which:6s} error: {done.stderr[-200:]}", flush=True)
            continue
        seconds, passed = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{bug:36s} {which:6s} {seconds} s  {'passes' if passed else 'fails'}",
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
