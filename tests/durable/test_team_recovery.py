"""A durable run whose agent runs another agent as a tool survives ``kill -9`` inside the sub-agent's tool call.

The boss's model calls the helper agent (``agent.as_tool()``); the helper appends a line to a file, then waits
inside a tool, where the test kills the worker with SIGKILL. A new worker recovers the run: the helper's
finished tool call is not run again (the file's lines) and neither the boss's nor the helper's finished model
calls are made again (the mock server's request count): they were steps of the boss's workflow.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import tether
from tests.durable.test_recovery import Files, finished, kill, wait_until
from tests.e2e.mock_llm import Call, MockLLM, Say, Step

WORKER = Path(__file__).with_name("team_worker.py")


def team_worker(
    db_url: str, server: MockLLM, files: Files, run_id: str, *, recover: bool = False
) -> subprocess.Popen[bytes]:
    src = str(Path(tether.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    argv = [sys.executable, str(WORKER), db_url, server.base_url, str(files.log), str(files.block), run_id]
    argv += [str(files.out), *(["--recover"] if recover else [])]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def test_a_run_killed_inside_its_sub_agents_tool_call_recovers_without_repeating_the_sub_agents_steps(
    db_url: str, tmp_path: Path
) -> None:
    script: list[Step] = [
        Call("helper", {"input": "append one, then wait"}),  # the boss
        Call("append", {"text": "one"}),  # the helper
        Call("wait_here", {}),  # the helper: killed in this call
        Say("helper done"),  # the helper, after the recovery
        Say("all done"),  # the boss
    ]
    files = Files(tmp_path / "killed")
    files.block.touch()
    with MockLLM(list(script)) as server:
        first = team_worker(db_url, server, files, "team-run")
        wait_until(files.reached.exists, "the helper's tool call started", first)
        kill(first)
        assert files.lines() == ["one"]
        assert len(server.requests) == 3
        files.block.unlink()  # the interrupted call, run again on recovery, now returns
        finished(team_worker(db_url, server, files, "team-run", recover=True))
        assert files.lines() == ["one"]  # the helper's finished tool call was not run again
        assert len(server.requests) == 5  # nor any finished model call, the boss's or the helper's
        text, stop, messages, usage, run_id, records = files.result()
    assert (text, stop, run_id) == ("all done", tether.StopReason.COMPLETE, "team-run")
    helper_answer = messages[2].tool_results[0]
    assert (helper_answer.content, helper_answer.is_error) == ("helper done", False)
    assert usage.requests == 5  # the helper's three calls counted in the boss's usage
    assert [record.text for record in records[0].tool_calls[0].turn_records] == ["", "", "helper done"]
