"""``tether worker`` and ``tether runs`` as a user runs them: subprocesses on a SQLite file against the mock
model; the runs are enqueued by a helper subprocess through ``tether.durable``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import TETHER, Project
from tests.e2e.mock_llm import MockLLM, Say, Step

DEADLINE = 60.0

ENQUEUE = """
import asyncio, os, sys
from pathlib import Path
from tether.cli.build import load_setup
from tether.durable import DurableAgent, Queue, launch, shutdown

# the worker's agent (agent.toml's, as tether worker builds it): a run is taken by a worker of its deploy version
setup = load_setup(Path.cwd(), os.environ, {}, None)
durable = DurableAgent(setup.agent(interactive=False, durable=True), name="agent")
launch(sys.argv[1], worker_id="enqueuer")

async def main() -> None:
    for run_id, prompt in zip(sys.argv[2::2], sys.argv[3::2]):
        await durable.enqueue(prompt, queue=Queue("jobs"), workflow_id=run_id)

asyncio.run(main())
shutdown()
"""


def echo(body: dict[str, Any]) -> Step:
    content = body["messages"][-1]["content"]
    return Say(f"echo: {content}", pieces=1)


def enqueue(project: Project, db: Path, runs: dict[str, str]) -> None:
    args = [item for pair in runs.items() for item in pair]
    completed = subprocess.run(
        [sys.executable, "-c", ENQUEUE, str(db), *args],
        cwd=project.cwd,
        env=project.env(PYTHONPATH=os.environ.get("PYTHONPATH", "")),
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr


class Worker:
    """A ``tether worker`` subprocess whose stderr a thread reads line by line, so that a worker that stays
    silent fails the wait at its deadline instead of blocking the test on a read."""

    def __init__(self, project: Project, *args: str) -> None:
        self.process = subprocess.Popen(
            [TETHER, "worker", *args],
            cwd=project.cwd,
            env=project.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []
        self._read = threading.Condition()
        self._ended = False
        self._reader = threading.Thread(target=self._read_lines, daemon=True)
        self._reader.start()

    def _read_lines(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            with self._read:
                self.lines.append(line)
                self._read.notify_all()
        with self._read:
            self._ended = True
            self._read.notify_all()

    def wait_for(self, text: str) -> None:
        """Wait until a line holds ``text`` (the worker must not end first), at most ``DEADLINE`` seconds."""

        def seen() -> bool:
            return self._ended or any(text in line for line in self.lines)

        with self._read:
            self._read.wait_for(seen, DEADLINE)
            assert any(text in line for line in self.lines), (
                f"the worker ended before {text!r}: {self.lines}"
                if self._ended
                else f"no {text!r} within {DEADLINE} s: {self.lines}"
            )

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(DEADLINE)
        self._reader.join(DEADLINE)
        assert self.process.stderr is not None
        self.process.stderr.close()
        return code

    def close(self) -> None:
        """Killed if it still runs, its output read to the end and closed: nothing left behind by a test."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._reader.join(DEADLINE)
        if self.process.stderr is not None:
            self.process.stderr.close()


@pytest.fixture
def worker_of(project: Project) -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for one in started:
        one.close()


def runs(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    return project.run("runs", *args, "--db", "runs.sqlite")


def wait_status(project: Project, run_id: str, status: str) -> str:
    deadline = time.monotonic() + DEADLINE
    while True:
        shown = runs(project, "show", run_id)
        assert shown.returncode == 0, shown.stderr
        if f"status:      {status}" in shown.stdout:
            return shown.stdout
        assert time.monotonic() < deadline, shown.stdout
        time.sleep(0.1)


def test_a_worker_serves_enqueued_runs_and_runs_list_shows_them_finished(
    project: Project, worker_of: list[Worker]
) -> None:
    with MockLLM([echo] * 10) as server:
        project.use(server)
        db = project.cwd / "runs.sqlite"
        worker = Worker(project, "--queue", "jobs", "--db", "runs.sqlite", "--worker-id", "w1")
        worker_of.append(worker)
        worker.wait_for("serving queue 'jobs'")
        enqueue(project, db, {"run-a": "alpha", "run-b": "beta"})
        worker.wait_for("ended run-a: completed (complete)")
        worker.wait_for("ended run-b: completed (complete)")
        listed = runs(project, "list")
        assert worker.stop() == 0, "".join(worker.lines)

    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line.split() for line in listed.stdout.splitlines()[1:]}
    assert rows["run-a"][1:3] == ["completed", "agent"]
    assert rows["run-b"][-3:-1] == ["complete", "-"]
    [serving] = [line for line in worker.lines if "serving queue 'jobs'" in line]
    assert f"version {rows['run-b'][-1]})" in serving, "the enqueuer's agent is the worker's: one deploy version"
    assert any("took run-a: 'alpha'" in line for line in worker.lines)
    assert "worker w1 stopped" in worker.lines[-1]
    shown = runs(project, "show", "run-b")
    assert shown.returncode == 0, shown.stderr
    assert "queue:       jobs" in shown.stdout
    assert "worker:      w1" in shown.stdout
    assert shown.stdout.rstrip().endswith("echo: beta")
    assert runs(project, "list", "--status", "queued").stderr.strip() == "no runs"


