"""Paused durable runs with real worker processes, the mock model server and the real command line.

Fifty runs pause on a call that needs approval, on PostgreSQL, with a worker whose limit is 8: all fifty reach
``paused``, so a run waiting for its decision holds no place of the worker's. The worker is SIGKILLed and a new
one takes its runs up; each waits again where it was. Approvals given with ``tether runs approve`` then end every
run, and each approved call ran exactly once (the tool appends a line per call to a log), no model call made
twice. On SQLite and PostgreSQL, the approval timeout rejects the call and the run ends with the model's answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import tether
from tests.e2e.mock_llm import Call, MockLLM, Say, Step

WORKER = Path(__file__).with_name("pause_worker.py")
RUNS = 50
LIMIT = 8
WAIT = 240.0


def answer(body: dict[str, Any]) -> Step:
    """The model: ``charge(n, "a")``, then ``done N: <what the call's result said>``."""
    messages = body["messages"]
    n = int(next(m for m in messages if m["role"] == "user")["content"].split()[-1])
    results = [m["content"] for m in messages if m["role"] == "tool"]
    if not results:
        return Call("charge", {"n": n, "item": "a"})
    return Say(f"done {n}: {results[-1]}")


def environment() -> dict[str, str]:
    src = str(Path(tether.__file__).resolve().parents[1])
    root = str(Path(__file__).resolve().parents[2])
    return {**os.environ, "PYTHONPATH": os.pathsep.join([src, root, os.environ.get("PYTHONPATH", "")])}


def process(mode: str, db_url: str, server: MockLLM, log: Path, arg: str, *extra: str) -> subprocess.Popen[bytes]:
    argv = [sys.executable, str(WORKER), mode, db_url, server.base_url, str(log), arg, *extra]
    return subprocess.Popen(argv, env=environment(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def output_of(child: subprocess.Popen[bytes]) -> str:
    output, _ = child.communicate(timeout=WAIT)
    text = output.decode(errors="replace")
    assert child.returncode == 0, text
    return text


def wait_until(condition: Callable[[], bool], what: str, workers: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        for child in workers:
            if child.poll() is not None:
                output = child.stdout.read().decode(errors="replace") if child.stdout else ""
                raise AssertionError(f"a worker exited ({child.returncode}) before {what}:\n{output}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def charges(log: Path) -> Counter[int]:
    """How many times the charge of each run ran (one line per call the tool made)."""
    lines = log.read_text().splitlines() if log.exists() else []
    return Counter(int(line.split()[1]) for line in lines)


def paused(db_url: str) -> dict[str, Any]:
    """The paused runs, by id, read without the engine."""
    from tether.durable.store import read_runs

    where = {"path": Path(db_url.removeprefix("sqlite://"))} if db_url.startswith("sqlite:") else {"url": db_url}
    return {record.run_id: record for record in read_runs(**where, status="paused", limit=2 * RUNS)}


def approve(db_url: str, run_id: str, call_id: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "tether", "runs", "approve", run_id, call_id, "--db", db_url]
    return subprocess.run(argv, env=environment(), capture_output=True, text=True, timeout=WAIT, check=False)


def test_fifty_runs_pause_past_the_worker_limit_survive_its_kill_and_end_once_approved(
    postgres_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "charges.txt"
    with MockLLM([answer] * (3 * RUNS + 20)) as server:
        a = process("serve", postgres_url, server, log, "worker-a", "--concurrency", str(LIMIT))
        b: subprocess.Popen[bytes] | None = None
        try:
            output_of(process("enqueue", postgres_url, server, log, str(RUNS)))
            wait_until(lambda: len(paused(postgres_url)) == RUNS, f"all {RUNS} runs paused", [a])
            assert {record.worker for record in paused(postgres_url).values()} == {"worker-a"}
            a.kill()
            a.communicate(timeout=WAIT)
            b = process("serve", postgres_url, server, log, "worker-b", "--concurrency", str(LIMIT))
            wait_until(
                lambda: (
                    {r.worker for r in paused(postgres_url).values()} == {"worker-b"}
                    and len(paused(postgres_url)) == RUNS
                ),
                "worker b waiting on every run again",
                [b],
            )
            waiting = paused(postgres_url)
            assert all(len(record.pending) == 1 for record in waiting.values())
            assert not charges(log), "no call that needs approval ran before its approval"
            with ThreadPoolExecutor(4) as pool:
                done = list(pool.map(lambda r: approve(postgres_url, r.run_id, r.pending[0].id), waiting.values()))
            assert all(one.returncode == 0 for one in done), [one.stderr for one in done if one.returncode]
            ended = json.loads(output_of(process("collect", postgres_url, server, log, str(RUNS))))
        finally:
            for child in (a, b):
                if child is not None and child.poll() is None:
                    child.terminate()
        assert b is not None
        output_of(b)
        asked = Counter(
            (next(m for m in body["messages"] if m["role"] == "user")["content"], len(body["messages"]))
            for body in server.requests
        )
    assert {run: (one["stop"], one["text"]) for run, one in ended.items()} == {
        f"run-{n}": ("complete", f"done {n}: charged a") for n in range(RUNS)
    }
    assert charges(log) == Counter(range(RUNS)), "each approved call ran exactly once"
    assert max(asked.values()) == 1, "no model call was made twice, across the kill and the recovery"


def test_a_pause_that_times_out_rejects_the_call_and_the_run_ends_with_the_models_answer(
    db_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "charges.txt"
    with MockLLM([answer] * 10) as server:
        worker = process("serve", db_url, server, log, "worker-t", "--approval-timeout", "1")
        try:
            output_of(process("enqueue", db_url, server, log, "1", "--approval-timeout", "1"))
            ended = json.loads(output_of(process("collect", db_url, server, log, "1", "--approval-timeout", "1")))
        finally:
            worker.terminate()
        output_of(worker)
    assert ended["run-0"]["stop"] == "complete"
    assert ended["run-0"]["text"] == "done 0: no one approved this call in time"
    assert not charges(log), "the call no one approved never ran"


def test_a_worker_stopped_with_sigterm_does_not_wait_for_its_paused_run_which_another_finishes(tmp_path: Path) -> None:
    db_url, log = f"sqlite:///{tmp_path / 'runs.sqlite'}", tmp_path / "charges.txt"
    with MockLLM([answer] * 10) as server:
        a = process("serve", db_url, server, log, "worker-a", "--grace", "3600")
        b: subprocess.Popen[bytes] | None = None
        try:
            output_of(process("enqueue", db_url, server, log, "1"))
            wait_until(lambda: len(paused(db_url)) == 1, "the run paused", [a])
            a.terminate()
            output_of(a)  # within the wait, not after its hour of grace: a paused run is not under way
            b = process("serve", db_url, server, log, "worker-b")
            wait_until(lambda: {r.worker for r in paused(db_url).values()} == {"worker-b"}, "b took the run", [b])
            (record,) = paused(db_url).values()
            approved = approve(db_url, record.run_id, record.pending[0].id)
            assert approved.returncode == 0, approved.stderr
            ended = json.loads(output_of(process("collect", db_url, server, log, "1")))
        finally:
            for child in (a, b):
                if child is not None and child.poll() is None:
                    child.terminate()
        assert b is not None
        output_of(b)
    assert ended["run-0"]["text"] == "done 0: charged a"
    assert charges(log) == Counter({0: 1})
