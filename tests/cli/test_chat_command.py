"""`tether chat` without a terminal reads one input per line, so it can be scripted; it saves its session."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path


def chat(cwd: Path, stdin: str, *args: str) -> subprocess.CompletedProcess[str]:
    return tether(cwd, "chat", "--model", "scripted:echo", *args, stdin=stdin)


def tether(cwd: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not (k.startswith("TETHER_") and k != "TETHER_LOCAL_SERVERS") and not k.endswith("_API_KEY")
    }
    env.update(HOME=str(cwd), XDG_DATA_HOME=str(cwd / "data"), XDG_CONFIG_HOME=str(cwd / "config"))
    return subprocess.run(
        [sys.executable, "-m", "tether.cli.app", *args],
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


LONG = " ".join(f"word{i}" for i in range(120))
"""A line of about 870 characters: the echo model answers with it, so each turn adds about 440 tokens."""


def test_a_long_chat_is_compacted_to_the_window_the_flag_gives_and_the_session_marks_it(tmp_path: Path) -> None:
    completed = chat(tmp_path, f"{LONG}\n" * 4, "--context-window", "3000", "--session", "long")

    assert completed.returncode == 0, completed.stderr
    notes = [line for line in completed.stdout.splitlines() if line.startswith("context compacted")]
    # Compacted once the conversation passed the window, and again after an answer that ended above it, so
    # the stored session is ready for the next message (Compaction.after_answer, on in sessions).
    assert len(notes) == 2, completed.stdout
    for note in notes:
        assert re.fullmatch(r"context compacted: [\d,]+ → [\d,]+ tokens \(\d+ messages summarized\)", note)
    shown = tether(tmp_path, "sessions", "show", "long")
    assert shown.stdout.count("\n## Compacted\n") == len(notes)
    assert "the model saw this summary in place of" in shown.stdout


def test_the_window_can_come_from_agent_toml_and_no_compact_turns_compaction_off(tmp_path: Path) -> None:
    (tmp_path / "agent.toml").write_text("[compaction]\ncontext_window = 3000\n")

    configured = chat(tmp_path, f"{LONG}\n" * 4)
    switched_off = chat(tmp_path, f"{LONG}\n" * 4, "--no-compact")

    assert configured.returncode == switched_off.returncode == 0, configured.stderr + switched_off.stderr
    assert "context compacted" in configured.stdout
    assert "context compacted" not in switched_off.stdout
    assert switched_off.stdout.count(LONG) == 4, "every prompt was answered, nothing summarized"


def test_a_window_below_the_smallest_is_a_usage_error(tmp_path: Path) -> None:
    completed = chat(tmp_path, "", "--context-window", "100")
    assert completed.returncode == 2
    assert "--context-window" in completed.stderr


def test_save_writes_the_chats_settings_to_the_file_config_names(tmp_path: Path) -> None:
    team = tmp_path / "team.toml"
    team.write_text('# shared by the team\n[tools]\nmode = "read-only"  # careful by default\n')

    completed = chat(tmp_path, "/model scripted:echo --save\n/mode full --save\n", "--config", str(team))

    assert completed.returncode == 0, completed.stderr
    assert f"saved runtime.model = 'scripted:echo' in {team} (named by --config)" in completed.stdout
    assert team.read_text() == (
        '# shared by the team\n[tools]\nmode = "full"  # careful by default\n\n[runtime]\nmodel = "scripted:echo"\n'
    )
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["team.toml"]
