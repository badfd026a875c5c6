"""Stdio MCP servers end with the block that started them: on exit, on cancellation, and when the host dies."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.mcp.conftest import HERE, alive, apoll, has_marker, poll, py_server, read_line, reaped, server_pids
from tether.tools.mcp import MCPTools

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX process groups and signals")


async def test_the_server_is_started_through_the_guard_and_both_end_with_the_block() -> None:
    async with MCPTools([py_server()]) as mcp:
        server, guard = await server_pids(mcp)
        assert guard != os.getpid(), "the server runs under the guard, not straight under the host"
        assert alive(server)
        assert alive(guard)
    await apoll(lambda: not alive(server) and not alive(guard), "the server and its guard to end")


async def test_a_cancelled_block_still_closes_its_servers(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    entered = asyncio.Event()
    pids: list[int] = []

    async def hold() -> None:
        async with MCPTools([py_server(log=log)]) as mcp:
            pids.extend(await server_pids(mcp))
            entered.set()
            wait = mcp.get("wait_for_release")
            assert wait is not None
            await wait({})  # never released: the block is cancelled in the middle of this call

    task = asyncio.create_task(hold())
    await entered.wait()
    await apoll(lambda: has_marker(log, "waiting"), "the call to reach the server")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await apoll(lambda: not any(map(alive, pids)), "the server and its guard to end")


async def test_a_server_cancelled_twice_while_closing_still_ends() -> None:
    closing = asyncio.Event()

    async def hold() -> None:
        mcp = MCPTools([py_server()])
        async with mcp:
            pids.extend(await server_pids(mcp))
            try:
                await asyncio.Event().wait()
            finally:
                closing.set()

    pids: list[int] = []
    task = asyncio.create_task(hold())
    await apoll(lambda: len(pids) == 2, "the server to start")
    task.cancel()
    await closing.wait()
    task.cancel()  # a second cancellation lands in the middle of the shutdown
    with pytest.raises(asyncio.CancelledError):
        await task
    await apoll(lambda: not any(map(alive, pids)), "the server and its guard to end")


async def test_a_stuck_server_is_killed_on_exit(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    async with MCPTools([py_server(log=log)]) as mcp:
        pids = await server_pids(mcp)
        stuck = mcp.get("stuck")
        assert stuck is not None
        call = asyncio.create_task(stuck({}))
        await apoll(lambda: has_marker(log, "stuck"), "the server to be stuck")
        call.cancel()
    server, guard = pids
    # Past the SDK's grace periods the guard is killed; on a slow machine the SDK may stop waiting for the
    # event loop to see it die, so the test waits for the reap itself, then lets the loop take the exit.
    await apoll(lambda: not alive(server) and reaped(guard), "the stuck server and its guard to end")
    await asyncio.sleep(0)


def test_a_host_killed_with_sigkill_leaves_no_orphan(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    host = subprocess.Popen([sys.executable, str(HERE / "host.py"), str(log)], stdout=subprocess.PIPE, text=True)
    try:
        pids = json.loads(read_line(host, "the host"))
        poll(lambda: has_marker(log, "stuck"), "the server to be stuck in a call")
        assert alive(pids["pid"])
        os.kill(host.pid, signal.SIGKILL)
        host.wait(timeout=30)
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
        assert host.stdout is not None
        host.stdout.close()
    poll(lambda: not alive(pids["pid"]), "the stuck server to end after its host was killed")
    poll(lambda: not alive(pids["ppid"]), "the guard to end after its host was killed")
