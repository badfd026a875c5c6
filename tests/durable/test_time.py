"""A durable run's time survives ``kill -9``: its deadline counts from the run's first start, not from its recovery.

Real worker processes (``worker.py``), a model over HTTP, SQLite and PostgreSQL. The run's start is kept in the
workflow (the step ``run:started``), so a run recovered after its deadline stops at once with a valid
transcript; without it the recovered run got a fresh ``run_timeout`` and went on calling the model.
"""

from __future__ import annotations

import time
from pathlib import Path

import tether
from tests.durable.test_recovery import Files, finished, kill, wait_until, worker
from tests.e2e.mock_llm import Call, MockLLM, Say, Step
from tether.messages import transcript_problems

DEADLINE = 2.0
"""The deadline the recovering process gives the run, in seconds; the test lets it pass before recovering."""


def test_a_run_recovered_after_its_deadline_stops_at_once_with_run_timeout(db_url: str, tmp_path: Path) -> None:
    script: list[Step] = [Call("append", {"text": "one"}), Call("wait_here", {}), Say("all done")]
    files = Files(tmp_path / "late")
    files.block.touch()
    with MockLLM(list(script)) as server:
        first = worker(db_url, server, files, "run-late", more=["--run-timeout", "600"])
        wait_until(files.reached.exists, "the tool call started", first)
        kill(first)
        time.sleep(DEADLINE)  # the run started at least DEADLINE seconds ago: its deadline has passed
        files.block.unlink()  # the tool call, run again, would return at once and the model would answer
        recovering = worker(db_url, server, files, "run-late", recover=True, more=["--run-timeout", str(DEADLINE)])
        finished(recovering)
        assert len(server.requests) == 2  # no model call was made after the deadline
    text, stop, messages, _, run_id = files.result()
    assert (stop, run_id) == (tether.StopReason.TIMEOUT, "run-late")
    assert text != "all done"
    assert transcript_problems(messages) == []
    assert files.lines() == ["one"]
