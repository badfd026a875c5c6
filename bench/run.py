"""Run every benchmark scenario against the mock server, for tether and for the floor; print and save.

Run: .venv/bin/python bench/run.py [SCENARIO ...] [--repeat N] [--json PATH]

The mock server runs on core 1 and each client process on core 0 (``os.sched_setaffinity``), so client CPU is
not shared with the server. Every scenario runs in a fresh client process, floor and tether alternating,
``--repeat`` times; the table shows the median of the repeats. The server counts requests, so a run that
stopped early is caught as a failure.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable
CLIENT_CORE, SERVER_CORE = 0, 1
DEFAULT_SCENARIOS = [
    "sequential", "streaming", "parallel-calls", "concurrent-200", "concurrent-1000", "concurrent-10000",
    "long-60", "ttft",
]  # fmt: skip


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def pinned(core: int) -> Any:
    cores = os.sched_getaffinity(0)
    return (lambda: os.sched_setaffinity(0, {core})) if core in cores and len(cores) > 1 else None


def server_stats(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=5) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


def start_server() -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    server = subprocess.Popen([PYTHON, str(HERE / "mock_server.py"), str(port)], preexec_fn=pinned(SERVER_CORE))
    for _ in range(200):
        try:
            server_stats(port)
            return server, port
        except OSError:
            time.sleep(0.05)
    server.kill()
    raise SystemExit("the mock server did not start")


def run_client(impl: str, scenario: str, port: int) -> dict[str, Any]:
    before = server_stats(port)
    completed = subprocess.run(
        [PYTHON, str(HERE / "workload.py"), impl, scenario, f"http://127.0.0.1:{port}/v1"],
        capture_output=True, text=True, check=False, preexec_fn=pinned(CLIENT_CORE), cwd=HERE,
    )  # fmt: skip
    if completed.returncode != 0:
        raise SystemExit(f"{impl} {scenario} failed:\n{completed.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(completed.stdout)
    after = server_stats(port)
    served = after["requests"] - before["requests"]
    warm_up = figures["steps"] // figures["runs"]
    figures["failures"] += abs(served - warm_up - figures["requests_expected"]) // max(warm_up, 1)
    figures["server_cpu_ms_per_request"] = (after["cpu_s"] - before["cpu_s"]) * 1000 / max(served, 1)
    return figures


def summarize(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of the repeats for each figure, plus what only some scenarios have."""
    first = samples[0]
    out: dict[str, Any] = {key: first[key] for key in ("impl", "scenario", "runs", "steps")}
    for key in ("cpu_ms_per_step", "wall_s", "peak_rss_kb", "server_cpu_ms_per_request"):
        out[key] = statistics.median(s[key] for s in samples)
    per_run = [s["rss_per_run_kb"] for s in samples if s["rss_per_run_kb"] is not None]
    out["rss_per_run_kb"] = statistics.median(per_run) if per_run else None
    out["failures"] = sum(s["failures"] for s in samples)
    ttft = [t for s in samples for t in s["ttft_ns"]]
    out["ttft_median_ms"] = statistics.median(ttft) / 1e6 if ttft else None
    turns = [run for s in samples for run in s["turn_cpu_ns"] if len(run) >= 60]
    if turns:
        early = statistics.median((run[10] - run[0]) / 10 for run in turns)
        late = statistics.median((run[-1] - run[-11]) / 10 for run in turns)
        out["late_over_early_step_cpu"] = late / early
    return out


def startup_ms(args: list[str], repeat: int = 15) -> float:
    """Median wall time of a command, minus that of a bare interpreter."""

    def median_of(command: list[str]) -> float:
        times = []
        for _ in range(repeat):
            started = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True)
            times.append(time.perf_counter() - started)
        return statistics.median(times) * 1000

    return median_of([PYTHON, *args]) - median_of([PYTHON, "-c", "pass"])


def table(results: list[dict[str, Any]]) -> str:
    rows = ["| scenario | floor ms/step | tether ms/step | ratio | tether KB/run (floor) | failures | notes |",
            "|---|---|---|---|---|---|---|"]  # fmt: skip
    by_key = {(r["impl"], r["scenario"]): r for r in results}
    for scenario in dict.fromkeys(r["scenario"] for r in results):
        base, ours = by_key[("floor", scenario)], by_key[("tether", scenario)]
        notes = []
        if ours.get("ttft_median_ms") is not None:
            notes.append(f"TTFT median {ours['ttft_median_ms']:.3f} ms (floor {base['ttft_median_ms']:.3f})")
        if "late_over_early_step_cpu" in ours:
            notes.append(f"step 51-60 / step 1-10 CPU: {ours['late_over_early_step_cpu']:.2f} "
                         f"(floor {base['late_over_early_step_cpu']:.2f})")  # fmt: skip
        memory = (f"{ours['rss_per_run_kb']:.1f} ({base['rss_per_run_kb']:.1f})"
                  if ours["rss_per_run_kb"] is not None else "")  # fmt: skip
        rows.append(
            f"| {scenario} | {base['cpu_ms_per_step']:.3f} | {ours['cpu_ms_per_step']:.3f} | "
            f"{ours['cpu_ms_per_step'] / base['cpu_ms_per_step']:.2f}x | {memory} | "
            f"{ours['failures'] + base['failures']} | {'; '.join(notes)} |"
        )
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", default=DEFAULT_SCENARIOS)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", default=str(HERE / "results.json"))
    options = parser.parse_args()
    server, port = start_server()
    results = []
    try:
        for scenario in options.scenarios:
            repeat = 1 if scenario == "concurrent-10000" else options.repeat
            samples: dict[str, list[dict[str, Any]]] = {"floor": [], "tether": []}
            for _ in range(repeat):
                for impl in ("floor", "tether"):
                    samples[impl].append(run_client(impl, scenario, port))
            results += [summarize(samples["floor"]), summarize(samples["tether"])]
            print(f"done: {scenario}", file=sys.stderr, flush=True)
    finally:
        server.terminate()
        server.wait()
    startup = {
        "import_tether_ms": startup_ms(["-c", "import tether"]),
        "tether_help_ms": startup_ms(["-m", "tether.cli.app", "--help"]),
    }
    print(table(results))
    print(f"\nimport tether: {startup['import_tether_ms']:.1f} ms; tether --help: {startup['tether_help_ms']:.1f} ms "
          "(net of interpreter start)")  # fmt: skip
    Path(options.json).write_text(json.dumps({"results": results, "startup": startup}, indent=2))


if __name__ == "__main__":
    main()
