"""The ``bash`` tool with real subprocesses: exit codes, stdout and stderr, the output cap, the timeout and
cancellation killing the whole process group (a grandchild included, checked by its pid once the tool has
returned), the allowlisted environment, the working directory, and what the model receives through the loop.

These run the command unsandboxed (``sandbox="off"``), so that the process-group machinery itself is what is
tested and host pids can be written to files outside the workspace; ``test_sandbox.py`` tests the sandbox."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tether import Agent
from tether.errors import ToolError, ToolTimeout
from tether.providers.scripted import ScriptedProvider, call, reply
from tether.tools.base import Tool
from tether.tools.shell import MASK_MARGIN, TOOL_ACCESS, HeadTail
from tether.tools.shell import bash_tool as sandboxable_bash_tool
from tether.tools.workspace import Workspace

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process states are read from /proc")


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    (tmp_path / "ws").mkdir()
    return Workspace(tmp_path / "ws")


def bash_tool(workspace: Workspace, **options: object) -> Tool:
    """The bash tool with the sandbox off (see the module docstring)."""
    return sandboxable_bash_tool(workspace, sandbox="off", **options)  # type: ignore[arg-type]


def alive(pid: int) -> bool:
    """Whether ``pid`` is a running process; a zombie (dead, waiting to be reaped) is not."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            state = file.read().rsplit(b")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in (b"Z", b"X")


