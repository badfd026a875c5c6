"""What a run keeps alive and what a step leaves for the collector: tether against the floor, same workload.

Run: .venv/bin/python bench/objects.py [--runs 1000] [--steps 240] [--where] [--collector]

Each implementation runs in a fresh client process (``workload.py``'s runners, ``tools-5``) against
``mock_server.py``:

- **In flight**: ``--runs`` runs start at once while the server holds its answers (``POST /hold``), so that
  all of them wait for the same answer. Measured twice: waiting for the first answer, and at mid-run, waiting
  for the second turn's answer after one tool call (where a run spends most of its life). After
  ``gc.collect()``: ``len(gc.get_objects())`` and RSS (``/proc/self/statm``) minus the same before the runs,
  divided by the runs, and the 25 types that grew most, per run.
- **Per step** (``--steps`` sequential steps, after a warm-up, ``gc.freeze()`` and ``gc.disable()``): the
  growth of gen-0's count (tracked objects allocated net of those freed: what paces gen-0 collections, one per
  700), the tracked objects still there after the steps (refcounting freed the rest), and how many of those a
  collection then finds unreachable (cyclic garbage: what only the collector frees), with their types.
- ``--where`` (tether only, slower): ``tracemalloc`` names the line in ``src/tether`` (the innermost frame
  there) that allocated each object a run in flight holds, per type. Objects reused from a free list (dicts,
  lists, tuples, frames) keep the trace of their first allocation, so those sites are indicative.
- ``--collector``: CPU per step at 10,000 concurrent runs with the default collector, with ``gc.freeze()``
  after start-up and with ``gc.set_threshold(50_000, 20, 20)`` (``TETHER_BENCH_GC`` in ``workload.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import floor  # noqa: E402 - bench/ is not a package
import run as driver  # noqa: E402
import workload  # noqa: E402

TOP = 25
STEP_FIGURES = [
    ("gen0_net_per_step", "gen-0 count growth (allocated net of freed)"),
    ("left_per_step", "tracked objects left after refcounting"),
    ("cyclic_garbage_per_step", "of which cyclic garbage (freed only by the collector)"),
]


def type_name(obj: object) -> str:
    kind = type(obj)
    return f"{kind.__module__}.{kind.__qualname__}"


def census() -> tuple[int, Counter[str]]:
    gc.collect()
    objects = gc.get_objects()
    return len(objects), Counter(type_name(o) for o in objects)


def server(base_url: str, what: str) -> dict[str, Any]:
    """A blocking call to the mock server's control endpoints (it briefly blocks the client's loop, on purpose)."""
    root = base_url.removesuffix("/v1")
    method = "GET" if what == "stats" else "POST"
    with urllib.request.urlopen(urllib.request.Request(root + "/" + what, method=method), timeout=10) as response:
        return json.loads(response.read())  # type: ignore[no-any-return]


async def all_held(base_url: str, runs: int) -> None:
    """Poll the server (another process: no event of ours to wait on) until it holds every run's request."""
    while True:
        if server(base_url, "stats")["held"] >= runs:
            return
        await asyncio.sleep(0.02)


@dataclass
class Moment:
    """The process at one moment: tracked objects, their types, RSS, and (``--where``) their ids."""

    objects: int
    types: Counter[str]
    rss_kb: int
    ids: set[int] | None = None

    @classmethod
    def now(cls, with_ids: bool = False) -> Moment:
        objects, types = census()
        return cls(objects, types, workload.rss_kb(), {id(o) for o in gc.get_objects()} if with_ids else None)

    def per_run(self, before: Moment, runs: int) -> dict[str, Any]:
        grown = self.types - before.types
        return {
            "objects_per_run": (self.objects - before.objects) / runs,
            "rss_kb_per_run": (self.rss_kb - before.rss_kb) / runs,
            "types_per_run": {name: count / runs for name, count in grown.most_common()},
        }