def test_unknown_ids_are_a_clear_error_with_exit_1(project: Project) -> None:
    enqueue(project, project.cwd / "runs.sqlite", {})  # the database made, with no run in it
    for command in ("show", "cancel", "resume"):
        completed = runs(project, command, "nope")
        assert completed.returncode == 1, completed.stderr
        assert "there is no durable run with id 'nope'" in completed.stderr
        assert "Traceback" not in completed.stderr


def test_a_queued_run_cancelled_never_runs_and_resumed_it_does(project: Project, worker_of: list[Worker]) -> None:
    with MockLLM([echo] * 10) as server:
        project.use(server)
        enqueue(project, project.cwd / "runs.sqlite", {"later": "gamma"})
        cancelled = runs(project, "cancel", "later")
        assert cancelled.returncode == 0, cancelled.stderr
        assert cancelled.stdout.strip() == "later: cancelled"
        worker = Worker(project, "--queue", "jobs", "--db", "runs.sqlite")
        worker_of.append(worker)
        worker.wait_for("serving queue")
        resumed = runs(project, "resume", "later")
        assert resumed.returncode == 0, resumed.stderr
        worker.wait_for("ended later: completed")
        assert worker.stop() == 0, "".join(worker.lines)
        asked = [body["messages"][-1]["content"] for body in server.requests]

    assert asked == ["gamma"]
    assert wait_status(project, "later", "completed").rstrip().endswith("echo: gamma")


def test_a_bad_entry_point_is_a_configuration_error(project: Project) -> None:
    completed = project.run("worker", "--agent", "nosuchmodule:agent", "--db", "runs.sqlite")
    assert completed.returncode == 1
    assert "cannot import 'nosuchmodule'" in completed.stderr


def test_a_bad_db_is_a_configuration_error_in_one_line(project: Project) -> None:
    for args in (["runs", "list"], ["worker"]):
        completed = project.run(*args, "--db", "mysql://user:secret@host/db")
        assert completed.returncode == 1, completed.stderr
        assert "give a postgresql:// URL, a sqlite:/// URL or a SQLite file's path" in completed.stderr
        assert "secret" not in completed.stderr
        assert "Traceback" not in completed.stderr


def test_a_submitted_run_is_queued_then_a_worker_runs_it(project: Project, worker_of: list[Worker]) -> None:
    with MockLLM([echo] * 10) as server:
        project.use(server)
        submitted = runs(project, "submit", "delta", "--queue", "jobs")
        assert submitted.returncode == 0, submitted.stderr
        run_id = submitted.stdout.strip()
        assert run_id
        assert f"tether runs show {run_id}" in submitted.stderr
        queued = runs(project, "list", "--status", "queued")
        again = runs(project, "submit", "delta", "--queue", "jobs", "--id", run_id)  # the same run, not another
        worker = Worker(project, "--queue", "jobs", "--db", "runs.sqlite")
        worker_of.append(worker)
        worker.wait_for(f"ended {run_id}: completed")
        assert worker.stop() == 0, "".join(worker.lines)
        asked = [body["messages"][-1]["content"] for body in server.requests]

    assert queued.returncode == 0, queued.stderr
    (row,) = [line.split() for line in queued.stdout.splitlines()[1:]]
    assert row[:3] == [run_id, "queued", "agent"]
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == run_id
    assert asked == ["delta"], "submitted twice, run once"
    assert wait_status(project, run_id, "completed").rstrip().endswith("echo: delta")


def test_submit_refuses_an_empty_prompt_and_a_bad_db(project: Project) -> None:
    empty = runs(project, "submit", "  ")
    assert empty.returncode == 2, empty.stderr
    assert "the prompt is empty" in empty.stderr
    bad = project.run("runs", "submit", "hi", "--db", "mysql://user:secret@host/db")
    assert bad.returncode == 1, bad.stderr
    assert "give a postgresql:// URL" in bad.stderr
    assert "secret" not in bad.stderr
    assert "Traceback" not in bad.stderr
