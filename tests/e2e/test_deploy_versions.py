"""The deploy version is the agent's identity, as an operator meets it: ``tether worker`` and ``tether runs
submit`` as subprocesses on one SQLite file, each with a Python agent (``--agent module:agent``).

A run submitted with a changed agent (other instructions) is of another version: the worker of the old agent
never takes it, the submitter and the worker say so on stderr, and ``tether runs list`` shows both versions; a
run of the worker's own agent is taken as before; a worker of the new agent (the next deploy) takes the waiting
run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.conftest import Project
from tests.e2e.test_worker import Worker, runs

AGENT = """
from tether import Agent
from tether.providers.scripted import ScriptedProvider, reply

agent = Agent(ScriptedProvider([reply("done")] * 10), system={system!r})
"""


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for one in started:
        if one.process.poll() is None:
            one.process.kill()
            one.process.wait()


def versions_listed(project: Project) -> dict[str, tuple[str, str]]:
    """Each run's status and version, as ``tether runs list`` shows them."""
    listed = runs(project, "list")
    assert listed.returncode == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()[1:]]
    return {row[0]: (row[1], row[-1]) for row in rows}


def version_of(worker: Worker) -> str:
    [serving] = [line for line in worker.lines if "serving queue" in line]
    return serving.split("version ")[1].split(")")[0]


def submit(project: Project, module: str, run_id: str) -> str:
    """Submit a run with the agent ``module`` names; what ``tether runs submit`` said on stderr."""
    submitted = runs(project, "submit", f"prompt of {run_id}", "--queue", "jobs", "--agent", module, "--id", run_id)
    assert submitted.returncode == 0, submitted.stderr
    return submitted.stderr


def test_a_run_of_a_changed_agent_waits_for_a_worker_of_its_version_and_says_so(
    project: Project, workers: list[Worker]
) -> None:
    Path(project.cwd / "old.py").write_text(AGENT.format(system="Answer briefly."))
    Path(project.cwd / "new.py").write_text(AGENT.format(system="Answer briefly, in French."))
    old = Worker(project, "--agent", "old:agent", "--queue", "jobs", "--db", "runs.sqlite", "--worker-id", "old-1")
    workers.append(old)
    old.wait_for("serving queue 'jobs'")

    assert "warning" not in submit(project, "old:agent", "same")
    old.wait_for("ended same: completed")
    said = submit(project, "new:agent", "changed")
    old.wait_for("warning: queued run changed is of version")
    listed = versions_listed(project)
    assert f"lately taken from 'jobs' are of version {version_of(old)}, not this run's {listed['changed'][1]}" in said
    assert listed["same"] == ("completed", version_of(old))
    assert listed["changed"][0] == "queued", "the old agent's worker never takes the changed agent's run"
    assert listed["changed"][1] != version_of(old)
    [warning] = [line for line in old.lines if "queued run changed" in line]
    assert f"of version {listed['changed'][1]}, not this worker's {version_of(old)}" in warning

    new = Worker(project, "--agent", "new:agent", "--queue", "jobs", "--db", "runs.sqlite", "--worker-id", "new-1")
    workers.append(new)
    new.wait_for("ended changed: completed")
    assert version_of(new) == listed["changed"][1]
    assert old.stop() == 0
    assert new.stop() == 0
    assert not any("took changed" in line for line in old.lines)
