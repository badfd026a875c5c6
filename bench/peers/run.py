"""tether, the floor and three agent frameworks on the same workload, in one run.

Run: .venv/bin/python bench/peers/run.py   (after the setup in bench/peers/README.md)

The mock server and the pinning are those of bench/run.py; the workload is its ``sequential`` scenario
(40 runs of 6 steps, one at a time). Each framework runs in the peers' own environment.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from run import CLIENT_CORE, pinned, run_client, start_server  # noqa: E402

PEERS_PYTHON = HERE / ".venv" / "bin" / "python"
FRAMEWORKS = ["pydantic-ai", "openai-agents", "langgraph"]
REPEAT = 3


def run_peer(framework: str, port: int) -> dict[str, Any]:
    completed = subprocess.run(
        [str(PEERS_PYTHON), str(HERE / "peer_workload.py"), framework, f"http://127.0.0.1:{port}/v1"],
        capture_output=True, text=True, check=False, preexec_fn=pinned(CLIENT_CORE),
    )  # fmt: skip
    if completed.returncode != 0:
        raise SystemExit(f"{framework} failed:\n{completed.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


def versions() -> str:
    listed = subprocess.run([str(PEERS_PYTHON), "-m", "pip", "freeze"], capture_output=True, text=True, check=True)
    wanted = ("pydantic-ai-slim", "openai-agents", "langgraph", "openai")
    return ", ".join(line for line in listed.stdout.splitlines() if line.split("==")[0] in wanted)


def main() -> None:
    if not PEERS_PYTHON.exists():
        raise SystemExit("set up the peers' environment first: see bench/peers/README.md")
    server, port = start_server()
    rows: dict[str, list[float]] = {}
    try:
        for _ in range(REPEAT):
            for impl in ("floor", "tether"):
                rows.setdefault(impl, []).append(run_client(impl, "sequential", port)["cpu_ms_per_step"])
            for framework in FRAMEWORKS:
                figures = run_peer(framework, port)
                assert figures["failures"] == 0, figures
                rows.setdefault(framework, []).append(figures["cpu_ms_per_step"])
    finally:
        server.terminate()
        server.wait()
    tether = statistics.median(rows["tether"])
    print("| client | CPU ms/step | vs tether |")
    print("|---|---|---|")
    for name, samples in rows.items():
        value = statistics.median(samples)
        print(f"| {name} | {value:.2f} | {value / tether:.1f}x |")
    print(f"\n{versions()}")


if __name__ == "__main__":
    main()
