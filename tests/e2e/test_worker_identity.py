"""Workers and batches that cannot steal live runs, as an operator runs them: ``tether worker`` and ``tether
batch`` subprocesses on one host and one SQLite file, the mock model server, a tool not safe to repeat.

Each test reproduces a way a live process's runs were taken over: a worker restarted on the host of a live
sibling (they shared the default id ``worker-<host>``), a worker given a live one's id, ``tether runs resume``
and ``tether runs recover`` of a live worker's run, a second batch on the database of one under way.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.conftest import TETHER, Project
from tests.e2e.mock_llm import Call, MockLLM, Say, Step
from tests.e2e.test_worker import DEADLINE, Worker, runs

AGENT = """
import os, time
from pathlib import Path
from tether import Agent, tool

HERE = Path(__file__).parent

@tool(idempotent=False)
def charge(n: int) -> str:
    \"\"\"Charge for run n (not safe to repeat).\"\"\"
    with open(HERE / "charges.log", "a") as log:
        log.write(f"charge {n} {os.getpid()}\\n")
    while not (HERE / "release").exists():
        time.sleep(0.05)
    return "charged"

agent = Agent("openai-compatible:mock", base_url=BASE_URL, api_key="test-key", tools=[charge])
"""


@pytest.fixture
def worker_of() -> Iterator[list[Worker]]:
    """The workers a test starts, killed after it if it left them running."""
    started: list[Worker] = []
    yield started
    for one in started:
        one.close()


def answer(body: dict[str, Any]) -> Step:
    """``charge`` once, then ``done N``."""
    messages = body["messages"]
    n = int(next(m for m in messages if m["role"] == "user")["content"].split()[-1])
    if not any(m["role"] == "tool" for m in messages):
        return Call("charge", {"n": n})
    return Say(f"done {n}", pieces=1)


def charges(project: Project) -> list[tuple[int, int]]:
    path = project.cwd / "charges.log"
    lines = path.read_text().splitlines() if path.exists() else []
    return [(int(n), int(pid)) for _, n, pid in (line.split() for line in lines)]


def wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {DEADLINE} s"
        time.sleep(0.05)


def serving_id(worker: Worker) -> str:
    (line,) = [line for line in worker.lines if "serving queue" in line]
    found = re.match(r"worker (\S+) serving", line)
    assert found is not None, line
    return found.group(1)


def test_workers_on_one_host_never_take_a_live_siblings_run_nor_its_id(
    project: Project, worker_of: list[Worker]
) -> None:
    with MockLLM([answer] * 10) as server:
        (project.cwd / "hang_agent.py").write_text(AGENT.replace("BASE_URL", repr(server.base_url)))
        args = ("--queue", "jobs", "--db", "runs.sqlite", "--agent", "hang_agent:agent")
        a = Worker(project, *args)
        worker_of.append(a)
        a.wait_for("serving queue")
        submitted = runs(project, "submit", "run 1", "--queue", "jobs", "--id", "r1", "--agent", "hang_agent:agent")
        assert submitted.returncode == 0, submitted.stderr
        wait_for(lambda: charges(project), "charge by worker a")
        b = Worker(project, *args)  # a sibling on the same host, then restarted as documented
        worker_of.append(b)
        b.wait_for("serving queue")
        assert b.stop() == 0, "".join(b.lines)
        again = Worker(project, *args)
        worker_of.append(again)
        again.wait_for("serving queue")
        a_id = serving_id(a)
        assert len({a_id, serving_id(b), serving_id(again)}) == 3, "each worker has an id of its own"

        taken = project.run("worker", *args, "--worker-id", a_id)  # a live worker's id
        resumed = runs(project, "resume", "r1")
        recovered = runs(project, "recover", a_id)
        listed = runs(project, "list")
        (project.cwd / "release").touch()
        a.wait_for("ended r1: completed")
        for worker in (a, again):
            assert worker.stop() == 0, "".join(worker.lines)
        asked = [len(body["messages"]) for body in server.requests]

    assert taken.returncode == 1, taken.stderr
    assert f"worker id '{a_id}' is held by a live process" in taken.stderr
    assert resumed.returncode == 1, resumed.stderr
    assert f"the run 'r1' is running in the live process '{a_id}'" in resumed.stderr
    assert recovered.returncode == 1, recovered.stderr
    assert f"worker '{a_id}' is alive" in recovered.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith("r1 "))
    assert row.split()[:5] == ["r1", "running", "agent", a_id, "alive"]
    assert charges(project) == [(1, a.process.pid)], "charged once, by the worker that took the run"
    assert len(asked) == 2, "the model asked once for the charge and once after it, never again"
    assert not any("took r1" in line for line in b.lines + again.lines)


def stall_a(body: dict[str, Any]) -> Step:
    """The first batch's prompts (``a ...``) stall until released; the second's answer at once."""
    prompt = next(m for m in body["messages"] if m["role"] == "user")["content"]
    return Say(f"done {prompt}", pieces=1, stall=prompt.startswith("a "))


def test_a_second_batch_on_the_database_never_takes_the_first_ones_runs_under_way(project: Project) -> None:
    with MockLLM([stall_a] * 10) as server:
        project.use(server)
        (project.cwd / "a.jsonl").write_text('"a 1"\n"a 2"\n')
        (project.cwd / "b.jsonl").write_text('"b 1"\n')
        first = subprocess.Popen(
            [TETHER, "batch", "a.jsonl", "-o", "a.out", "--db", "runs.sqlite"],
            cwd=project.cwd,
            env=project.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            server.wait_for_requests(2)  # both of a's runs under way, stalled in their model call
            second = project.run("batch", "b.jsonl", "-o", "b.out", "--db", "runs.sqlite")
            listed = runs(project, "list")
            server.release()
            _, first_err = first.communicate(timeout=DEADLINE)
        finally:
            if first.poll() is None:
                first.kill()
                first.communicate()
        asked = Counter(next(m for m in b["messages"] if m["role"] == "user")["content"] for b in server.requests)

    assert second.returncode == 0, second.stderr
    assert first.returncode == 0, first_err
    assert asked == Counter({"a 1": 1, "a 2": 1, "b 1": 1}), "no prompt asked twice"
    assert sorted(json.loads(line)["text"] for line in (project.cwd / "a.out").read_text().splitlines()) == [
        "done a 1",
        "done a 2",
    ]
    assert "done b 1" in (project.cwd / "b.out").read_text()
    workers = {line.split()[3] for line in listed.stdout.splitlines()[1:]}
    assert len(workers) == 2, "each batch under an id of its own"
    assert all(worker.startswith("batch-") for worker in workers)


def test_a_batch_killed_and_started_again_finishes_the_runs_it_left(project: Project) -> None:
    with MockLLM([stall_a] * 10) as server:
        project.use(server)
        (project.cwd / "a.jsonl").write_text('"a 1"\n')
        first = subprocess.Popen(
            [TETHER, "batch", "a.jsonl", "-o", "a.out", "--db", "runs.sqlite"],
            cwd=project.cwd,
            env=project.env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        server.wait_for_requests(1)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(DEADLINE)
        server.release()
        again = project.run("batch", "a.jsonl", "-o", "a.out", "--db", "runs.sqlite")

    assert again.returncode == 0, again.stderr
    assert "left running by batch-" in again.stderr, again.stderr
    assert "done a 1" in (project.cwd / "a.out").read_text()


def test_a_worker_killed_is_found_dead_by_a_live_one_which_finishes_its_run(
    project: Project, worker_of: list[Worker]
) -> None:
    with MockLLM([answer] * 10) as server:
        (project.cwd / "hang_agent.py").write_text(AGENT.replace("BASE_URL", repr(server.base_url)))
        args = ("--queue", "jobs", "--db", "runs.sqlite", "--agent", "hang_agent:agent", "--dead-after", "2")
        a = Worker(project, *args, "--concurrency", "1")
        worker_of.append(a)
        a.wait_for("serving queue")
        submitted = runs(project, "submit", "run 1", "--queue", "jobs", "--id", "r1", "--agent", "hang_agent:agent")
        assert submitted.returncode == 0, submitted.stderr
        wait_for(lambda: charges(project), "charge by worker a")
        b = Worker(project, *args)
        worker_of.append(b)
        b.wait_for("serving queue")
        a.process.kill()
        a.process.wait(DEADLINE)
        b.wait_for(f"recovered the runs of the dead worker {serving_id(a)}: ['r1']")
        b.wait_for("ended r1: completed")
        assert b.stop() == 0, "".join(b.lines)
        listed = runs(project, "list")
        interrupted = [body for body in server.requests if "interrupted" in str(body["messages"][-1])]

    assert charges(project) == [(1, a.process.pid)], "the charge cut by the kill was not made again"
    assert len(interrupted) == 1, "it was answered as interrupted"
    row = next(line for line in listed.stdout.splitlines() if line.startswith("r1 "))
    assert row.split()[:5] == ["r1", "completed", "agent", serving_id(b), "stopped"]
