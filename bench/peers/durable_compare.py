"""tether's durable runs next to pydantic-ai's DBOS integration: same engine, same scenario, same databases.

Run: .venv/bin/python bench/peers/durable_compare.py [--runs N] [--repeat N] [--postgres URL]
(after the setup in bench/peers/README.md; about 2 minutes with the defaults)

Each client runs ``tools-5`` against ``bench/mock_server.py`` (six steps a run: five model calls asking for one
``add`` call each, then the final answer), one run at a time, every run a DBOS workflow whose model calls and tool
calls are DBOS steps: tether's is ``bench/durable.py``'s client (``DurableAgent.run``), pydantic-ai's is
``durable_peer.py`` in the peers' environment. Both on a fresh SQLite file and on a fresh PostgreSQL database
(made and dropped on the server at ``--postgres``; skipped, and the reason printed, where none answers), the
clients pinned to core 0 and the mock server to core 1, alternating, ``--repeat`` processes each. pydantic-ai runs
SQLite twice: with DBOS's default rollback journal (what its users get), and in WAL mode as tether opens it.

Figures: CPU (user + system of the client process, every thread) and wall time per run, median over a process's
runs, then the median over the processes; and the ratio tether / pydantic-ai.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from run import CLIENT_CORE, pinned, server_stats, start_server  # noqa: E402

from durable import database, postgres_problem, run_client, split  # noqa: E402

PEERS_PYTHON = HERE / ".venv" / "bin" / "python"
STEPS = 6


def tether_run(port: int, url: str, runs: int) -> tuple[float, float]:
    """CPU ms and wall ms of tether's median durable run, in one fresh client process."""
    marks = run_client(port, url, runs, None)["marks"]
    medians = []
    for column in (3, 4):
        stretch = [0.0] + [(b[column] - a[column]) / 1e6 for a, b in itertools.pairwise(marks)]
        medians.append(split(marks, stretch)["durable"]["run"])
    return medians[0], medians[1]


def peer_run(port: int, url: str, runs: int, wal: bool) -> tuple[float, float]:
    """CPU ms and wall ms of pydantic-ai's median durable run, in one fresh client process; checked against the
    requests the mock server served."""
    before = server_stats(port)["requests"]
    completed = subprocess.run(
        [str(PEERS_PYTHON), str(HERE / "durable_peer.py"), url, f"http://127.0.0.1:{port}/v1", str(runs),
         *(["--wal"] if wal else [])],
        capture_output=True, text=True, check=False, preexec_fn=pinned(CLIENT_CORE),
    )  # fmt: skip
    if completed.returncode != 0:
        raise SystemExit(f"pydantic-ai failed:\n{completed.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    served = server_stats(port)["requests"] - before
    if figures["failures"] or served != (runs + 1) * STEPS:
        raise SystemExit(f"pydantic-ai: {figures['failures']} failed runs, {served} requests served")
    return figures["cpu_ms_per_run"], figures["wall_ms_per_run"]


def versions() -> str:
    listed = subprocess.run([str(PEERS_PYTHON), "-m", "pip", "freeze"], capture_output=True, text=True, check=True)
    wanted = ("pydantic-ai-slim", "dbos", "SQLAlchemy", "psycopg")
    return ", ".join(line for line in listed.stdout.splitlines() if line.split("==")[0] in wanted)


def main() -> None:
    options = _options()
    if not PEERS_PYTHON.exists():
        raise SystemExit("set up the peers' environment first: see bench/peers/README.md")
    backends = ["sqlite", "postgres"]
    problem = postgres_problem(options.postgres)
    if problem is not None:
        print(f"skipping PostgreSQL: {problem}", file=sys.stderr, flush=True)
        backends.remove("postgres")
    clients = {"sqlite": ["tether", "pydantic-ai", "pydantic-ai (WAL)"], "postgres": ["tether", "pydantic-ai"]}
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
    server, port = start_server()
    try:
        for _ in range(options.repeat):
            for backend in backends:
                for client in clients[backend]:
                    with database(backend, options.postgres) as url:
                        if client == "tether":
                            figures = tether_run(port, url, options.runs)
                        else:
                            figures = peer_run(port, url, options.runs, wal=client.endswith("(WAL)"))
                    samples.setdefault((backend, client), []).append(figures)
                    print(f"done: {backend}, {client}: {figures[0]:.2f} / {figures[1]:.2f}", file=sys.stderr)
    finally:
        server.terminate()
        server.wait()
    medians = {
        key: (statistics.median(s[0] for s in runs), statistics.median(s[1] for s in runs))
        for key, runs in samples.items()
    }
    print("| database | client | CPU ms/run | wall ms/run | tether / it, CPU | tether / it, wall |")
    print("|---|---|---|---|---|---|")
    for backend in backends:
        tether_cpu, tether_wall = medians[(backend, "tether")]
        for client in clients[backend]:
            cpu, wall = medians[(backend, client)]
            ratios = "| |" if client == "tether" else f"| {tether_cpu / cpu:.2f}x | {tether_wall / wall:.2f}x |"
            print(f"| {backend} | {client} | {cpu:.2f} | {wall:.2f} {ratios}")
    print(f"\n{versions()}")
    if options.json:
        rows = {f"{backend}/{client}": figures for (backend, client), figures in medians.items()}
        Path(options.json).write_text(json.dumps(rows, indent=1))


def _options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="timed runs in each client process")
    parser.add_argument("--repeat", type=int, default=3, help="client processes of each kind and database")
    default_postgres = os.environ.get("TETHER_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--postgres", default=default_postgres, help="a PostgreSQL server's admin database URL")
    parser.add_argument("--json", help="also write the figures there")
    return parser.parse_args()


if __name__ == "__main__":
    main()
