"""`tether chat` without a terminal reads one input per line, so it can be scripted; it saves its session."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def chat(cwd: Path, stdin: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_") and not k.endswith("_API_KEY")}
    env.update(HOME=str(cwd), XDG_DATA_HOME=str(cwd / "data"), XDG_CONFIG_HOME=str(cwd / "config"))
    return subprocess.run(
        [sys.executable, "-m", "tether.cli.app", "chat", "--model", "scripted:echo", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_piped_lines_are_prompts_and_commands_and_the_session_can_be_resumed(tmp_path: Path) -> None:
    first = chat(tmp_path, "hello there\n/model\n", "--session", "piped")
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert lines[0].startswith("tether chat · scripted:echo · full · session piped")
    assert "hello there" in lines
    assert "model: scripted:echo" in lines

    second = chat(tmp_path, "again\n/exit\nnever sent\n", "--continue")
    assert second.returncode == 0, second.stderr
    assert "resumed piped: hello there (3 messages)" in second.stdout
    assert "again" in second.stdout.splitlines()
    assert "never sent" not in second.stdout


def test_a_bad_model_exits_1_before_the_chat_starts(tmp_path: Path) -> None:
    completed = chat(tmp_path, "", "--model", "nosuch:x")
    assert completed.returncode == 1
    assert "runtime.model" in completed.stderr


def test_the_configured_mcp_servers_tools_join_the_workspace_tools(tmp_path: Path) -> None:
    server = Path(__file__).resolve().parent.parent / "mcp" / "server.py"
    (tmp_path / "agent.toml").write_text(
        f'[[mcp.servers]]\nid = "test"\ncommand = "{sys.executable}"\nargs = ["{server}", "stdio"]\n'
        '\n[tools]\ndeny = ["pids"]\n'
    )
    completed = chat(tmp_path, "/tools\n")
    assert completed.returncode == 0, completed.stderr
    names = [line.split()[0] for line in completed.stdout.splitlines()[1:] if line.strip()]
    assert names[:4] == ["read", "write", "edit", "bash"]
    assert {"add", "echo", "pids"} <= set(names), "the server's tools are listed, and can be denied by name"
    pids = next(line for line in completed.stdout.splitlines() if line.startswith("pids "))
    assert "denied (tools.deny)" in pids
