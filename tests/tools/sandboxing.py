"""Helpers for the sandbox tests: whether bwrap works here, the host's view of processes, a loopback server.

Sandbox tests skip, with the reason, where bubblewrap cannot run; under ``CI=true`` they fail instead, since CI
installs it (``.ci/run``) and a skip there would hide a sandbox that no longer works.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path

import pytest

from tether.tools.sandbox import bwrap_problem

PROBLEM = bwrap_problem()
"""Why the default ``bwrap`` cannot sandbox here, or ``None``."""

_announced: list[str] = []


def require_bwrap(config: pytest.Config) -> None:
    """Skip (fail under ``CI=true``) when bubblewrap cannot sandbox on this machine, printing why once."""
    if PROBLEM is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must test the bash sandbox, but {PROBLEM}", pytrace=False)
    reason = f"no bash sandbox on this machine: {PROBLEM}"
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None and capture is not None and not _announced:
        _announced.append(reason)
        with capture.global_and_fixture_disabled():
            reporter.write_line(f"\nskipping the sandbox tests: {reason}", yellow=True)
    pytest.skip(reason)


def running_with(token: str) -> list[int]:
    """The host pids of running processes (zombies excluded) whose command line contains ``token``."""
    pids: list[int] = []
    needle = token.encode()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as file:
                cmdline = file.read()
            with open(f"/proc/{entry}/stat", "rb") as file:
                state = file.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if needle in cmdline and state not in (b"Z", b"X"):
            pids.append(int(entry))
    return pids


def own_command_line() -> str:
    """This process's command line, its arguments separated by spaces."""
    return Path("/proc/self/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()


def kill_all(pids: list[int]) -> None:
    """Clean up after a test that showed a process escaping (the unsandboxed controls)."""
    for pid in pids:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


async def first_line(fifo: Path) -> str:
    """The first line written to ``fifo``, read without blocking the loop (and without a sleep)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    pipe = os.fdopen(os.open(fifo, os.O_RDWR | os.O_NONBLOCK), "rb", buffering=0)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    try:
        return (await asyncio.wait_for(reader.readline(), 30)).decode().strip()
    finally:
        transport.close()


@asynccontextmanager
async def greeting_server() -> AsyncIterator[int]:
    """A TCP server on the host's 127.0.0.1 that says ``hello`` to whoever connects; yields its port."""

    async def greet(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"hello\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(greet, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()
