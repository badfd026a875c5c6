"""The hostile-server workload of ``tests/hardening/test_chaos_runs.py`` as a script, with its figures.

Run: PYTHONPATH=src python bench/chaos.py [--runs 2000] [--concurrency 50] [--seed N] [--only RUN ...]

Prints the runs, their outcomes by stop reason and error code, the parts of the guarantee any run broke
(grouped by cause, one example each), what reached the redirect target, the wall time, the peak RSS of this
process (``ru_maxrss``) and its growth over the RSS before the first run. The chaos server runs in a child
process, so the memory is the client's alone. ``--only`` replays single runs (same seed, same faults).
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the workload lives in tests/; tether comes from PYTHONPATH (src) or the venv

from tests.hardening.chaos_server import OVERSIZE  # noqa: E402
from tests.hardening.test_chaos_runs import (  # noqa: E402
    CONCURRENCY,
    RUNS,
    SEED,
    Chaos,
    failures,
    misnamed,
    run_workload,
)

PARTS = ("result", "typed", "events", "secrets")


def report(chaos: Chaos, wall: float) -> None:
    outcomes = chaos.outcomes
    requests = sum(len(entries) for entries in chaos.served.values())
    print(f"seed {chaos.seed}: {len(outcomes)} runs, {requests} requests served, wall {wall:.1f} s")
    print("outcomes (stop reason/error code):")
    for label, count in Counter(outcome.label for outcome in outcomes).most_common():
        print(f"  {count:6d}  {label}")
    print(f"successful tool results: {sum(outcome.tool_results for outcome in outcomes)}")
    for part in PARTS:
        broken = failures(chaos, part, detailed=1, listed=1)
        print(f"guarantee '{part}': {'kept' if not broken else 'BROKEN'}")
        if broken:
            print("  " + broken.replace("\n", "\n  "))
    named = misnamed(chaos, listed=1)
    print(f"guarantee 'a failure names its cause': {'kept' if not named else 'BROKEN'}")
    if named:
        print("  " + named.replace("\n", "\n  "))
    leaked = sum("sk-chaos-" in repr(record) for record in chaos.elsewhere)
    print(f"requests that reached the redirect target: {len(chaos.elsewhere)} ({leaked} with the key)")
    oversized = sum(outcome.largest > OVERSIZE // 2 for outcome in outcomes)
    print(f"runs that kept a message of more than {OVERSIZE // 2} characters: {oversized}")
    print(f"reports to the event loop's exception handler: {len(chaos.loop_errors)}")
    for text, count in Counter(chaos.loop_errors).most_common(3):
        print(f"  {count} times: {text[:300]}")
    if chaos.server_errors:
        print(f"chaos server errors: {len(chaos.server_errors)}; first:\n{chaos.server_errors[0]}")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    print(
        f"RSS: {chaos.rss_start / 2**20:.0f} MiB before the runs, peak {peak / 2**20:.0f} MiB (ru_maxrss), "
        f"growth {(peak - chaos.rss_start) / 2**20:.0f} MiB; sampled peak during the runs "
        f"{chaos.rss_peak / 2**20:.0f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--concurrency", type=int, default=CONCURRENCY)
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--only", type=int, nargs="*", help="replay these runs alone")
    args = parser.parse_args()
    runs = args.only if args.only else range(args.runs)
    started = time.perf_counter()
    chaos = asyncio.run(run_workload(args.seed, runs, args.concurrency))
    report(chaos, time.perf_counter() - started)
    if args.only:
        for outcome in chaos.outcomes:
            print(f"\n{chaos.describe(outcome)}\n  {outcome.detail}")
            for part, cause, detail in outcome.problems:
                print(f"  [{part}] {cause}\n    " + detail.replace("\n", "\n    "))


if __name__ == "__main__":
    main()
