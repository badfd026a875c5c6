"""A worker SIGKILLed mid-run and never restarted: a live worker finds it dead by its heartbeat and finishes its
runs, on SQLite and on PostgreSQL, with real processes and the mock model server.

Worker ``a`` runs as if on another machine (its heartbeat names another host, so that only its lease, not its
pid, tells it is dead). It takes two runs and hangs in their ``charge`` tool (``idempotent=False``); worker
``b`` takes the other two. ``a`` is killed. Within ``a``'s lease (2 s) plus a run's time, ``b`` claims ``a``
and puts its runs back on the queue, and finishes them: the interrupted charges are answered as interrupted,
never made again, and nothing else is asked of the model twice.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import tether
from tests.durable.test_queue_workers import events, output_of, wait_until
from tests.e2e.mock_llm import Call, MockLLM, Responder, Say, Step

WORKER = Path(__file__).with_name("live_worker.py")
RUNS = 4


def answer(body: dict[str, Any]) -> Step:
    """The model: ``charge`` once, then ``done N`` (N from the prompt ``run N``)."""
    messages = body["messages"]
    n = int(next(m for m in messages if m["role"] == "user")["content"].split()[-1])
    if not any(m["role"] == "tool" for m in messages):
        return Call("charge", {"n": n})
    return Say(f"done {n}")


def process(mode: str, db_url: str, server: MockLLM, log: Path, arg: str, *extra: str) -> subprocess.Popen[bytes]:
    src = str(Path(tether.__file__).resolve().parents[1])
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, root, os.environ.get("PYTHONPATH", "")])}
    argv = [sys.executable, str(WORKER), mode, db_url, server.base_url, str(log), arg, *extra]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def charges(log: Path) -> list[tuple[int, int]]:
    return [(n, pid) for kind, n, pid in events(log) if kind == "charge"]


def test_a_worker_killed_and_never_restarted_has_its_runs_finished_by_a_live_one(db_url: str, tmp_path: Path) -> None:
    log = tmp_path / "log.txt"
    script: list[Step | Responder] = [answer] * (2 * RUNS + 10)
    with MockLLM(script) as server:
        a = process("serve", db_url, server, log, "worker-a", "--hang", "--dead-after", "2", "--host", "elsewhere")
        b: subprocess.Popen[bytes] | None = None
        try:
            output_of(process("enqueue", db_url, server, log, "2"))
            wait_until(lambda: len(charges(log)) == 2, "worker a hanging in two charges", [a])
            b = process("serve", db_url, server, log, "worker-b", "--dead-after", "2")
            output_of(process("enqueue", db_url, server, log, str(RUNS)))  # run-2, run-3 for b; 0, 1 exist
            wait_until(lambda: len(charges(log)) == RUNS, "worker b charging the other two", [a, b])
            a.send_signal(signal.SIGKILL)
            a.communicate(timeout=60)
            ended = json.loads(output_of(process("collect", db_url, server, log, str(RUNS))))
        finally:
            for child in (a, b):
                if child is not None and child.poll() is None:
                    child.send_signal(signal.SIGTERM)
        assert b is not None
        output_of(b)
        asked = Counter(
            (next(m for m in body["messages"] if m["role"] == "user")["content"], len(body["messages"]))
            for body in server.requests
        )
        interrupted = [
            body["messages"][-1]["content"]
            for body in server.requests
            if body["messages"][-1]["role"] == "tool" and "interrupted" in body["messages"][-1]["content"]
        ]
    hung = {n for n, pid in charges(log) if pid == a.pid}
    assert ended == {f"run-{n}": [f"done {n}", "worker-b"] for n in range(RUNS)}  # b ended every run
    assert Counter(n for n, _ in charges(log)) == Counter(range(RUNS)), "each charge made once, none again"
    assert len(hung) == 2
    assert len(interrupted) == 2, "a's two charges, cut by the kill, were answered as interrupted"
    assert max(asked.values()) == 1, f"no model call made twice: {asked}"
