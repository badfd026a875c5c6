"""Two worker processes share one PostgreSQL queue: the concurrency limit holds, no run runs twice, and when
one worker is killed (SIGKILL) with runs under way, the other finishes them.

200 runs are enqueued on a queue allowing 4 runs at once (3 per worker). Each run calls the tool ``begin``
(which logs ``start``), then ``finish`` (which logs ``end``), then answers. Worker ``a`` blocks in ``finish``
for runs numbered 60 and up, so it ends up with its 3 runs stuck there; the test then kills it, puts its runs
back on the queue (``recover_worker``; ``b`` does it too on its own, its heartbeat finding ``a`` gone), and
worker ``b`` finishes everything. The log's start/end lines give
the runs under way at every moment; the model server's request count shows no model call made twice.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tether
from tests.e2e.mock_llm import Call, MockLLM, Responder, Say, Step

WORKER = Path(__file__).with_name("queue_worker.py")
WAIT = 180.0
"""Seconds the test waits for the workers before it fails."""
RUNS = 200
LIMIT = 4


def answer(body: dict[str, Any]) -> Step:
    """The model: ``begin``, then ``finish``, then ``done N`` (N from the prompt ``run N``)."""
    messages = body["messages"]
    n = int(next(m for m in messages if m["role"] == "user")["content"].split()[-1])
    tools = sum(1 for m in messages if m["role"] == "tool")
    if tools == 0:
        return Call("begin", {"n": n})
    if tools == 1:
        return Call("finish", {"n": n})
    return Say(f"done {n}")


def process(mode: str, db_url: str, server: MockLLM, log: Path, arg: str, *extra: str) -> subprocess.Popen[bytes]:
    src = str(Path(tether.__file__).resolve().parents[1])
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, root, os.environ.get("PYTHONPATH", "")])}
    argv = [sys.executable, str(WORKER), mode, db_url, server.base_url, str(log), arg, *extra]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def output_of(child: subprocess.Popen[bytes]) -> str:
    output, _ = child.communicate(timeout=WAIT)
    text = output.decode(errors="replace")
    assert child.returncode == 0, text
    return text


def events(log: Path) -> list[tuple[str, int, int]]:
    lines = log.read_text().splitlines() if log.exists() else []
    return [(kind, int(n), int(pid)) for kind, n, pid in (line.split() for line in lines)]


def wait_until(condition: Callable[[], bool], what: str, workers: list[subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        for child in workers:
            if child.poll() is not None:
                output = child.stdout.read().decode(errors="replace") if child.stdout else ""
                raise AssertionError(f"a worker exited ({child.returncode}) before {what}:\n{output}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def most_at_once(log: list[tuple[str, int, int]]) -> int:
    """The most runs under way at once: a run is under way from its ``start`` line to its ``end`` line."""
    under_way: set[int] = set()
    most = 0
    for kind, n, _ in log:
        if kind == "start":
            under_way.add(n)
            most = max(most, len(under_way))
        elif kind == "end":
            under_way.discard(n)
    return most


def test_two_workers_share_a_queue_within_its_limit_and_one_finishes_the_runs_of_the_other_killed(
    postgres_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "log.txt"
    script: list[Step | Responder] = [answer] * (3 * RUNS + 50)
    with MockLLM(script) as server:
        output_of(process("enqueue", postgres_url, server, log, str(RUNS)))
        a = process("serve", postgres_url, server, log, "worker-a", "--block-from", "60")
        b = process("serve", postgres_url, server, log, "worker-b")
        try:

            def a_is_stuck() -> bool:
                return sum(1 for kind, _, pid in events(log) if kind == "blocked" and pid == a.pid) == 3

            wait_until(a_is_stuck, "worker a had 3 runs stuck in a tool", [a, b])
            a.send_signal(signal.SIGKILL)
            a.communicate(timeout=WAIT)
            assert a.returncode == -signal.SIGKILL
            stuck = sorted(n for kind, n, pid in events(log) if kind == "blocked")
            recovered = json.loads(output_of(process("recover", postgres_url, server, log, "worker-a")))
            # b, seeing a's process gone from this host, may have put some back already (liveness)
            assert set(recovered) <= {f"run-{n}" for n in stuck}

            def all_ended() -> bool:
                return sum(1 for kind, _, _ in events(log) if kind == "end") >= RUNS

            wait_until(all_ended, f"{RUNS} runs ended", [b])
            texts = json.loads(output_of(process("collect", postgres_url, server, log, str(RUNS))))
        finally:
            for child in (a, b):
                if child.poll() is None:
                    child.send_signal(signal.SIGTERM)
        output_of(b)  # SIGTERM: the worker stops taking runs and exits cleanly
        assert texts == {f"run-{n}": f"done {n}" for n in range(RUNS)}
        assert len(server.requests) == 3 * RUNS  # no model call was made twice
    log_events = events(log)
    starts = Counter(n for kind, n, _ in log_events if kind == "start")
    ends = Counter(n for kind, n, _ in log_events if kind == "end")
    assert starts == ends == Counter(range(RUNS))  # every run began once and finished once
    assert {pid for kind, _, pid in log_events if kind == "start"} == {a.pid, b.pid}  # both workers took runs
    assert {pid for kind, n, pid in log_events if kind == "end" and n in stuck} == {b.pid}
    assert 1 < most_at_once(log_events) <= LIMIT


def test_a_worker_stopped_by_sigterm_exits_and_the_next_worker_with_its_id_finishes_its_run(
    postgres_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "log.txt"
    with MockLLM([answer] * 10) as server:
        output_of(process("enqueue", postgres_url, server, log, "1"))
        first = process("serve", postgres_url, server, log, "worker-a", "--block-from", "0")
        wait_until(lambda: any(kind == "blocked" for kind, _, _ in events(log)), "the run reached its tool", [first])
        first.send_signal(signal.SIGTERM)
        output_of(first)  # it stops although its run is stuck in a tool: the run stays where it is
        again = process("serve", postgres_url, server, log, "worker-a")
        try:
            wait_until(lambda: any(kind == "end" for kind, _, _ in events(log)), "the run ended", [again])
            texts = json.loads(output_of(process("collect", postgres_url, server, log, "1")))
        finally:
            again.send_signal(signal.SIGTERM)
        output_of(again)
        assert texts == {"run-0": "done 0"}
        assert len(server.requests) == 3  # the finished model calls were not made again
    assert [(kind, pid) for kind, _, pid in events(log)] == [
        ("start", first.pid),  # the finished tool call was not run again
        ("blocked", first.pid),
        ("end", again.pid),  # the interrupted one was
    ]
