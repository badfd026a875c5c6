"""The ``bash`` tool in its bubblewrap sandbox, tried with real escapes against real files, a real loopback
server and real processes, each checked from the host.

Each escape is run twice where that is safe: sandboxed (``sandbox="required"``, so that a sandbox that cannot
start fails the test instead of quietly running unconfined), where it must fail, and unconfined
(``sandbox="off"``), where it succeeds: the control that shows the test can see an escape at all.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
import uuid
from pathlib import Path

import pytest

from tests.tools.sandboxing import first_line, greeting_server, kill_all, own_command_line, running_with
from tether.errors import ToolTimeout
from tether.tools.sandbox import SANDBOX_HOME
from tether.tools.shell import bash_tool
from tether.tools.workspace import Workspace

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap is Linux-only")

SECRET = "outside-secret-4711"


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    (tmp_path / "ws").mkdir()
    return Workspace(tmp_path / "ws")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the workspace, with a file in it."""
    directory = tmp_path / "outside"
    directory.mkdir()
    (directory / "secret.txt").write_text(f"{SECRET}\n")
    return directory


async def bash(ws: Workspace, command: str, *, call_timeout: float | None = None, **options: object) -> str:
    tool = bash_tool(ws, **options)  # type: ignore[arg-type]
    result: str = await tool.function(command=command, timeout=call_timeout)
    return result


def q(path: Path | str) -> str:
    return shlex.quote(str(path))


# --- files ------------------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("bwrap_here")
async def test_a_file_outside_the_workspace_cannot_be_read(ws: Workspace, outside: Path) -> None:
    command = f"cat {q(outside / 'secret.txt')}"

    confined = await bash(ws, command, sandbox="required")
    unconfined = await bash(ws, command, sandbox="off")

    assert SECRET not in confined
    assert confined.startswith("exit code 1")
    assert "No such file or directory" in confined
    assert SECRET in unconfined


@pytest.mark.usefixtures("bwrap_here")
async def test_the_home_directory_and_the_rest_of_etc_are_hidden(ws: Workspace) -> None:
    home = Path.home()
    if ws.root.is_relative_to(home):
        pytest.skip("the workspace is inside the home directory, which must then be partly visible")
    command = f"ls -A {q(home)}; for f in /etc/shadow /etc/pip.conf /etc/npmrc; do test -e $f && echo $f seen; done"

    confined = await bash(ws, command, sandbox="required")
    unconfined = await bash(ws, command, sandbox="off")

    assert f"ls: cannot access '{home}': No such file or directory" in confined
    assert "seen" not in confined
    assert "No such file" not in unconfined
    if Path("/etc/shadow").exists():  # noqa: ASYNC240 - a stat, once
        assert "/etc/shadow seen" in unconfined


@pytest.mark.usefixtures("bwrap_here")
async def test_writes_outside_the_workspace_do_not_reach_the_host(ws: Workspace, outside: Path) -> None:
    scratch = Path("/tmp") / f"tether-escape-{uuid.uuid4().hex}"
    command = f"echo x > {q(outside / 'new.txt')}; echo x > {q(scratch)}; echo kept > inside.txt; cat {q(scratch)}"

    confined = await bash(ws, command, sandbox="required")

    assert "No such file or directory" in confined, "the outside directory does not exist in the sandbox"
    assert "--- stdout ---\nx\n" in confined, "writing to / and /tmp works, in the sandbox's own scratch space"
    assert not (outside / "new.txt").exists()
    assert not scratch.exists(), "the sandbox's /tmp is its own"
    assert (ws.root / "inside.txt").read_text() == "kept\n", "the workspace is shared, read-write"

    await bash(ws, command, sandbox="off")
    try:
        assert (outside / "new.txt").exists()
        assert scratch.exists()
    finally:
        scratch.unlink(missing_ok=True)


@pytest.mark.usefixtures("bwrap_here")
async def test_the_system_is_read_only(ws: Workspace) -> None:
    target = f"/usr/tether-escape-{uuid.uuid4().hex}"
    confined = await bash(ws, f"touch {target}", sandbox="required")
    assert "Read-only file system" in confined
    assert not Path(target).exists()  # noqa: ASYNC240 - a stat, once


@pytest.mark.usefixtures("bwrap_here")
async def test_extra_read_only_paths_can_be_read_but_not_written(ws: Workspace, outside: Path) -> None:
    command = f"cat {q(outside / 'secret.txt')}; echo x > {q(outside / 'new.txt')}"
    out = await bash(ws, command, sandbox="required", read_only_paths=[str(outside)])
    assert SECRET in out
    assert "Read-only file system" in out
    assert not (outside / "new.txt").exists()


@pytest.mark.usefixtures("bwrap_here")
async def test_inside_the_sandbox_a_command_works_as_usual(ws: Workspace) -> None:
    command = 'pwd -P; echo note > note.txt; echo home > "$HOME/h"; cat "$HOME/h"; exit 3'
    out = await bash(ws, command, sandbox="required")
    assert out == f"exit code 3\n--- stdout ---\n{ws.root}\nhome"
    assert (ws.root / "note.txt").read_text() == "note\n"


