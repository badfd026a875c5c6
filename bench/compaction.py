"""What compaction costs: a 60-turn working session with compaction on, with only its token gauge, and off.

Run: .venv/bin/python bench/compaction.py [--runs N] [--cpu-runs N] [--repeat N] [--window TOKENS] [--json PATH]

The client is ``bench/workload.py``'s ``work-60`` (60 turns, one ``read_file`` call each answered with 1,000 to
3,000 characters of source, then a final answer) against ``bench/mock_server.py``, in three variants that
alternate run by run in one client process:

- ``on``: ``Compaction(context_window=--window)`` (8,000 tokens): compacted every few turns;
- ``gauge``: ``Compaction(context_window=10_000_000)``: the token gauge sizes every request, nothing is ever
  compacted, the history grows as with compaction off;
- ``off``: ``Agent(compaction=False)``: no gauge, the history grows unbounded.

The client marks the start of each turn, the end of its tool results, the start and end of each summary
call's provider stream and each ``Compacted`` event. A step is what lies between the starts of two turns; its
*tail* runs from its tool results to the next turn's start (the loop's bookkeeping, the gauge's check and,
when one happens, the compaction). A compaction costs its step's tail less the median tail of the variant's
steps that did not compact; steps are reported without it, and in a column of their own with the compactions
of each bucket of ten turns spread over its steps.

The figure of record is instructions: one client process under ``valgrind --tool=callgrind
--dump-before=getppid`` (each mark dumps the count since the previous one; ``PYTHONHASHSEED=0``), ``--runs``
runs of each variant. CPU time is the secondary figure: ``--repeat`` client processes pinned to core 0, the
server on core 1, ``--cpu-runs`` runs of each variant each; one process's steps run up to a third slower or
faster than another's on this virtual machine, so the variants are compared inside each process. Costs are
the median of the steps of a bucket (a cyclic garbage collection makes the odd step cost millions of
instructions more, wherever it falls).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from run import CLIENT_CORE, PYTHON, pinned, server_stats, start_server

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TURNS, BUCKET = 60, 10
VARIANTS = ("on", "gauge", "off")
GAUGE_ONLY_WINDOW = 10_000_000


@dataclass
class Steps:
    """One variant's steps in one unit (instructions or CPU ms), split as the module docstring says."""

    steps: dict[int, list[float]] = field(default_factory=dict)
    """Turn -> the cost of that step in each run, without its compaction."""
    amortized: dict[int, list[float]] = field(default_factory=dict)
    """Turn -> the cost of that step in each run, its compaction included (in the order of ``steps``)."""
    compactions: list[float] = field(default_factory=list)
    summary_streams: list[float] = field(default_factory=list)
    """Each summary call's provider stream (request encoding, HTTP, answer decoding): its client-side cost."""

    def add(self, other: Steps) -> None:
        for turn, values in other.steps.items():
            self.steps.setdefault(turn, []).extend(values)
        for turn, values in other.amortized.items():
            self.amortized.setdefault(turn, []).extend(values)
        self.compactions += other.compactions
        self.summary_streams += other.summary_streams


def split(marks: Sequence[Sequence[Any]], costs: Sequence[float], setting: str) -> Steps:
    """The steps of ``setting``'s runs; ``marks`` are ``workload.Observations.marks`` and ``costs[j]`` is what
    lies between mark ``j - 1`` and mark ``j``."""
    turns = [j for j, mark in enumerate(marks) if mark[0] == setting and mark[1] == "turn"]
    usual, steps = [], []
    for here, following in itertools.pairwise(turns):
        turn = marks[here][2]
        if marks[following][2] != turn + 1:  # another run began: a run's final answer is not a step measured
            continue
        tools = next(j for j in range(here, following) if marks[j][1] == "tools")
        inside = range(here + 1, following + 1)
        compacted = any(marks[j][1] == "compacted" for j in inside)
        stream = sum(costs[j] for j in inside if marks[j][1] == "summary_ended")
        tail = sum(costs[j] for j in range(tools + 1, following + 1))
        steps.append((turn, sum(costs[j] for j in inside), tail, compacted, stream))
        if not compacted:
            usual.append(tail)
    usual_tail = statistics.median(usual)
    out = Steps()
    for turn, cost, tail, compacted, stream in steps:
        compaction = tail - usual_tail if compacted else 0.0
        out.steps.setdefault(turn, []).append(cost - compaction)
        out.amortized.setdefault(turn, []).append(cost)
        if compacted:
            out.compactions.append(compaction)
            out.summary_streams.append(stream)
    return out


