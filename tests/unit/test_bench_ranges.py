"""benchmarks/bench_ranges.py: the tally of issue 29's lines over several saved runs of
bench_vs_langgraph.py, which the closing notes quote. A row met in two runs of three is not met;
a per-test row whose name carries each run's own floor is still one row."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_ranges.py"

def _run(one: str, floor: str, bridge: str, rate: str) -> str:
    """One run's output, laid out as bench_vs_langgraph.py prints its rows."""
    rows = [("one-node run, checkpointed", 0.058, 1.448, "ms/run", one),
            ("chain of 20,000 steps, in-memory checkpoint per step", 7.968, 304.578,
             "µs/step", "38.2"),
            (f"  the same, net of pytest's own {floor} ms per empty test", 0.505, 5.237,
             "ms/test", "10.4")]
    lines = [f"{'workload':58s} {'graphflow':>10s} {'LangGraph':>10s} {'unit':>14s} ratio"]
    lines += [f"{n:58s} {a:10.3f} {b:10.3f} {u:>14s} {r:>6s}×" for n, a, b, u, r in rows]
    lines.append(f"{'the bridge (LangGraph app)':58s} {'harness':>10s} {'plain':>10s}")
    for name, ratio in (("  the same through graph_runtime.langgraph(app)", bridge),
                        ("  plain astream as the harness streams it, one loop (floor)", "0.85")):
        lines.append(f"{name:58s} {6.892:10.3f} {5.681:10.3f} {'ms/run':>14s} {ratio:>13s}×")
    lines.append(f"{'generated graphs checked (equivalence, ≤6 nodes, 3 runs each)':58s} "
                 f"{rate:>10s} {'—':>10s} {'graphs/s':>14s}")
    lines.append(f"{'pytest start-up: with the plugin / without (-p no:graphflow)':58s} "
                 f"{1551:10.0f} {1413:10.0f} {'ms':>14s}  +138 ms")
    return "\n".join(lines) + "\n"


def _ranges() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_ranges", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_ranges"] = module
    spec.loader.exec_module(module)
    return module


def test_rows_are_parsed_with_their_figures() -> None:
    rows = _ranges().parse(_run("24.9", "0.40", "1.21", "193"))
    assert rows["one-node run, checkpointed"] == (0.058, 1.448, 24.9, "ms/run")
    assert rows["chain of 20,000 steps, in-memory checkpoint per step"][2] == 38.2
    assert rows["  the same, net of pytest's own empty test's cost"][2] == 10.4
    assert rows["  plain astream as the harness streams it, one loop (floor)"][2] == 0.85
    assert rows["generated graphs checked (equivalence, ≤6 nodes, 3 runs each)"][0] == 193
    assert not any(name.startswith("pytest start-up") for name in rows)


def test_a_line_counts_as_met_only_in_every_run(tmp_path: Path) -> None:
    runs = [_run("24.9", "0.40", "1.21", "193"),
            _run("19.9", "0.52", "0.98", "201"),
            _run("30.1", "0.43", "1.02", "250")]
    paths = []
    for i, text in enumerate(runs):
        paths.append(tmp_path / f"run{i}.txt")
        paths[-1].write_text(text)
    done = subprocess.run([sys.executable, str(SCRIPT), "--from", *map(str, paths)],
                          capture_output=True, text=True, check=True)
    summary = done.stdout.splitlines()
    after = {summary[i - 1]: line for i, line in enumerate(summary) if line.startswith("    ")}
    assert "ratio 19.9–30.1 (median 24.9)  line ≥20: met in 2/3 ✗" in after[
        "one-node run, checkpointed"]
    assert "line ≥10: met in 3/3 ✓" in after["  the same, net of pytest's own empty test's cost"]
    assert "line ≤1.2: met in 2/3 ✗" in after["  the same through graph_runtime.langgraph(app)"]
    assert "193–250 (median 201) graphs/s  line ≥200: met in 2/3 ✗" in after[
        "generated graphs checked (equivalence, ≤6 nodes, 3 runs each)"]
    assert "line" not in after["chain of 20,000 steps, in-memory checkpoint per step"]
