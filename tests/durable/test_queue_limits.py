"""Queue limits that hold, with real ``tether worker`` processes, a client enqueuing, SIGKILL, on SQLite and
PostgreSQL; the model server (:mod:`tests.durable.overlap_model`) records how many requests each worker has in
flight at once, told apart by the ``X-Worker`` header of its ``agent.toml``.

The defects reproduced: a worker's ``--concurrency`` was the queue's shared row, which the last process to
declare the queue wrote (a client enqueuing removed it, one worker grabbed most runs at start-up); starting a
worker erased the global limits a client had set; a run cancelled while queued and resumed went to the
engine's own queue, which every process takes from, a plain client too.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.durable.overlap_model import OverlapModel
from tests.e2e.conftest import Project
from tests.e2e.test_worker import Worker

DEADLINE = 120.0
"""Seconds a test waits for runs to end before it fails."""

CLIENT = """
import asyncio, json, os, sys
from pathlib import Path
from tether.cli.build import load_setup
from tether.durable import DurableAgent, Queue, launch, shutdown

db, base_url, mode, *run_ids = sys.argv[1:]
# the agent of the agent.toml in the working directory, as a worker builds it: one deploy version with them
setup = load_setup(Path.cwd(), os.environ, {}, None)
durable = DurableAgent(setup.agent(interactive=False, durable=True), name="agent")
launch(system_database_url=db, worker_id="client")

async def main() -> None:
    if mode in ("enqueue", "declare"):  # declare: the queue declared with global limits
        queue = Queue("jobs", concurrency=3, limit=(100, 60.0)) if mode == "declare" else Queue("jobs")
        for run_id in run_ids:
            await durable.enqueue(f"prompt {run_id}", queue=queue, workflow_id=run_id)
    elif mode == "results":
        print(json.dumps({run_id: (await durable.result(run_id)).text for run_id in run_ids}))
    elif mode == "idle":  # a plain client, alive until its stdin closes
        await asyncio.to_thread(sys.stdin.read)

try:
    asyncio.run(main())
finally:
    shutdown()