# --- network ----------------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("bwrap_here")
async def test_a_host_loopback_server_is_unreachable_unless_the_network_is_on(ws: Workspace) -> None:
    async with greeting_server() as port:
        command = f"exec 3<>/dev/tcp/127.0.0.1/{port} && head -n 1 <&3"
        cut = await bash(ws, command, sandbox="required")
        shared = await bash(ws, command, sandbox="required", network=True)

    assert "hello" not in cut
    assert cut.startswith("exit code 1")
    assert "Connection refused" in cut
    assert shared == "exit code 0\n--- stdout ---\nhello"


# --- environment ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["required", "off"])
async def test_the_parents_secrets_stay_out_and_pass_env_gets_in(
    ws: Workspace, mode: str, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    if mode == "required":
        request.getfixturevalue("bwrap_here")
    hidden = {
        "DATABASE_URL": "postgres://app:hidden-pw@db/app",
        "ORDERS_DSN": "hidden-dsn",
        "GITLAB_PAT": "hidden-pat",
        "SMTP_PASS": "hidden-pass",
        "OPENAI_API_KEY": "sk-hidden",
        "SOME_TOOL_SETTING": "hidden-setting",
    }
    for name, value in hidden.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PASSED_ALONG", "visible-value")

    out = await bash(ws, "env", sandbox=mode, pass_env=["PASSED_ALONG"], env={"ADDED": "yes"})

    names = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    assert "hidden" not in out
    assert not set(hidden) & set(names)
    assert names["PASSED_ALONG"] == "visible-value"
    assert names["ADDED"] == "yes"
    assert names["PATH"] == os.environ["PATH"]
    assert names["SHELL"] == "/bin/bash"
    if mode == "required":
        assert names["HOME"] == SANDBOX_HOME
        assert names["TMPDIR"] == "/tmp"


# --- processes --------------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("bwrap_here")
async def test_the_hosts_processes_are_not_visible(ws: Workspace) -> None:
    this_process = own_command_line()
    command = r"for p in /proc/[0-9]*; do tr '\0' ' ' < $p/cmdline; echo; done 2>/dev/null"

    confined = await bash(ws, command, sandbox="required")
    unconfined = await bash(ws, command, sandbox="off")

    assert this_process not in confined
    assert this_process in unconfined


def escape(kind: str, token: str) -> str:
    """A command line that starts a process meant to outlive the call, and waits until it runs.

    The escapee says ``up`` on a FIFO, then would sleep and touch a marker; every process of it carries
    ``token`` in its command line, so the host can find it in ``/proc``.
    """
    inner = f"echo up > up-{token}; sleep 30; touch marker-{token}"
    start = {
        "setsid": f"setsid sh -c {q(inner)} &",
        "setsid-fork": f"setsid -f sh -c {q(inner)}",
        "double-fork": f"( setsid sh -c {q(f'( {inner} ) &')} & )",
        "nohup": f"nohup setsid sh -c {q(inner)} > /dev/null 2>&1 &",
    }[kind]
    return f"mkfifo up-{token}\n{start}\nread line < up-{token}; echo escapee:$line"


ESCAPES = ["setsid", "setsid-fork", "double-fork", "nohup"]


@pytest.mark.usefixtures("bwrap_here")
@pytest.mark.parametrize("kind", ESCAPES)
async def test_no_process_outlives_a_finished_call(ws: Workspace, kind: str) -> None:
    token = uuid.uuid4().hex
    out = await bash(ws, escape(kind, token), sandbox="required")
    assert out == "exit code 0\n--- stdout ---\nescapee:up", "the escapee ran"
    assert running_with(token) == []


@pytest.mark.parametrize("kind", ESCAPES)
async def test_unconfined_an_escapee_survives_the_call(ws: Workspace, kind: str) -> None:
    """The control for the test above: without the sandbox these processes do get away (and are then killed)."""
    token = uuid.uuid4().hex
    out = await bash(ws, escape(kind, token), sandbox="off")
    survivors = running_with(token)
    kill_all(survivors)
    assert out.endswith("escapee:up")
    assert survivors


@pytest.mark.usefixtures("bwrap_here")
@pytest.mark.parametrize("kind", ["setsid", "double-fork"])
async def test_the_timeout_kills_every_process_started_inside(ws: Workspace, kind: str) -> None:
    token = uuid.uuid4().hex
    with pytest.raises(ToolTimeout) as caught:
        await bash(ws, f"{escape(kind, token)}; sleep 300", sandbox="required", call_timeout=1, kill_grace=0.5)
    assert "escapee:up" in caught.value.message
    assert running_with(token) == []


@pytest.mark.usefixtures("bwrap_here")
@pytest.mark.parametrize("kind", ["setsid", "nohup"])
async def test_cancelling_the_call_kills_every_process_started_inside(ws: Workspace, kind: str) -> None:
    token = uuid.uuid4().hex
    started = ws.root / "started"
    os.mkfifo(started)
    task = asyncio.create_task(bash(ws, f"{escape(kind, token)} > started; sleep 300", sandbox="required"))
    assert await first_line(started) == "escapee:up"
    assert running_with(token), "the escapee is running while the call is"

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert running_with(token) == []
