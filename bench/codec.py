"""What the JSON codec and the event loop cost per step: tether with the standard library's ``json`` and with
``orjson``, on asyncio's loop and on uvloop, and the floor on each loop (its JSON is always ``json``).

Run: .venv/bin/python bench/codec.py [SCENARIO ...] [--repeat N]          (CPU ms per step, default 5 repeats)
     .venv/bin/python bench/codec.py --instructions [SCENARIO ...]          (needs valgrind; about 15 minutes)

Each variant runs ``bench/workload.py`` in a fresh client process as ``bench/run.py`` does (client on core 0,
the mock server on core 1), the variants interleaved, and reports the median CPU per step. ``--instructions``
counts instead, as ``bench/telemetry.py --instructions`` does: each variant runs the scenario under
``valgrind --tool=callgrind`` with 10 and with 30 timed runs (``--runs``), and the difference of the
instructions executed, divided by the steps between them, is the client's instructions per step, start-up and
warm-up cancelled out. ``--variants`` picks some of the variants. The variants are set by ``TETHER_JSON``
(``stdlib`` keeps tether on ``json``) and ``TETHER_BENCH_LOOP`` (``uvloop``); see ``workload.py``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
from typing import Any

from run import CLIENT_CORE, HERE, PYTHON, pinned, server_stats, start_server

VARIANTS: dict[str, tuple[str, str, str]] = {
    # name: (impl, TETHER_JSON, TETHER_BENCH_LOOP)
    "tether json asyncio": ("tether", "stdlib", "asyncio"),
    "tether orjson asyncio": ("tether", "auto", "asyncio"),
    "tether json uvloop": ("tether", "stdlib", "uvloop"),
    "tether orjson uvloop": ("tether", "auto", "uvloop"),
    "floor asyncio": ("floor", "stdlib", "asyncio"),
    "floor uvloop": ("floor", "stdlib", "uvloop"),
}


def _env(variant: str) -> dict[str, str]:
    _, codec, loop = VARIANTS[variant]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(HERE.parent / "src")
    env["TETHER_BENCH_LOOP"] = loop
    env.pop("TETHER_JSON", None)
    if codec == "stdlib":
        env["TETHER_JSON"] = "stdlib"
    return env


def _client(variant: str, scenario: str, port: int, runs: int | None, valgrind: bool) -> tuple[dict[str, Any], str]:
    impl = VARIANTS[variant][0]
    command = [PYTHON, str(HERE / "workload.py"), impl, scenario, f"http://127.0.0.1:{port}/v1"]
    if runs is not None:
        command.append(str(runs))
    if valgrind:
        command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command]
    before = server_stats(port)["requests"]
    completed = subprocess.run(
        command, capture_output=True, text=True, check=False, cwd=HERE, env=_env(variant),
        preexec_fn=None if valgrind else pinned(CLIENT_CORE),
    )  # fmt: skip
    if completed.returncode != 0:
        raise SystemExit(f"{variant} {scenario} failed:\n{completed.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(completed.stdout)
    served = server_stats(port)["requests"] - before
    expected = figures["requests_expected"] + figures["steps"] // figures["runs"]
    if figures["failures"] or served != expected:
        raise SystemExit(f"{variant} {scenario}: {figures['failures']} failed runs, {served}/{expected} requests")
    return figures, completed.stderr


def instructions(variant: str, scenario: str, port: int, runs_pair: tuple[int, int]) -> float:
    """Client instructions per step (see the module docstring)."""
    counts = []
    for runs in runs_pair:
        _, stderr = _client(variant, scenario, port, runs, valgrind=True)
        found = re.search(r"Collected : (\d+)", stderr)
        if found is None:
            raise SystemExit(f"{variant} {scenario}: no instruction count from callgrind")
        counts.append(int(found[1]))
    return (counts[1] - counts[0]) / ((runs_pair[1] - runs_pair[0]) * 6)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", default=["sequential", "streaming"])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--instructions", action="store_true", help="count instructions under callgrind instead")
    parser.add_argument("--runs", type=int, nargs=2, default=(10, 30), help="--instructions: the two run counts")
    parser.add_argument("--variants", help="comma-separated, of: " + ", ".join(VARIANTS))
    options = parser.parse_args()
    chosen = options.variants.split(",") if options.variants else list(VARIANTS)
    server, port = start_server()
    rows: dict[str, dict[str, float]] = {}
    try:
        for scenario in options.scenarios:
            if options.instructions:
                rows[scenario] = {v: instructions(v, scenario, port, options.runs) for v in chosen}
            else:
                samples: dict[str, list[float]] = {v: [] for v in chosen}
                for _ in range(options.repeat):
                    for variant in chosen:
                        samples[variant].append(_client(variant, scenario, port, None, False)[0]["cpu_ms_per_step"])
                rows[scenario] = {v: statistics.median(s) for v, s in samples.items()}
            print(f"done: {scenario}", file=sys.stderr, flush=True)
    finally:
        server.terminate()
        server.wait()
    what = (
        "client instructions per step (callgrind)"
        if options.instructions
        else f"CPU ms per step (median of {options.repeat})"
    )
    print(f"{what}; ratio to tether on json and asyncio, and to the floor on the same loop\n")
    print("| scenario | variant | figure | vs tether json asyncio | vs floor, same loop |\n|---|---|---|---|---|")
    for scenario, figures in rows.items():
        base = figures.get("tether json asyncio", math.nan)
        for variant, value in figures.items():
            floor = figures.get(f"floor {VARIANTS[variant][2]}", math.nan)
            shown = f"{value:,.0f}" if options.instructions else f"{value:.3f}"
            ratios = " | ".join("" if math.isnan(r) else f"{r:.3f}x" for r in (value / base, value / floor))
            print(f"| {scenario} | {variant} | {shown} | {ratios} |")


if __name__ == "__main__":
    main()
