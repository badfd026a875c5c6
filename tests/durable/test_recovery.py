"""Durable runs survive ``kill -9``: real worker processes, a model over HTTP, SQLite and PostgreSQL.

A worker (``worker.py``) runs an agent that appends a line to a file, then either waits inside a tool or
gets a model answer that stalls mid-stream; the test kills it there with SIGKILL, and a new worker process
recovers the run. The finished tool is not run again (the file's lines), the finished model calls are not
made again (the server's request count), and the result equals an uninterrupted run's.
"""

from __future__ import annotations

import asyncio
import json
import os
import pickle
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import tether
from tests.e2e.mock_llm import Call, MockLLM, Responder, Say, Step
from tether.messages import ToolResult

WORKER = Path(__file__).with_name("worker.py")
WAIT = 90.0
"""Seconds a test waits for a worker before it fails."""


class Files:
    """The files of one worker run: the tool's log, the block file and its marker, the result."""

    def __init__(self, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.log, self.block, self.out = root / "log.txt", root / "block", root / "result.pickle"
        self.reached = Path(f"{self.block}.reached")

    def lines(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def result(self) -> Any:
        return pickle.loads(self.out.read_bytes())


def worker(
    db_url: str,
    server: MockLLM,
    files: Files,
    run_id: str,
    *,
    recover: bool = False,
    session: Path | None = None,
    more: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    """``worker.py`` on the run ``run_id``; ``more``: its further options (``--run-timeout S``)."""
    src = str(Path(tether.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    argv = [sys.executable, str(WORKER), db_url, server.base_url, str(files.log), str(files.block), run_id]
    argv += [str(files.out), *(["--recover"] if recover else []), *(["--session", str(session)] if session else [])]
    argv += more
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def finished(process: subprocess.Popen[bytes]) -> None:
    output, _ = process.communicate(timeout=WAIT)
    assert process.returncode == 0, output.decode(errors="replace")


def wait_until(condition: Callable[[], bool], what: str, process: subprocess.Popen[bytes]) -> None:
    """Poll ``condition`` until it holds; fails if the worker exits first or after ``WAIT`` seconds."""
    deadline = time.monotonic() + WAIT
    while not condition():
        if process.poll() is not None:
            output = process.stdout.read().decode(errors="replace") if process.stdout else ""
            raise AssertionError(f"the worker exited ({process.returncode}) before {what}:\n{output}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def kill(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=WAIT)
    assert process.returncode == -signal.SIGKILL


def uninterrupted(db_url: str, script: list[Step], files: Files) -> Any:
    """The result of the same run, not interrupted (its own server, run id and files)."""
    with MockLLM(list(script)) as server:
        finished(worker(db_url, server, files, "plain-run"))
    return files.result()


def test_a_run_killed_during_a_tool_call_is_recovered_without_redoing_what_had_finished(
    db_url: str, tmp_path: Path
) -> None:
    script: list[Step] = [Call("append", {"text": "one"}), Call("wait_here", {}), Say("all done")]
    files = Files(tmp_path / "killed")
    files.block.touch()
    with MockLLM(list(script)) as server:
        first = worker(db_url, server, files, "run-tool")
        wait_until(files.reached.exists, "the tool call started", first)
        kill(first)
        assert files.lines() == ["one"]
        assert len(server.requests) == 2
        files.block.unlink()  # the tool call, run again on recovery, now returns
        finished(worker(db_url, server, files, "run-tool", recover=True))
        assert files.lines() == ["one"]  # the finished tool call was not run again
        assert len(server.requests) == 3  # nor the two finished model calls made again
        recovered = files.result()
        finished(worker(db_url, server, files, "run-tool"))  # submitted again: the same run, not a new one
        assert len(server.requests) == 3
        assert files.result() == recovered
    expected = uninterrupted(db_url, script, Files(tmp_path / "plain"))
    assert recovered[:4] == expected[:4]
    assert recovered[0] == "all done"
    assert recovered[4] == "run-tool"


def test_a_run_killed_during_a_model_stream_is_recovered_without_redoing_what_had_finished(
    db_url: str, tmp_path: Path
) -> None:
    files = Files(tmp_path / "killed")
    script: list[Step] = [Call("append", {"text": "one"}), Say("all done", stall=True), Say("all done")]
    with MockLLM(list(script)) as server:
        first = worker(db_url, server, files, "run-stream")
        wait_until(server.stalled.is_set, "the model's answer started streaming", first)
        kill(first)
        server.release()
        assert len(server.requests) == 2
        finished(worker(db_url, server, files, "run-stream", recover=True))
        assert files.lines() == ["one"]
        assert len(server.requests) == 3  # the interrupted call was made again, the finished one was not
        recovered = files.result()
    expected = uninterrupted(db_url, [Call("append", {"text": "one"}), Say("all done")], Files(tmp_path / "plain"))
    assert recovered[:4] == expected[:4]
    assert recovered[1] == tether.StopReason.COMPLETE


def test_an_interrupted_call_of_a_tool_not_safe_to_repeat_is_answered_with_an_error_on_recovery(
    db_url: str, tmp_path: Path
) -> None:
    files = Files(tmp_path / "killed")
    files.block.touch()
    script: list[Step | Responder] = [Call("pay", {"amount": 5}), Say("I could not tell whether it was paid.")]
    with MockLLM(script) as server:
        first = worker(db_url, server, files, "run-pay")
        wait_until(files.reached.exists, "the payment started", first)
        kill(first)
        files.block.unlink()
        finished(worker(db_url, server, files, "run-pay", recover=True))
        assert files.lines() == ["paid 5"]  # not paid twice
        text, _, messages, _, _ = files.result()
        answer = messages[-2].parts[0]
        assert isinstance(answer, ToolResult)
        assert answer.is_error
        assert "may or may not have happened" in answer.content
        assert "may or may not have happened" in json.dumps(server.messages(1))  # the model was told
        assert text == "I could not tell whether it was paid."


def test_a_run_in_a_session_killed_mid_way_is_recovered_and_the_session_holds_its_transcript_once(
    db_url: str, tmp_path: Path
) -> None:
    """Loading the session and saving it are steps: the recovered run does not load the session its first
    execution had already saved a turn to (which would repeat the prompt and that turn)."""
    from tether.sessions import SQLiteSessionStore

    store = tmp_path / "sessions.sqlite"
    script: list[Step] = [Call("append", {"text": "one"}), Call("wait_here", {}), Say("all done")]
    files = Files(tmp_path / "killed")
    files.block.touch()
    with MockLLM(list(script)) as server:
        first = worker(db_url, server, files, "run-session", session=store)
        wait_until(files.reached.exists, "the tool call started", first)
        kill(first)
        saved = asyncio.run(SQLiteSessionStore(store).load("s1"))
        assert [m.role for m in saved.messages] == ["user", "assistant", "tool"]  # the first turn was saved
        files.block.unlink()
        finished(worker(db_url, server, files, "run-session", recover=True, session=store))
        assert files.lines() == ["one"]
        assert len(server.requests) == 3
    text, _, messages, _, _ = files.result()
    assert text == "all done"
    session = asyncio.run(SQLiteSessionStore(store).load("s1"))
    assert session.messages == messages
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
