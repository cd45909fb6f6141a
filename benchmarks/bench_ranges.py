"""Several full runs of ``bench_vs_langgraph.py``, each in a fresh process, gathered per row:
the range of each side's figure and of the ratio, and in how many runs the row met issue 29's
line (one run of the bench is one sample of a noisy host; a line met in every run is a line
met, a line met in most runs is not).

    .venv/bin/python benchmarks/bench_ranges.py --runs 3 [-- --repeat 5 --graphs 100 ...]
    .venv/bin/python benchmarks/bench_ranges.py --from run1.txt run2.txt   # saved outputs

Arguments after ``--`` go to every run of ``bench_vs_langgraph.py``; each run's output is also
written beside the summary with ``--keep DIR``. Nothing is asserted: to be run and read.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Issue 29's lines, by the start of a row's name: (kind, line). "ratio" rows are LangGraph /
# graphflow and must be at least the line; "bridge" rows are harness / plain and must be at
# most the line; "rate" rows are graphs a second and must be at least the line.
LINES: tuple[tuple[str, str, float], ...] = (
    ("one-node run", "ratio", 20.0),
    ("interrupt + resume round trip", "ratio", 20.0),
    ("fan-out 1→100→1", "ratio", 30.0),
    ("fan-out 1→1,000→1", "ratio", 30.0),
    ("chain, in-memory checkpoint per step", "ratio", 40.0),
    ("chain, PostgreSQL checkpoint per step", "ratio", 5.0),
    ("  the same, net of pytest's own", "ratio", 10.0),
    ("agent, Send fan-out", "bridge", 1.2),
    ("  the same through graph_runtime.langgraph", "bridge", 1.2),
    ("generated graphs checked", "rate", 200.0),
)

_NUMBER = r"(-?[\d.,]+)"
_ROW = re.compile(rf"^(?P<name>.{{58,}}?) +{_NUMBER} +{_NUMBER} +(?P<unit>\S.*?) +{_NUMBER}×\s*$")
_RATE = re.compile(rf"^(?P<name>generated graphs checked.{{0,58}}?) +{_NUMBER} +— ")


@dataclass
class Series:
    """One row's figures over the runs: graphflow's, the other side's, and the ratio."""

    unit: str
    ours: list[float] = field(default_factory=list)
    theirs: list[float] = field(default_factory=list)
    ratio: list[float] = field(default_factory=list)


def _number(text: str) -> float:
    return float(text.replace(",", ""))


_FLOOR = re.compile(r"own [\d.]+ ms per empty test")


def parse(text: str) -> dict[str, tuple[float, float, float, str]]:
    """The rows of one run's output: name → (ours, theirs, printed ratio, unit). The per-test
    row's name carries that run's floor (an empty test's cost): the name is kept without it."""
    rows: dict[str, tuple[float, float, float, str]] = {}
    for line in text.splitlines():
        if (match := _ROW.match(line)) is not None:
            ours, theirs, ratio = (_number(match.group(i)) for i in (2, 3, 5))
            name = _FLOOR.sub("own empty test's cost", match.group("name").rstrip())
            rows[name] = (ours, theirs, ratio, match.group("unit"))
        elif (match := _RATE.match(line)) is not None:
            rate = _number(match.group(2))
            rows[match.group("name").rstrip()] = (rate, 0.0, rate, "graphs/s")
    return rows


def line_of(name: str) -> tuple[str, float] | None:
    """Issue 29's line for a row, or None for a row without one."""
    for start, kind, line in LINES:
        if name.startswith(start):
            return kind, line
    return None


def met(kind: str, line: float, ratio: float) -> bool:
    """Whether one run's ratio meets the line of its kind."""
    return ratio <= line if kind == "bridge" else ratio >= line


def gather(outputs: Iterable[str]) -> dict[str, Series]:
    """Every row of every run, in the order the rows first appeared."""
    table: dict[str, Series] = {}
    for text in outputs:
        for name, (ours, theirs, ratio, unit) in parse(text).items():
            series = table.setdefault(name, Series(unit))
            series.ours.append(ours)
            series.theirs.append(theirs)
            series.ratio.append(ratio)
    return table


def _span(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.3g}"
    return f"{min(values):.3g}–{max(values):.3g} (median {statistics.median(values):.3g})"


def report(table: dict[str, Series], runs: int) -> str:
    """The summary: per row, each side's range, the ratio's range, and the line's tally."""
    lines = [f"{runs} run(s); ranges are min–max over the runs"]
    for name, series in table.items():
        verdict = ""
        if (found := line_of(name)) is not None:
            kind, line = found
            hits = sum(met(kind, line, ratio) for ratio in series.ratio)
            sign = "≤" if kind == "bridge" else "≥"
            mark = "✓" if hits == len(series.ratio) == runs else "✗"
            verdict = f"  line {sign}{line:g}: met in {hits}/{runs} {mark}"
        if series.unit == "graphs/s":
            lines.append(f"{name}\n    {_span(series.ours)} graphs/s{verdict}")
            continue
        lines.append(f"{name}\n    graphflow {_span(series.ours)} · other "
                     f"{_span(series.theirs)} {series.unit} · ratio {_span(series.ratio)}"
                     f"{verdict}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="full runs, each a fresh process")
    parser.add_argument("--from", dest="saved", nargs="+", type=Path, default=[],
                        help="summarise saved outputs of bench_vs_langgraph.py instead")
    parser.add_argument("--keep", type=Path, help="write each run's output in this folder")
    parser.add_argument("bench_args", nargs=argparse.REMAINDER,
                        help="after --: arguments of every bench_vs_langgraph.py run")
    args = parser.parse_args()
    extra = [a for a in args.bench_args if a != "--"]
    outputs = [path.read_text() for path in args.saved]
    for run in range(0 if args.saved else args.runs):
        done = subprocess.run([sys.executable, str(HERE / "bench_vs_langgraph.py"), *extra],
                              capture_output=True, text=True, check=True)
        outputs.append(done.stdout)
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            (args.keep / f"run{run + 1}.txt").write_text(done.stdout)
        print(f"run {run + 1} of {args.runs} done", file=sys.stderr, flush=True)
    print(report(gather(outputs), len(outputs)))


if __name__ == "__main__":
    main()
