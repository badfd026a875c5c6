"""What an operator does to durable runs, with the real command: a mistyped ``--db`` refused, a running run
cancelled and then refused a resume (each saying why), the worker column, ``tether worker --grace``, and the
durable engine's log records kept off stderr. Subprocesses on a SQLite file (and PostgreSQL for ``--db``)
against the mock model; the worker runs a Python agent whose tool waits for a file."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Project
from tests.e2e.mock_llm import Call, MockLLM, Say
from tests.e2e.test_worker import DEADLINE, Worker, runs, wait_status
from tests.postgres import fresh_database, require_postgres, run_sql

AGENT = """
import asyncio
from pathlib import Path
from tether import Agent, tool

@tool
async def wait_for(name: str) -> str:
    \"\"\"Wait until the file NAME exists.\"\"\"
    Path(name + ".reached").write_text("reached")
    while not Path(name).exists():
        await asyncio.sleep(0.02)
    return "released"

agent = Agent("openai-compatible:mock", base_url={base_url!r}, api_key="test-key", tools=[wait_for])
"""


@pytest.fixture
def worker_of(project: Project) -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for one in started:
        one.close()


def with_agent(project: Project, server: MockLLM) -> None:
    (project.cwd / "ops_agent.py").write_text(AGENT.format(base_url=server.base_url))


def submit(project: Project, run_id: str, queue: str = "jobs") -> subprocess.CompletedProcess[str]:
    prompt = f"prompt of {run_id}"
    return runs(project, "submit", prompt, "--queue", queue, "--id", run_id, "--agent", "ops_agent:agent")


def wait_for_file(path: Path, worker: Worker) -> None:
    import time

    deadline = time.monotonic() + DEADLINE
    while not path.exists():
        assert worker.process.poll() is None, "".join(worker.lines)
        assert time.monotonic() < deadline, f"no {path} within {DEADLINE} s: {''.join(worker.lines)}"
        time.sleep(0.02)


COMMANDS = (("list",), ("show", "x"), ("cancel", "x"), ("resume", "x"), ("prune", "--older-than", "1d"))


def test_a_sqlite_file_that_does_not_exist_is_refused_and_never_made(project: Project) -> None:
    for command in COMMANDS:
        completed = project.run("runs", *command, "--db", "typo.sqlite")
        assert completed.returncode == 1, (command, completed.stderr)
        assert "typo.sqlite: no such workflow database" in completed.stderr, command
        assert "Traceback" not in completed.stderr
        assert not (project.cwd / "typo.sqlite").exists(), command
    (project.cwd / "notes.sqlite").write_bytes(b"")  # a file, but not a workflow database
    completed = project.run("runs", "list", "--db", "notes.sqlite")
    assert completed.returncode == 1
    assert "notes.sqlite: not a workflow database" in completed.stderr


def test_a_postgresql_database_that_does_not_exist_or_holds_no_runs_is_refused_and_left_alone(
    project: Project, request: pytest.FixtureRequest
) -> None:
    require_postgres(request.config, "tether runs on PostgreSQL")
    with fresh_database(request.config, "tether_ops", "tether runs on PostgreSQL") as url:
        missing = url + "_typo"
        for command in COMMANDS:
            completed = project.run("runs", *command, "--db", missing)
            assert completed.returncode == 1, (command, completed.stderr)
            assert f"database '{missing.rsplit('/', 1)[1]}': no such PostgreSQL database" in completed.stderr
            assert "Traceback" not in completed.stderr
        assert run_sql("SELECT 1 FROM pg_database WHERE datname = %s", (missing.rsplit("/", 1)[1],)) == []
        for command in COMMANDS:
            completed = project.run("runs", *command, "--db", url)
            assert completed.returncode == 1, (command, completed.stderr)
            assert "not a workflow database" in completed.stderr, command
        import psycopg

        with psycopg.connect(url) as connection:
            schemas = connection.execute("SELECT 1 FROM pg_namespace WHERE nspname = 'dbos'").fetchall()
        assert schemas == [], "no command made the engine's tables in it"


def test_a_running_run_cancelled_says_so_and_then_cannot_be_resumed_saying_why(
    project: Project, worker_of: list[Worker]
) -> None:
    with MockLLM([Call("wait_for", {"name": "release"}), Say("after the wait")]) as server:
        with_agent(project, server)
        worker = Worker(project, "--agent", "ops_agent:agent", "--queue", "jobs", "--db", "runs.sqlite",
                        "--worker-id", "w-ops")  # fmt: skip
        worker_of.append(worker)
        worker.wait_for("serving queue 'jobs'")
        assert submit(project, "slow").returncode == 0
        wait_for_file(project.cwd / "release.reached", worker)
        listed = runs(project, "list")
        cancelled = runs(project, "cancel", "slow")
        (project.cwd / "release").touch()
        worker.wait_for("ended slow: cancelled")
        resumed = runs(project, "resume", "slow")
        assert worker.stop() == 0, "".join(worker.lines)
        asked = len(server.requests)

    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.splitlines()[0].split(), listed.stdout.splitlines()[1].split()
    assert header[:4] == ["ID", "STATUS", "AGENT", "WORKER"]
    assert row[:4] == ["slow", "running", "agent", "w-ops"]
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout.strip() == "slow: cancel requested; the run stops before its next model call"
    assert resumed.returncode == 1, resumed.stdout
    assert "slow cannot be resumed: it ended with a cancelled result" in resumed.stderr
    assert asked == 1, "the model call after the tool was never made"
    assert "stop reason: cancelled" in wait_status(project, "slow", "cancelled")


def test_a_worker_gives_its_runs_the_grace_it_is_told_then_leaves_them_to_recovery(
    project: Project, worker_of: list[Worker]
) -> None:
    with MockLLM([Call("wait_for", {"name": "release"}), Say("after the wait")]) as server:
        with_agent(project, server)
        worker = Worker(project, "--agent", "ops_agent:agent", "--queue", "jobs", "--db", "runs.sqlite",
                        "--worker-id", "w-grace", "--grace", "0")  # fmt: skip
        worker_of.append(worker)
        worker.wait_for("serving queue 'jobs'")
        assert submit(project, "held").returncode == 0
        wait_for_file(project.cwd / "release.reached", worker)
        assert worker.stop() == 0, "".join(worker.lines)  # with the tool still waiting: no grace given
        assert not (project.cwd / "release").exists()
        assert "worker w-grace stopped" in worker.lines[-1]
        shown = runs(project, "show", "held")
        (project.cwd / "release").touch()
        again = Worker(project, "--agent", "ops_agent:agent", "--queue", "jobs", "--db", "runs.sqlite",
                       "--worker-id", "w-grace")  # fmt: skip
        worker_of.append(again)
        again.wait_for("ended held: completed (complete)")
        assert again.stop() == 0

    assert "status:      running" in shown.stdout
    assert "worker:      w-grace" in shown.stdout
    bad = project.run("worker", "--grace", "-1", "--db", "runs.sqlite")
    assert bad.returncode == 2, bad.stderr


def test_the_engines_own_warnings_stay_off_stderr(project: Project) -> None:
    with MockLLM([]) as server:
        with_agent(project, server)
        first = submit(project, "twice", queue="jobs")
        second = submit(project, "twice", queue="other")  # the engine warns: the run stays on its queue

    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "twice"
    assert [line for line in second.stderr.splitlines() if not line.startswith("queued on")] == []


def test_runs_show_reads_the_store_without_the_engine(project: Project) -> None:
    with MockLLM([]) as server:
        with_agent(project, server)
        assert submit(project, "waiting").returncode == 0
    script = (
        "import sys\nfrom tether.cli.app import main\n"
        "try:\n    main(['runs', 'show', 'waiting', '--db', 'runs.sqlite'], prog_name='tether')\n"
        "except SystemExit as done:\n    assert not done.code, done.code\n"
        "print('dbos loaded' if 'dbos' in sys.modules else 'dbos not loaded', file=sys.stderr)\n"
    )
    before = (project.cwd / "runs.sqlite").stat().st_mtime_ns
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=project.cwd, env=project.env(), capture_output=True, text=True,
        timeout=DEADLINE,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "status:      queued" in done.stdout
    assert "steps:       none yet" in done.stdout
    assert done.stderr.strip().endswith("dbos not loaded")
    assert (project.cwd / "runs.sqlite").stat().st_mtime_ns == before, "reading wrote nothing"
