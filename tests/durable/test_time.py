"""A durable run's time survives ``kill -9``: its deadline counts from the run's first start, not from its recovery.

Real worker processes (``worker.py``), a model over HTTP, SQLite and PostgreSQL. The run's start is kept in the
workflow (the step ``run:started``), so a run recovered after its deadline stops at once with a valid
transcript; without it the recovered run got a fresh ``run_timeout`` and went on calling the model.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import sqlalchemy.exc
from dbos import DBOSClient

import tether
from tests.durable.test_recovery import Files, finished, kill, wait_until, worker
from tests.e2e.mock_llm import Call, Fail, MockLLM, Say, Step
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


RETRY_AFTER = 5.0
"""The ``Retry-After`` the model server answers the first request with, in seconds."""


def test_a_retry_wait_is_a_durable_sleep_that_a_run_recovered_mid_way_waits_out(db_url: str, tmp_path: Path) -> None:
    """The model call's step ends at the 429; the run sleeps durably (``DBOS.sleep``, its wake-up time kept) and
    tries again as a new step. Killed in the wait, the recovered run waits what is left instead of asking the
    model again at once (which the rate limit forbids)."""
    arrived: list[float] = []

    def limited(body: dict[str, Any]) -> Step:
        arrived.append(time.time())
        return Fail(429, {"error": {"message": "slow down"}}, {"Retry-After": str(RETRY_AFTER)})

    def answer(body: dict[str, Any]) -> Step:
        arrived.append(time.time())
        return Say("all done")

    files = Files(tmp_path / "limited")
    with MockLLM([limited, answer]) as server:
        first = worker(db_url, server, files, "run-limited")
        wait_until(lambda: _sleeping(db_url, "run-limited"), "the retry's wait started", first)
        kill(first)
        assert len(server.requests) == 1
        finished(worker(db_url, server, files, "run-limited", recover=True))
        assert len(server.requests) == 2
    assert arrived[1] - arrived[0] >= RETRY_AFTER  # the second attempt waited the whole Retry-After
    assert arrived[1] >= _woken(db_url, "run-limited")  # not before the wake-up time the first process kept
    text, stop, _, usage, _ = files.result()
    assert (text, stop) == ("all done", tether.StopReason.COMPLETE)
    steps = _steps(db_url, "run-limited")
    assert [name for name in steps if name.startswith("model:")] == ["model:1.1", "model:1.1~1"]
    assert usage.requests == 1


def _steps(db_url: str, run_id: str) -> list[str]:
    """The names of the run's steps kept so far; none before the worker has made the database's tables."""
    client = DBOSClient(system_database_url=db_url)
    try:
        steps = client.list_workflow_steps(run_id, load_output=False)
    except sqlalchemy.exc.DBAPIError:
        return []
    finally:
        client.destroy()
    return [step["function_name"] for step in steps]


def _woken(db_url: str, run_id: str) -> float:
    """The wake-up time (epoch seconds) kept for the durable wait after the run's first model call."""
    client = DBOSClient(system_database_url=db_url)
    try:
        steps = client.list_workflow_steps(run_id)
    finally:
        client.destroy()
    names = [step["function_name"] for step in steps]
    after = names.index("model:1.1")
    wait = next(step for step in steps[after:] if step["function_name"] == "DBOS.sleep")
    woken = wait["output"]
    assert isinstance(woken, float)
    return woken


def _sleeping(db_url: str, run_id: str) -> bool:
    """The run's first model call failed and its durable wait began (a ``DBOS.sleep`` kept after it)."""
    steps = _steps(db_url, run_id)
    return "model:1.1" in steps and "DBOS.sleep" in steps[steps.index("model:1.1") :]