"""


class Deployment:
    """Workers, each in a directory of its own whose ``agent.toml`` names it in the ``X-Worker`` header, and
    clients, all on one workflow database and one model server."""

    def __init__(self, root: Path, db_url: str, model: OverlapModel) -> None:
        self.root = root
        self.db = db_url
        self.model = model
        self.workers: list[Worker] = []
        self.home = root / "home"
        self.home.mkdir(parents=True, exist_ok=True)

    def project(self, name: str) -> Project:
        project = Project(self.root / name, self.home)
        project.cwd.mkdir(parents=True, exist_ok=True)
        lines = [
            "[runtime]",
            'model = "openai-compatible:mock"',
            "[runtime.limits]",
            "request_timeout = 30",
            "[providers.openai-compatible]",
            f'base_url = "{self.model.base_url}"',
            f'headers = {{ X-Worker = "{name}" }}',
        ]
        (project.cwd / "agent.toml").write_text("\n".join(lines) + "\n")
        return project

    def worker(self, name: str, worker_id: str, concurrency: int = 2, *, wait: bool = True) -> Worker:
        """A ``tether worker`` started (and, with ``wait``, serving)."""
        args = ["--queue", "jobs", "--db", self.db, "--worker-id", worker_id, "--concurrency", str(concurrency)]
        worker = Worker(self.project(name), *args)
        self.workers.append(worker)
        if wait:
            worker.wait_for("serving queue 'jobs'")
        return worker

    def tether(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.project("cli").run(*args, "--db", self.db)

    def client(self, mode: str, *run_ids: str) -> str:
        completed = subprocess.run(
            [sys.executable, "-c", CLIENT, self.db, self.model.base_url, mode, *run_ids],
            cwd=self.project("client").cwd,
            env=self.project("client").env(PYTHONPATH=os.environ.get("PYTHONPATH", "")),
            capture_output=True,
            text=True,
            timeout=DEADLINE,
            check=False,
        )
        assert completed.returncode == 0, completed.stderr
        return completed.stdout


@pytest.fixture
def deployment(tmp_path: Path, db_url: str) -> Iterator[Deployment]:
    with OverlapModel() as model:
        made = Deployment(tmp_path, db_url, model)
        try:
            yield made
        finally:
            for worker in made.workers:
                worker.close()


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def ids(prefix: str, count: int) -> list[str]:
    return [f"{prefix}-{n}" for n in range(count)]


def test_three_workers_with_concurrency_2_never_run_more_than_2_each_with_a_client_enqueuing_and_one_restarted(
    deployment: Deployment,
) -> None:
    first, second = ids("early", 24), ids("late", 24)
    deployment.client("enqueue", *first)  # waiting before any worker starts: none may grab more than its 2
    workers = [deployment.worker(f"w{n}", f"worker-{n}", wait=False) for n in (1, 2, 3)]
    for worker in workers:
        worker.wait_for("serving queue 'jobs'")
    wait_until(lambda: len(deployment.model.asked) >= 8, "the workers to take runs")
    workers[2].process.send_signal(signal.SIGKILL)  # restarted mid-way: killed, and started again under its id
    workers[2].process.wait(DEADLINE)
    deployment.worker("w3-again", "worker-3")
    deployment.client("enqueue", *second)  # a client enqueuing on the queue while the workers serve it
    texts = json.loads(deployment.client("results", *first, *second))
    for worker in deployment.workers[:2] + deployment.workers[3:]:
        assert worker.stop() == 0, "".join(worker.lines)

    assert texts == {run_id: f"echo: prompt {run_id}" for run_id in first + second}
    model = deployment.model
    assert set(model.prompts()) == {f"prompt {run_id}" for run_id in first + second}
    assert {worker for worker, _ in model.asked} <= {"w1", "w2", "w3", "w3-again"}  # no client ran a run
    assert max(model.most.values()) <= 2, dict(model.most)
    assert model.most["w3-again"] >= 1, "the restarted worker took runs"


def test_a_queues_global_limits_declared_first_hold_over_the_workers_and_clients_that_declare_it_later(
    deployment: Deployment,
) -> None:
    first, second = ids("early", 8), ids("late", 8)
    deployment.client("declare", *first)  # makes the queue: 3 at once over all workers, 100 a minute
    workers = [deployment.worker(f"w{n}", f"worker-{n}", wait=False) for n in (1, 2)]  # each its own limit, 2
    for worker in workers:
        worker.wait_for("serving queue 'jobs'")
    deployment.client("enqueue", *second)  # declares Queue("jobs"): no limit of its own
    json.loads(deployment.client("results", *first, *second))
    shown = deployment.tether("runs", "queue", "jobs")
    for worker in workers:
        assert worker.stop() == 0, "".join(worker.lines)

    assert deployment.model.most_overall <= 3, "the global concurrency held across the two workers"
    assert max(deployment.model.most.values()) <= 2
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == "jobs: concurrency 3, rate 100/60s"  # neither workers nor client changed it


def test_a_run_cancelled_while_queued_and_resumed_goes_back_on_its_queue_and_only_a_worker_runs_it(
    deployment: Deployment,
) -> None:
    idle = subprocess.Popen(  # a plain client process, launched on the database the whole time
        [sys.executable, "-c", CLIENT, deployment.db, deployment.model.base_url, "idle"],
        cwd=deployment.project("idle").cwd,
        env=deployment.project("idle").env(PYTHONPATH=os.environ.get("PYTHONPATH", "")),
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deployment.client("enqueue", "later")
        cancelled = deployment.tether("runs", "cancel", "later")
        assert cancelled.stdout.strip() == "later: cancelled", cancelled.stderr
        resumed = deployment.tether("runs", "resume", "later")
        assert resumed.returncode == 0, resumed.stderr
        shown = deployment.tether("runs", "show", "later")
        assert "queue:       jobs" in shown.stdout, shown.stdout  # its own queue, not the engine's
        assert "status:      queued" in shown.stdout, shown.stdout
        worker = deployment.worker("w1", "worker-1")
        worker.wait_for("ended later: completed")
        assert worker.stop() == 0, "".join(worker.lines)
    finally:
        _, errors = idle.communicate("", timeout=DEADLINE)
    assert idle.returncode == 0, errors
    assert deployment.model.asked == [("w1", "prompt later")]  # asked once, by the worker


def test_runs_resume_refuses_a_bad_queue_name_in_one_line(deployment: Deployment) -> None:
    deployment.client("enqueue", "direct")
    resumed = deployment.tether("runs", "resume", "direct", "--queue", "no such")
    assert resumed.returncode == 1
    assert "queue name 'no such' must be" in resumed.stderr
    assert "Traceback" not in resumed.stderr


def test_tether_runs_queue_shows_and_changes_a_queues_limits(deployment: Deployment) -> None:
    nothing = deployment.tether("runs", "queue", "jobs")  # shown: the database must hold runs' tables
    assert nothing.returncode == 1
    assert "workflow database" in nothing.stderr, nothing.stderr
    made = deployment.tether("runs", "queue", "jobs", "--concurrency", "4")  # set before any worker: made
    assert made.stdout.strip() == "jobs: concurrency 4, rate none", made.stderr
    missing = deployment.tether("runs", "queue", "other")
    assert missing.returncode == 1
    assert "there is no queue 'other'" in missing.stderr
    rated = deployment.tether("runs", "queue", "jobs", "--rate", "10/2.5")  # the concurrency is kept
    assert rated.stdout.strip() == "jobs: concurrency 4, rate 10/2.5s", rated.stderr
    freed = deployment.tether("runs", "queue", "jobs", "--concurrency", "none")
    assert freed.stdout.strip() == "jobs: concurrency none, rate 10/2.5s", freed.stderr
    for bad in (["--concurrency", "0"], ["--rate", "ten/60"], ["--rate", "5"]):
        refused = deployment.tether("runs", "queue", "jobs", *bad)
        assert refused.returncode == 1, refused.stdout
        assert refused.stderr.startswith("error: "), refused.stderr
        assert "Traceback" not in refused.stderr
