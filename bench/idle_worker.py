"""What an idle ``tether worker`` costs: its CPU per second while no run is queued, on SQLite and on PostgreSQL.

Run: .venv/bin/python bench/idle_worker.py [--seconds N] [--settle N] [--postgres URL] [--pickup N] [--fill N]

For each database (filled first, with ``--fill N``, with N ended runs, as a store that has served a while
is) it starts ``tether worker --agent idle_agent:agent --db ...`` (an agent whose model is never
called) in a temporary folder, waits for its "serving" line and ``--settle`` seconds more (start-up over),
then reads the worker's user + system time from ``/proc/<pid>/stat`` before and after ``--seconds`` seconds:
CPU ms per second of wall time, the process's every thread (DBOS's own among them) but not the database
server's. With ``--pickup N`` it then enqueues N runs one at a time (each waiting for the last to be taken)
and prints how long each waited, queued, before the worker took it: what the idle savings cost a run.
The PostgreSQL database is made fresh on ``--postgres`` (default ``TETHER_BENCH_POSTGRES`` or
``postgresql://postgres@127.0.0.1:5432/postgres``) and dropped after; with no server, its row is skipped.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

AGENT = """
from tether import Agent
agent = Agent("openai-compatible:idle", base_url="http://127.0.0.1:9/v1")
"""
ENQUEUE = """
import asyncio, sys, time
from tether import Agent
from tether.durable import DurableAgent, Queue, get_run, launch, shutdown

durable = DurableAgent(Agent("openai-compatible:idle", base_url="http://127.0.0.1:9/v1"), name="agent")
kwargs = {"system_database_url": sys.argv[1]} if "://" in sys.argv[1] else {"database": sys.argv[1]}
launch(**kwargs, worker_id="idle-bench-client")

async def main() -> None:
    for n in range(int(sys.argv[2])):
        run_id = f"pickup-{n}-{time.time_ns()}"
        start = time.monotonic()
        await durable.enqueue("hello", queue=Queue("idle"), workflow_id=run_id)
        while (await get_run(run_id)).status == "queued":
            await asyncio.sleep(0.005)
        print(f"{time.monotonic() - start:.3f}", flush=True)
        while (await get_run(run_id)).status == "running":
            await asyncio.sleep(0.05)

asyncio.run(main())
shutdown()
"""
FILL = """
import asyncio, sys
from tether import Agent
from tether.durable import DurableAgent, launch, shutdown
from tether.providers.scripted import ScriptedProvider, reply

count = int(sys.argv[2])
durable = DurableAgent(Agent(ScriptedProvider([reply("an answer " * 40)] * count)), name="filler")
kwargs = {"system_database_url": sys.argv[1]} if "://" in sys.argv[1] else {"database": sys.argv[1]}
launch(**kwargs, worker_id="idle-bench-filler")

async def main() -> None:
    for n in range(count):
        await durable.run("a prompt " * 30, workflow_id=f"fill-{n}")

asyncio.run(main())
shutdown()
"""
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system time of the process ``pid``, every thread of it."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def tether() -> list[str]:
    return [sys.executable, "-m", "tether"]


def measure(db: str, folder: Path, seconds: float, settle: float, pickup: int, fill: int) -> tuple[float, list[float]]:
    """The idle worker's CPU ms per second on ``db``, and the waits of ``pickup`` runs it took."""
    (folder / "idle_agent.py").write_text(AGENT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])}
    if fill:
        subprocess.run([sys.executable, "-c", FILL, db, str(fill)], cwd=folder, env=env, check=True, timeout=600)
    worker = subprocess.Popen(
        [*tether(), "worker", "--agent", "idle_agent:agent", "--db", db, "--queue", "idle", "--worker-id", "idle-w"],
        cwd=folder,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    serving = threading.Event()

    def read() -> None:
        assert worker.stderr is not None
        for line in worker.stderr:
            if "serving queue" in line:
                serving.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        if not serving.wait(120):
            raise SystemExit(f"the worker on {db} never said it was serving")
        time.sleep(settle)
        before = cpu_seconds(worker.pid)
        time.sleep(seconds)
        used = cpu_seconds(worker.pid) - before
        waits: list[float] = []
        if pickup:
            done = subprocess.run(
                [sys.executable, "-c", ENQUEUE, db, str(pickup)],
                cwd=folder,
                env=env,
                capture_output=True,
                text=True,
                check=True,
                timeout=300,
            )
            waits = [float(line) for line in done.stdout.split()]
        return used * 1000 / seconds, waits
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(60)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


def postgres_database(server: str) -> str | None:
    try:
        import psycopg

        name = f"tether_idle_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(server, autocommit=True, connect_timeout=5) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        return server.rsplit("/", 1)[0] + f"/{name}"
    except Exception as error:  # noqa: BLE001 - no server: the row is skipped, the reason printed
        print(f"postgresql skipped: {error}", file=sys.stderr)
        return None


def drop(server: str, url: str) -> None:
    import psycopg

    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--settle", type=float, default=3.0)
    parser.add_argument("--pickup", type=int, default=0, metavar="N")
    parser.add_argument("--fill", type=int, default=0, metavar="N")
    default = os.environ.get("TETHER_BENCH_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--postgres", default=default, metavar="URL")
    args = parser.parse_args()
    print(f"{'database':<12}{'idle CPU ms/s':>15}{'pickup wait s (median, max)':>30}")
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        rows: list[tuple[str, str]] = [("sqlite", str(folder / "runs.sqlite"))]
        url = postgres_database(args.postgres)
        if url is not None:
            rows.append(("postgresql", url))
        try:
            for name, db in rows:
                ms, waits = measure(db, folder, args.seconds, args.settle, args.pickup, args.fill)
                shown = f"{statistics.median(waits):.3f}, {max(waits):.3f}" if waits else "-"
                print(f"{name:<12}{ms:>15.1f}{shown:>30}", flush=True)
        finally:
            if url is not None:
                drop(args.postgres, url)


if __name__ == "__main__":
    main()
