"""Real MCP servers for the tests: ours (``server.py``, over stdio and HTTP) and two from npm.

The npm servers are pinned in ``package.json`` and ``package-lock.json`` here; the first test that needs
them runs ``npm ci`` when ``node_modules`` is missing. Without node and npm those tests are skipped.
"""

from __future__ import annotations

import asyncio
import json
import os
import selectors
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tether.tools.mcp import MCPServerConfig, MCPTools

HERE = Path(__file__).resolve().parent
SERVER = HERE / "server.py"
POLL_SECONDS = 10.0
"""The bound on every poll: generous, since a poll ends as soon as its condition holds."""


def py_server(
    server_id: str = "py",
    *,
    log: Path | None = None,
    legacy: bool = False,
    env: dict[str, str] | None = None,
    **options: Any,
) -> MCPServerConfig:
    """Our test server over stdio; ``log`` collects the requests it receives."""
    args = [str(SERVER), "stdio", *(["--legacy"] if legacy else [])]
    variables = {**({"MCP_TEST_LOG": str(log)} if log else {}), **(env or {})}
    return MCPServerConfig(server_id, command=sys.executable, args=args, env=variables, **options)


async def server_pids(mcp: MCPTools) -> tuple[int, int]:
    """The server's pid and its parent's (the guard tether starts it through)."""
    pids = mcp.get("pids")
    assert pids is not None
    found = json.loads(await pids({}))
    return found["pid"], found["ppid"]


def logged(log: Path) -> list[dict[str, Any]]:
    """What the server wrote to its log: requests (``method``, ``params``) and markers."""
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def calls_seen(log: Path) -> list[dict[str, Any]]:
    """The ``tools/call`` requests the server received: their name and arguments."""
    requests = [entry["params"] for entry in logged(log) if entry.get("method") == "tools/call"]
    return [{"name": params["name"], "arguments": params.get("arguments")} for params in requests]


def has_marker(log: Path, marker: str) -> bool:
    return any(entry.get("marker") == marker for entry in logged(log))


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie, dead but not yet reaped, counts as gone)."""
    if sys.platform.startswith("linux"):
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except (FileNotFoundError, ProcessLookupError):  # gone, or reaped while its stat file was being read
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def reaped(pid: int) -> bool:
    """Whether a child of this process is reaped and the event loop has been told (or is about to be).

    asyncio's child watcher reaps a subprocess in a ``waitpid-N`` thread, then queues the exit for the loop;
    a test whose loop closes before that closes nothing, and Python reports the subprocess transport as a
    ResourceWarning. Once this holds, one turn of the loop (``await asyncio.sleep(0)``) delivers the exit.
    """
    gone = not Path(f"/proc/{pid}").exists() if sys.platform.startswith("linux") else not alive(pid)
    return gone and not any(thread.name.startswith("waitpid-") for thread in threading.enumerate())


def poll(condition: Callable[[], bool], what: str) -> None:
    """Wait, a bounded time, until ``condition()`` holds."""
    deadline = time.monotonic() + POLL_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.01)


async def apoll(condition: Callable[[], bool], what: str) -> None:
    """``poll`` for async tests: the event loop keeps running while it waits."""
    deadline = time.monotonic() + POLL_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        await asyncio.sleep(0.01)


def read_line(process: subprocess.Popen[str], what: str) -> str:
    """The next line the process prints, waiting a bounded time for it."""
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout=60):
            pytest.fail(f"{what} printed nothing")
    line = process.stdout.readline()
    if not line:
        pytest.fail(f"{what} exited with {process.wait()} before printing anything")
    return line.strip()


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """Our test server over streamable HTTP on 127.0.0.1: (its URL, its request log)."""
    log = tmp_path / "http.jsonl"
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "http"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "MCP_TEST_LOG": str(log)},
    )
    try:
        line = read_line(process, "the HTTP test server")
        assert line.startswith("PORT "), line
        yield f"http://127.0.0.1:{line.split()[1]}/mcp", log
    finally:
        process.terminate()
        process.wait(timeout=30)
        assert process.stdout is not None
        process.stdout.close()


@pytest.fixture(scope="session")
def node_modules() -> Path:
    """The npm servers of ``package-lock.json``, installed with ``npm ci`` unless they are there already."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("the npm MCP servers need node and npm")
    modules = HERE / "node_modules"
    if not all((modules / ".bin" / name).exists() for name in ("mcp-server-everything", "mcp-server-filesystem")):
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=HERE, check=True, timeout=600)
    return modules


def everything(modules: Path, server_id: str = "everything", **options: Any) -> MCPServerConfig:
    """``@modelcontextprotocol/server-everything`` over stdio."""
    script = str(modules / ".bin" / "mcp-server-everything")
    return MCPServerConfig(server_id, command="node", args=[script, "stdio"], **options)


def filesystem(modules: Path, root: Path, server_id: str = "fs", **options: Any) -> MCPServerConfig:
    """``@modelcontextprotocol/server-filesystem``, allowed to touch ``root`` only."""
    script = str(modules / ".bin" / "mcp-server-filesystem")
    return MCPServerConfig(server_id, command="node", args=[script, str(root)], **options)
