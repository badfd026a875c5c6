"""What ``tether worker`` reports of the runs it holds: a run it took and finished in the second it started in
is its own, though the store keeps that run's time in whole seconds (SQLite)."""

from __future__ import annotations

import math

import pytest

from tether.cli.worker import ended_before
from tether.durable.records import RunRecord


def record(updated_at: float) -> RunRecord:
    return RunRecord("r1", "completed", "agent", "jobs", updated_at - 5, updated_at, "hello")


def test_a_run_ended_in_the_second_the_worker_started_in_is_reported() -> None:
    started = 1_795_855_643.4  # the worker starts 0.4 s into a second; the run ends at .7, stored as .0
    assert not ended_before(record(math.floor(started)), started)


def test_a_run_that_ended_a_whole_second_before_the_worker_started_is_not_reported() -> None:
    started = 1_795_855_643.4
    assert ended_before(record(math.floor(started) - 1), started)
    assert not ended_before(record(started + 3), started)


def test_a_paused_run_is_reported_once_as_paused_and_never_as_ended(capsys: pytest.CaptureFixture[str]) -> None:
    from tether.cli.worker import _paused
    from tether.paused import PendingCall

    call = PendingCall.of("c1", "refund", {"order": "1042"}, "needs approval", "approval")
    paused = RunRecord("r1", "paused", "agent", "jobs", 1.0, 2.0, "hello", pending=(call,))
    waiting: set[str] = set()
    assert _paused(paused, waiting)
    assert _paused(paused, waiting), "a paused run is under way: never reported as ended"
    assert capsys.readouterr().err == "paused r1: waits for decisions on c1 (refund) (tether runs pending)\n"
    assert not _paused(record(3.0), waiting), "once it goes on, it is reported as any run"
    assert waiting == set()