def allocation_sites(before: Moment, runs: int) -> dict[str, float]:
    """Per run, what tether objects a run holds, by type and the ``src/tether`` line that allocated them."""
    import tracemalloc

    assert before.ids is not None
    gc.collect()
    sites: Counter[str] = Counter()
    for obj in gc.get_objects():
        if id(obj) in before.ids:
            continue
        trace = tracemalloc.get_object_traceback(obj)
        frames = list(reversed(trace)) if trace is not None else []  # innermost first
        ours = next((f for f in frames if "/tether/" in f.filename), None)
        where = f"{ours.filename.split('/tether/', 1)[1]}:{ours.lineno}" if ours else "(not from tether)"
        if frames and frames[0] is not ours:
            where += f" via {Path(frames[0].filename).parent.name}/{Path(frames[0].filename).name}:{frames[0].lineno}"
        if not frames:
            where = "(untraced: allocated before tracing, or a layout tracemalloc cannot map)"
        sites[f"{type_name(obj)}  {where}"] += 1
    return {site: count / runs for site, count in sites.most_common(60)}


async def in_flight(impl: str, base_url: str, runs: int, where: bool) -> dict[str, Any]:
    scenario = workload.Scenario(runs=runs, concurrency=runs)
    run = workload.tether_runner(base_url, scenario) if impl == "tether" else workload.floor_runner(base_url, scenario)
    if where:
        import tracemalloc

        tracemalloc.start(25)
    await run(workload.Observations())  # warm-up: imports, connection, caches
    await asyncio.gather(*(run(workload.Observations()) for _ in range(min(runs, 50))))  # pool of connections
    server(base_url, "hold")
    before = Moment.now(with_ids=where)
    tasks = [asyncio.ensure_future(run(workload.Observations())) for _ in range(runs)]
    figures: dict[str, Any] = {"impl": impl, "runs": runs}
    for moment in ("first_answer", "mid_run"):
        await all_held(base_url, runs)
        figures[moment] = Moment.now().per_run(before, runs)
        if where:
            figures[moment]["sites"] = allocation_sites(before, runs)
        server(base_url, "release" if moment == "first_answer" else "release?stop=1")
    texts = await asyncio.gather(*tasks)
    figures["failures"] = sum(not text.endswith(workload.EXPECTED_END) for text in texts)
    if impl == "floor":
        await floor.close()
    return figures


