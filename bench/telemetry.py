"""What observing a run costs: tether with nothing observing it, against tether before telemetry existed, and
with OpenTelemetry's API imported, with tracing and metrics on, and with logging on.

Run: .venv/bin/python bench/telemetry.py [SCENARIO ...] [--repeat N] [--baseline REV]
     .venv/bin/python bench/telemetry.py --instructions [--baseline REV]     (needs valgrind; about 8 minutes)

Each variant runs ``bench/workload.py`` in a fresh client process pinned to core 0 against the mock server on
core 1 (as ``bench/run.py`` does), the variants interleaved, ``--repeat`` times; the table shows the median CPU
per step and its ratio to the baseline: the same workload on tether at ``--baseline`` (a commit from before the
telemetry, checked out in a temporary git worktree and imported from there). The variants
(``TETHER_BENCH_TELEMETRY``, see ``workload.py``):

- ``baseline``: the commit given, nothing observing (the cost "now", before telemetry).
- ``off``: this tree, nothing configured: the loop calls no observer and never imports OpenTelemetry.
- ``api``: ``opentelemetry-api`` imported by the application, no provider configured: still no observer.
- ``traces``: the SDK's tracer provider (spans batched to an exporter that drops them) and meter provider:
  what tracing and metrics cost per step, the SDK's own work included.
- ``logs``: logging configured at INFO, each record formatted and written to ``/dev/null``.

CPU time on a shared virtual machine moves by 10% from one process to the next, more than the 2% this is
meant to resolve. ``--instructions`` counts instead: each variant runs the sequential workload under
``valgrind --tool=callgrind`` twice, 20 runs and 60 runs, and the difference of the instructions executed,
divided by the 240 steps between them, is the client's instructions per step, start-up and warm-up cancelled
out. Counts repeat to a fraction of a percent whatever else the machine does.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from run import CLIENT_CORE, PYTHON, pinned, server_stats, start_server

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
VARIANTS = ("baseline", "off", "api", "traces", "logs")
DEFAULT_BASELINE = "8689207"
"""The last commit before the telemetry (issue 13)."""


def run_variant(variant: str, scenario: str, port: int, baseline_src: Path) -> float:
    """CPU ms per step of one client process."""
    env = _env(variant, baseline_src)
    before = server_stats(port)["requests"]
    completed = subprocess.run(
        [PYTHON, str(HERE / "workload.py"), "tether", scenario, f"http://127.0.0.1:{port}/v1"],
        capture_output=True, text=True, check=False, preexec_fn=pinned(CLIENT_CORE), cwd=HERE, env=env,
    )  # fmt: skip
    if completed.returncode != 0:
        raise SystemExit(f"{variant} {scenario} failed:\n{completed.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(completed.stdout)
    served = server_stats(port)["requests"] - before
    expected = figures["requests_expected"] + figures["steps"] // figures["runs"]
    if figures["failures"] or served != expected:
        raise SystemExit(f"{variant} {scenario}: {figures['failures']} failed runs, {served}/{expected} requests")
    return float(figures["cpu_ms_per_step"])


def instructions(variant: str, port: int, baseline_src: Path) -> float:
    """Client instructions per step of the sequential workload (see the module docstring)."""
    counts = []
    for scenario in ("sequential-20", "sequential-60"):
        completed = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", PYTHON, str(HERE / "workload.py"),
             "tether", scenario, f"http://127.0.0.1:{port}/v1"],
            capture_output=True, text=True, check=False, cwd=HERE, env=_env(variant, baseline_src),
        )  # fmt: skip
        found = re.search(r"Collected : (\d+)", completed.stderr)
        if completed.returncode != 0 or found is None or json.loads(completed.stdout)["failures"]:
            raise SystemExit(f"{variant} {scenario} failed:\n{completed.stderr[-3000:]}")
        counts.append(int(found[1]))
    return (counts[1] - counts[0]) / (40 * 6)


def _env(variant: str, baseline_src: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(baseline_src if variant == "baseline" else ROOT / "src")
    env["TETHER_BENCH_TELEMETRY"] = "off" if variant == "baseline" else variant
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", default=["sequential-400", "concurrent-1000"])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--baseline", default=DEFAULT_BASELINE, help="the commit to compare with")
    parser.add_argument("--instructions", action="store_true", help="count instructions under callgrind instead")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tether-baseline-") as scratch:
        checkout = Path(scratch) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(checkout), options.baseline],
                       check=True)  # fmt: skip
        try:
            if options.instructions:
                print_instructions(options.baseline, checkout / "src")
                return
            rows = measure(options.scenarios, options.repeat, checkout / "src")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(checkout)], check=False)
    print(f"CPU ms per step, median of {options.repeat} (ratio to tether at {options.baseline}, before telemetry)\n")
    print("| scenario | " + " | ".join(VARIANTS) + " |")
    print("|---|" + "---|" * len(VARIANTS))
    for scenario, medians in rows:
        base = medians["baseline"]
        cells = [f"{medians[v]:.3f} ({medians[v] / base:.3f}x)" for v in VARIANTS]
        print(f"| {scenario} | " + " | ".join(cells) + " |")


def print_instructions(baseline: str, baseline_src: Path) -> None:
    server, port = start_server()
    try:
        per_step = {}
        for variant in VARIANTS:
            per_step[variant] = instructions(variant, port, baseline_src)
            print(f"done: {variant}", file=sys.stderr, flush=True)
    finally:
        server.terminate()
        server.wait()
    print(f"Client instructions per step, sequential workload, callgrind (ratio to tether at {baseline})\n")
    print("| variant | instructions per step | ratio |\n|---|---|---|")
    for variant, count in per_step.items():
        print(f"| {variant} | {count:,.0f} | {count / per_step['baseline']:.3f}x |")


def measure(scenarios: list[str], repeat: int, baseline_src: Path) -> list[tuple[str, dict[str, float]]]:
    server, port = start_server()
    rows = []
    try:
        for scenario in scenarios:
            samples: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
            for _ in range(repeat):
                for variant in VARIANTS:
                    samples[variant].append(run_variant(variant, scenario, port, baseline_src))
            rows.append((scenario, {v: statistics.median(s) for v, s in samples.items()}))
            print(f"done: {scenario}", file=sys.stderr, flush=True)
    finally:
        server.terminate()
        server.wait()
    return rows


if __name__ == "__main__":
    main()