def client(port: int, runs: int, window: int, env: dict[str, str], wrap: Sequence[str] = ()) -> dict[str, Any]:
    """One ``work-60`` client process running every variant ``runs`` times; its figures, checked against the
    requests the server served."""
    settings = {"on": str(window), "gauge": str(GAUGE_ONLY_WINDOW), "off": "off"}
    env = {**os.environ, **env, "PYTHONPATH": str(ROOT / "src"), "TETHER_BENCH_COMPACTION": ",".join(settings.values())}
    before = server_stats(port)["requests"]
    completed = subprocess.run(
        [*wrap, PYTHON, str(HERE / "workload.py"), "tether", "work-60", f"http://127.0.0.1:{port}/v1", str(runs)],
        capture_output=True, text=True, check=False, cwd=HERE, env=env,
        preexec_fn=None if wrap else pinned(CLIENT_CORE),
    )  # fmt: skip
    if completed.returncode != 0:
        raise SystemExit(f"work-60 failed:\n{completed.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(completed.stdout)
    served = server_stats(port)["requests"] - before
    summaries = sum(mark[1] == "summary_started" for mark in figures["marks"])
    expected = (figures["steps"] + summaries) * (runs + 1) // runs  # and one warm-up run per variant
    if figures["failures"] or served != expected:
        raise SystemExit(f"work-60: {figures['failures']} failed runs, {served} requests served, {expected} expected")
    figures["marks"] = [[next(v for v, s in settings.items() if s == mark[0]), *mark[1:]] for mark in figures["marks"]]
    figures["compactions"] = [c[1:] for c in figures["compactions"] if c[0] == settings["on"]]
    return figures


def instructions(port: int, runs: int, window: int) -> tuple[dict[str, Steps], dict[str, Any]]:
    """Every variant's steps in instructions: one client under callgrind, a dump at every mark."""
    with tempfile.TemporaryDirectory(prefix="tether-callgrind-") as scratch:
        out = Path(scratch) / "cg"
        wrap = ["valgrind", "--tool=callgrind", "--dump-before=getppid", f"--callgrind-out-file={out}"]
        figures = client(port, runs, window, {"TETHER_BENCH_CALLGRIND": "1", "PYTHONHASHSEED": "0"}, wrap)
        dumps = sorted(Path(scratch).glob("cg.*"), key=lambda path: int(path.suffix[1:]))
        if len(dumps) != len(figures["marks"]):
            raise SystemExit(f"{len(dumps)} callgrind dumps for {len(figures['marks'])} marks")
        # dump k (from 1) holds what was counted until mark k - 1 (from 0): mark j's cost is in dump j + 1
        costs = [0.0, *(_total(path) for path in dumps[1:])]
    return {variant: split(figures["marks"], costs, variant) for variant in VARIANTS}, figures


def _total(dump: Path) -> float:
    for line in dump.read_text().splitlines():
        if line.startswith("totals:"):
            return float(line.split()[1])
    raise SystemExit(f"no totals in {dump}")


def cpu(port: int, options: argparse.Namespace) -> tuple[dict[str, Steps], list[dict[str, Steps]]]:
    """Every variant's steps in CPU ms, pooled over the client processes, and each process's own."""
    pooled = {variant: Steps() for variant in VARIANTS}
    processes = []
    for _ in range(options.repeat):
        marks = client(port, options.cpu_runs, options.window, {})["marks"]
        costs = [0.0] + [(b[3] - a[3]) / 1e6 for a, b in itertools.pairwise(marks)]
        processes.append({variant: split(marks, costs, variant) for variant in VARIANTS})
        for variant in VARIANTS:
            pooled[variant].add(processes[-1][variant])
    return pooled, processes


def buckets(by_turn: dict[int, list[float]]) -> list[float]:
    """The median cost of a step in turns 1-10, 11-20, ... 51-60."""
    return [
        statistics.median(v for turn in range(first, first + BUCKET) for v in by_turn.get(turn, []))
        for first in range(1, TURNS + 1, BUCKET)
    ]


def amortized_buckets(steps: Steps) -> list[float]:
    """The median cost of a step in each bucket, plus the bucket's compactions spread over its steps."""
    spread = []
    for first in range(1, TURNS + 1, BUCKET):
        pairs = [
            (whole, bare)
            for turn in range(first, first + BUCKET)
            for whole, bare in zip(steps.amortized.get(turn, []), steps.steps.get(turn, []), strict=True)
        ]
        spread.append(sum(whole - bare for whole, bare in pairs) / len(pairs))
    return [median + extra for median, extra in zip(buckets(steps.steps), spread, strict=True)]


def by_turn_table(title: str, results: dict[str, Steps], fmt: str) -> str:
    """Cost per step by bucket of turns, for every variant, and how the last bucket compares with the first."""
    series = [
        buckets(results["on"].steps),
        amortized_buckets(results["on"]),
        buckets(results["gauge"].steps),
        buckets(results["off"].steps),
    ]
    head = "| turns | on | on, compactions included | gauge | off | gauge / off |"
    rows = [title, "", head, "|---|---|---|---|---|---|"]
    for index, first in enumerate(range(1, TURNS + 1, BUCKET)):
        cells = " | ".join(format(values[index], fmt) for values in series)
        rows.append(f"| {first}-{first + BUCKET - 1} | {cells} | {series[2][index] / series[3][index]:.3f}x |")
    growth = " | ".join(f"{values[-1] / values[0]:.2f}x" for values in series)
    rows.append(f"| 51-60 / 1-10 | {growth} | |")
    return "\n".join(rows)


def gauge_table(counted: dict[str, Steps], processes: list[dict[str, Steps]]) -> str:
    """What the gauge adds to a step: gauge less off, turn by turn (same history), median over the run."""

    def added(results: dict[str, Steps]) -> tuple[float, float]:
        gauge, off = results["gauge"].steps, results["off"].steps
        per_turn = [statistics.median(gauge[t]) - statistics.median(off[t]) for t in range(1, TURNS + 1)]
        extra = statistics.median(per_turn)
        return extra, extra / statistics.median(v for t in range(1, TURNS + 1) for v in off[t])

    rows = ["What the token gauge adds to a step that does not compact (gauge less off at the same turn)", "",
            "| | per step | of a step |", "|---|---|---|"]  # fmt: skip
    extra, share = added(counted)
    rows.append(f"| instructions | {extra:,.0f} | {share:.1%} |")
    for number, results in enumerate(processes, 1):
        extra, share = added(results)
        rows.append(f"| CPU, process {number} | {extra * 1000:.1f} µs | {share:.1%} |")
    return "\n".join(rows)


def compaction_table(counted: Steps, timed: Steps, made: list[list[int]], runs: int) -> str:
    """The cost of one compaction, whole and in its two parts; ``made`` lists (turn, tokens before, after)."""
    before = statistics.mean(c[1] for c in made)
    after = statistics.mean(c[2] for c in made)
    step = statistics.median(v for values in counted.steps.values() for v in values)
    at = ", ".join(str(c[0]) for c in made[: len(made) // runs])
    rows = [
        f"One compaction ({len(made) / runs:g} a run, before turns {at}; "
        f"the next request estimated at {before:,.0f} tokens before and {after:,.0f} after, on average; median "
        "of all)",
        "",
        "| | instructions | CPU ms | in steps |",
        "|---|---|---|---|",
    ]
    parts = {
        "the whole compaction": lambda s: s.compactions,
        "the summary call's provider stream (encode, HTTP, decode)": lambda s: s.summary_streams,
        "planning, the marker, the checks, the summary call's bookkeeping": lambda s: [
            c - m for c, m in zip(s.compactions, s.summary_streams, strict=True)
        ],
    }
    for name, pick in parts.items():
        count, ms = statistics.median(pick(counted)), statistics.median(pick(timed))
        rows.append(f"| {name} | {count:,.0f} | {ms:.3f} | {count / step:.2f} |")
    return "\n".join(rows)


def main() -> None:
    options = _options()
    server, port = start_server()
    try:
        counted, figures = instructions(port, options.runs, options.window)
        print("done: callgrind", file=sys.stderr, flush=True)
        timed, processes = cpu(port, options)
    finally:
        server.terminate()
        server.wait()
    print(by_turn_table(f"Instructions per step (callgrind, median of the steps of {options.runs} runs)", counted,
                        ",.0f"))  # fmt: skip
    print()
    title = f"CPU ms per step (median of the steps of {options.repeat} processes x {options.cpu_runs} runs)"
    print(by_turn_table(title, timed, ".3f"))
    print()
    print(gauge_table(counted, processes))
    print()
    print(compaction_table(counted["on"], timed["on"], figures["compactions"], options.runs))
    if options.json:
        raw = {unit: {v: asdict(steps) for v, steps in results.items()}
               for unit, results in (("instructions", counted), ("cpu_ms", timed))}  # fmt: skip
        Path(options.json).write_text(json.dumps({**raw, "compactions": figures["compactions"]}))


def _options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs of each variant under callgrind")
    parser.add_argument("--cpu-runs", type=int, default=10, help="runs of each variant in each timed process")
    parser.add_argument("--repeat", type=int, default=3, help="timed client processes")
    parser.add_argument("--window", type=int, default=8_000, help="the context window of the 'on' variant")
    parser.add_argument("--json", help="also write every step's cost there")
    return parser.parse_args()


if __name__ == "__main__":
    main()