async def per_step(impl: str, base_url: str, steps: int) -> dict[str, Any]:
    """Sequential runs with the collector off and everything before them frozen (see the module docstring)."""
    scenario = workload.Scenario(runs=1, concurrency=1)
    run = workload.tether_runner(base_url, scenario) if impl == "tether" else workload.floor_runner(base_url, scenario)
    for _ in range(3):
        await run(workload.Observations())  # warm-up
    runs = max(steps // scenario.steps_per_run, 1)
    steps = runs * scenario.steps_per_run
    gc.collect()
    gc.freeze()
    gc.disable()
    count_before, objects_before = gc.get_count()[0], len(gc.get_objects())
    for _ in range(runs):
        await run(workload.Observations())
    count_after, objects_after = gc.get_count()[0], len(gc.get_objects())
    gc.set_debug(gc.DEBUG_SAVEALL)
    found = gc.collect()
    garbage = Counter(type_name(o) for o in gc.garbage)
    gc.set_debug(0)
    gc.garbage.clear()
    gc.enable()
    if impl == "floor":
        await floor.close()
    return {
        "impl": impl,
        "steps": steps,
        "gen0_net_per_step": (count_after - count_before) / steps,
        "left_per_step": (objects_after - objects_before) / steps,
        "cyclic_garbage_per_step": found / steps,
        "garbage_types_per_step": {name: count / steps for name, count in garbage.most_common(TOP)},
    }


def client(impl: str, base_url: str, runs: int, steps: int, where: bool) -> None:
    figures = {
        "in_flight": asyncio.run(in_flight(impl, base_url, runs, where)),
        "per_step": asyncio.run(per_step(impl, base_url, steps)),
    }
    print(json.dumps(figures))


def spawn(args: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    completed = subprocess.run(
        [driver.PYTHON, *args], capture_output=True, text=True, check=False, cwd=HERE,
        preexec_fn=driver.pinned(driver.CLIENT_CORE), env={**os.environ, **(env or {})},
    )  # fmt: skip
    if completed.returncode != 0:
        raise SystemExit(f"{args} failed:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def type_table(title: str, floor: dict[str, float], tether: dict[str, float]) -> str:
    names = sorted(set(floor) | set(tether), key=lambda n: tether.get(n, 0) - floor.get(n, 0), reverse=True)
    rows = [f"\n{title}", "| type | floor | tether | tether - floor |", "|---|---|---|---|"]
    for name in names[:TOP]:
        ours, base = tether.get(name, 0.0), floor.get(name, 0.0)
        rows.append(f"| `{name}` | {base:.2f} | {ours:.2f} | {ours - base:+.2f} |")
    fewer = [n for n in names if tether.get(n, 0) - floor.get(n, 0) < -0.5]
    if fewer:
        rows.append("| floor only or more: " + ", ".join(f"`{n}` {floor.get(n, 0) - tether.get(n, 0):+.1f}"
                                                     for n in fewer[::-1][:8]) + " | | | |")  # fmt: skip
    return "\n".join(rows)


def report(results: dict[str, dict[str, Any]], runs: int) -> str:
    floor, tether = results["floor"], results["tether"]
    lines = [f"Runs in flight: {runs} (tools-5)", "",
             "| moment | floor objects/run | tether objects/run | floor RSS KB/run | tether RSS KB/run |",
             "|---|---|---|---|---|"]  # fmt: skip
    for moment in ("first_answer", "mid_run"):
        base, ours = floor["in_flight"][moment], tether["in_flight"][moment]
        lines.append(f"| {moment} | {base['objects_per_run']:.1f} | {ours['objects_per_run']:.1f} | "
                     f"{base['rss_kb_per_run']:.1f} | {ours['rss_kb_per_run']:.1f} |")  # fmt: skip
    for moment in ("first_answer", "mid_run"):
        lines.append(type_table(f"Types per run in flight, {moment} (top {TOP} by tether's surplus):",
                                floor["in_flight"][moment]["types_per_run"],
                                tether["in_flight"][moment]["types_per_run"]))  # fmt: skip
        sites = tether["in_flight"][moment].get("sites")
        if sites:
            lines += [f"\nWhere tether's objects in flight come from, {moment} (per run):"]
            lines += [f"  {count:6.2f}  {site}" for site, count in sites.items()]
    base, ours = floor["per_step"], tether["per_step"]
    lines += ["", f"Per sequential step ({ours['steps']} steps, gc frozen and disabled):", "",
              "| figure | floor | tether |", "|---|---|---|"]  # fmt: skip
    for key, label in STEP_FIGURES:
        lines.append(f"| {label} | {base[key]:.1f} | {ours[key]:.1f} |")
    lines.append(type_table("Cyclic garbage per step by type:", base["garbage_types_per_step"],
                            ours["garbage_types_per_step"]))  # fmt: skip
    if any(r.get("failures") for r in (floor["in_flight"], tether["in_flight"])):
        lines.append("\nFAILURES: some runs did not end with the expected text")
    return "\n".join(lines)


def collector(port: int) -> str:
    rows = ["| collector | floor ms/step | tether ms/step |", "|---|---|---|"]
    for setting in ("default", "freeze", "threshold"):
        cells = []
        for impl in ("floor", "tether"):
            figures = spawn(["workload.py", impl, "concurrent-10000", f"http://127.0.0.1:{port}/v1"],
                            env={"TETHER_BENCH_GC": setting})  # fmt: skip
            cells.append(f"{figures['cpu_ms_per_step']:.3f}")
        rows.append(f"| {setting} | {' | '.join(cells)} |")
        print(f"done: collector {setting}", file=sys.stderr, flush=True)
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=240)
    parser.add_argument("--where", action="store_true")
    parser.add_argument("--collector", action="store_true")
    parser.add_argument("--client", nargs=2, metavar=("IMPL", "BASE_URL"), help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.client:
        impl, base_url = options.client
        client(impl, base_url, options.runs, options.steps, options.where and impl == "tether")
        return
    process, port = driver.start_server()
    try:
        url = f"http://127.0.0.1:{port}/v1"
        common = ["--runs", str(options.runs), "--steps", str(options.steps)] + (["--where"] if options.where else [])
        results = {impl: spawn(["objects.py", *common, "--client", impl, url]) for impl in ("floor", "tether")}
        print(report(results, options.runs))
        if options.collector:
            print("\nCPU per step at 10,000 concurrent runs:\n" + collector(port))
    finally:
        process.terminate()
        process.wait()


if __name__ == "__main__":
    main()