async def first_line(fifo: Path) -> str:
    """The first line a command writes to ``fifo``; waits without blocking the loop (and without a sleep)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    pipe = os.fdopen(os.open(fifo, os.O_RDWR | os.O_NONBLOCK), "rb", buffering=0)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    try:
        return (await asyncio.wait_for(reader.readline(), 30)).decode().strip()
    finally:
        transport.close()


async def bash(ws: Workspace, command: str, **options: float | int) -> str:
    timeout = options.pop("call_timeout", None)
    tool = bash_tool(ws, **options)
    result: str = await tool.function(command=command, timeout=timeout)
    return result


# --- results ---------------------------------------------------------------------------------------------------


async def test_the_exit_code_is_reported_and_a_failure_is_a_normal_result(ws: Workspace) -> None:
    assert await bash(ws, "exit 3") == "exit code 3\n(no output)"
    assert await bash(ws, "true") == "exit code 0\n(no output)"


async def test_a_command_that_never_ran_fails_the_call(ws: Workspace) -> None:
    (ws.root / "hello.txt").write_text("hello world\n")  # a small model's bash(command='hello.txt')
    with pytest.raises(ToolError, match=r"could not run \(exit code 127: command not found\)") as found:
        await bash(ws, "hello.txt")
    assert found.value.code == "tool_failed"
    with pytest.raises(ToolError, match=r"exit code 126: not executable"):
        await bash(ws, "./hello.txt")
    assert await bash(ws, "exit 125") == "exit code 125\n(no output)", "other failures stay normal results"


async def test_stdout_and_stderr_are_captured_separately(ws: Workspace) -> None:
    out = await bash(ws, "echo out; echo err >&2; echo more")
    assert out == "exit code 0\n--- stdout ---\nout\nmore\n--- stderr ---\nerr"


async def test_a_command_killed_by_a_signal_says_which(ws: Workspace) -> None:
    assert (await bash(ws, "kill -KILL $$")).startswith("killed by signal SIGKILL")


async def test_output_over_the_cap_keeps_the_head_and_the_tail(ws: Workspace) -> None:
    data = "".join(f"{n}\n" for n in range(1, 20001))
    out = await bash(ws, "seq 1 20000", max_output_bytes=200)
    head, tail = data[:100], data[-100:]
    assert head.endswith("\n3"), "cut inside a line: the marker goes on its own line"
    assert tail.startswith("984\n19985\n")
    assert out == (
        f"exit code 0\n--- stdout ---\n{head}\n[... {len(data) - 200} bytes elided ...]\n{tail.removesuffix(chr(10))}"
    )


@given(chunks=st.lists(st.binary(max_size=50), max_size=20), limit=st.integers(2, 64))
def test_head_tail_keeps_the_exact_start_and_end_and_counts_the_middle(chunks: list[bytes], limit: int) -> None:
    buffer = HeadTail(limit)
    for chunk in chunks:
        buffer.feed(chunk)
    data = b"".join(chunks)
    assert len(buffer.head) == min(len(data), buffer.head_limit + MASK_MARGIN), "the head keeps a margin for masking"
    assert len(buffer.tail) == min(len(data), buffer.tail_limit + MASK_MARGIN), "so does the tail, head included"
    assert data.startswith(bytes(buffer.head))
    assert data.endswith(bytes(buffer.tail))
    assert buffer.elided == max(0, len(data) - limit)
    assert ("bytes elided" in buffer.text()) == (len(data) > limit)
    if len(data) <= limit:
        assert buffer.text() == data.decode("utf-8", "replace")


async def test_stdin_is_empty_so_a_reader_does_not_hang(ws: Workspace) -> None:
    assert await bash(ws, "cat; echo after") == "exit code 0\n--- stdout ---\nafter"


async def test_the_command_runs_in_the_workspace_root(ws: Workspace) -> None:
    out = await bash(ws, "pwd -P; echo made > made.txt")
    assert out == f"exit code 0\n--- stdout ---\n{ws.root}"
    assert (ws.root / "made.txt").read_text() == "made\n"


async def test_an_empty_command_is_an_error(ws: Workspace) -> None:
    with pytest.raises(ToolError, match="empty"):
        await bash(ws, "   ")


# --- timeout and cancellation kill the whole group -------------------------------------------------------------


async def test_the_timeout_kills_the_command_and_the_grandchild_it_started(ws: Workspace, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    command = f"sleep 300 & echo $$ $! > {pids}; echo started; wait"
    with pytest.raises(ToolTimeout, match="did not finish within 2 s") as caught:
        await bash(ws, command, timeout=2)
    assert caught.value.code == "tool_timeout"
    assert "--- stdout ---\nstarted" in caught.value.message, "the output until then is kept"
    shell, grandchild = map(int, pids.read_text().split())
    assert not alive(grandchild), "the grandchild sleep survived the timeout"
    assert not alive(shell)


async def test_a_grandchild_that_ignores_sigterm_is_killed_after_the_grace_period(
    ws: Workspace, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    command = f"trap '' TERM; sleep 300 & echo $! > {pids}; wait"
    with pytest.raises(ToolTimeout):
        await bash(ws, command, timeout=2, kill_grace=0.2)
    assert not alive(int(pids.read_text()))


async def test_the_model_cannot_ask_for_more_than_max_timeout(ws: Workspace) -> None:
    with pytest.raises(ToolTimeout, match="within 1 s"):
        await bash(ws, "sleep 300", max_timeout=1, call_timeout=1000)


async def test_cancelling_the_awaiting_task_kills_the_group_before_the_cancellation_completes(
    ws: Workspace, tmp_path: Path
) -> None:
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    task = asyncio.create_task(bash(ws, f"sleep 300 & echo $$ $! > {fifo}; wait"))
    shell, grandchild = map(int, (await first_line(fifo)).split())
    assert alive(grandchild)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not alive(grandchild), "the grandchild survived the cancellation"
    assert not alive(shell)


async def test_background_jobs_are_stopped_when_the_command_ends(ws: Workspace, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    out = await bash(ws, f"sleep 300 & echo $! > {pids}; echo launched")
    assert out == "exit code 0\n--- stdout ---\nlaunched"
    assert not alive(int(pids.read_text()))


def test_the_executor_timeout_is_only_a_backstop_above_the_tools_own(ws: Workspace) -> None:
    tool = bash_tool(ws, timeout=10, max_timeout=30, kill_grace=1)
    assert tool.timeout is not None
    assert tool.timeout > 30 + 2 * 1
    assert tool.is_async
    assert TOOL_ACCESS == {"bash": "write"}


# --- environment -----------------------------------------------------------------------------------------------


async def test_only_allowlisted_and_passed_variables_reach_the_command(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "SERVICE_TOKEN", "DB_PASSWORD", "SIGNING_KEY", "PLAIN_SETTING"):
        monkeypatch.setenv(name, "sk-hidden")
    monkeypatch.setenv("DATABASE_URL", "postgres://user:sk-hidden@db/app")
    monkeypatch.setenv("CI_DEPLOY_TOKEN", "allowed-token")
    monkeypatch.setenv("LC_TIME", "C")
    tool = bash_tool(ws, pass_env=["CI_DEPLOY_TOKEN"], env={"ADDED": "yes"})
    out = await tool.function(command="env")
    names = {line.split("=", 1)[0]: line.split("=", 1)[1] for line in out.splitlines() if "=" in line}
    assert "sk-hidden" not in out
    assert names["CI_DEPLOY_TOKEN"] == "allowed-token"
    assert names["ADDED"] == "yes"
    assert names["LC_TIME"] == "C"
    assert names["PATH"] == os.environ["PATH"]
    assert names["HOME"] == os.environ["HOME"], "unsandboxed, HOME stays the user's"


async def test_the_allowlist_can_be_switched_off(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-visible")
    out = await bash_tool(ws, scrub_env=False).function(command='echo "$OPENAI_API_KEY"')
    assert out.endswith("sk-visible")


# --- through the loop: what the model receives ---------------------------------------------------------------


async def test_a_timeout_reaches_the_model_as_a_tool_timeout_result_and_the_run_goes_on(
    ws: Workspace, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    model = ScriptedProvider([call("bash", {"command": f"sleep 300 & echo $! > {pids}; wait"}), reply("gave up")])
    result = await Agent(model, tools=[bash_tool(ws, timeout=2)]).run("run it")
    (timed_out,) = result.messages[2].tool_results
    assert timed_out.is_error
    assert timed_out.code == "tool_timeout"
    assert "did not finish within 2 s" in timed_out.content
    assert result.text == "gave up"
    assert not alive(int(pids.read_text()))


async def test_cancelling_the_run_kills_the_commands_process_group(ws: Workspace, tmp_path: Path) -> None:
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    model = ScriptedProvider([call("bash", {"command": f"sleep 300 & echo $! > {fifo}; wait"})])
    handle = Agent(model, tools=[bash_tool(ws)]).start("run it")
    grandchild = int(await first_line(fifo))
    handle.cancel()
    result = await handle
    assert result.stop_reason == "cancelled"
    assert result.messages[-1].tool_results[0].code == "cancelled"
    assert not alive(grandchild)
