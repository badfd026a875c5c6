"""`--config PATH` after any command that reads configuration, as a user types it: a real subprocess each time.

Every such command is run with ``--config`` after itself, on a file holding an unknown key: it exits 1 naming
that file and line (the file was read; a flag it did not take would be a usage error, exit 2). Then each kind
of command shows it used the file named for its real work.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from tether.messages import Message
from tether.sessions import FileSessionStore, Session


def tether(cwd: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not (k.startswith("TETHER_") and k != "TETHER_LOCAL_SERVERS") and not k.endswith("_API_KEY")
    }
    home = cwd / "home"
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / "config"), XDG_DATA_HOME=str(home / "data"),
               XDG_STATE_HOME=str(home / "state"))  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "tether.cli.app", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


BROKEN = '[runtime]\nmodel = "scripted:echo"\nbogus = 1\n'

READERS = [
    ("config", "show", "--config", "{file}"),
    ("config", "set", "runtime.retries", "2", "--config", "{file}"),
    ("config", "migrate", "--config", "{file}"),
    ("sessions", "list", "--config", "{file}"),
    ("sessions", "show", "s1", "--config", "{file}"),
    ("sessions", "export", "s1", "--config", "{file}"),
    ("sessions", "delete", "s1", "--config", "{file}"),
    ("run", "hello", "--config", "{file}"),
    ("chat", "--config", "{file}"),
    ("py", "--config", "{file}"),
    ("batch", "prompts.jsonl", "--output", "out.jsonl", "--config", "{file}"),
    ("worker", "--config", "{file}"),
    ("serve", "--config", "{file}"),
    ("mcp", "serve", "--config", "{file}"),
    ("skills", "list", "--config", "{file}"),
]


@pytest.mark.parametrize("args", READERS, ids=[" ".join(a[:2]) for a in READERS])
def test_every_command_that_reads_configuration_takes_config_after_itself(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    team = tmp_path / "team.toml"
    team.write_text(BROKEN)
    (tmp_path / "prompts.jsonl").write_text('"hello"\n')

    completed = tether(tmp_path, *(arg.format(file=team) for arg in args))

    assert completed.returncode == 1, completed.stderr
    assert f"{team} line 3: runtime.bogus: unknown key" in completed.stderr
    assert completed.stderr.startswith("error: invalid configuration:"), "said once, as every command says it"
    assert team.read_text() == BROKEN
    assert not (tmp_path / "agent.toml").exists()


def test_config_commands_use_the_file_named_after_them(tmp_path: Path) -> None:
    (tmp_path / "agent.toml").write_text('[runtime]\nmodel = "openai:from-agent-toml"\n')
    team = tmp_path / "team.toml"
    team.write_text('[runtime]\nmodel = "openai:from-team"\n')

    shown = tether(tmp_path, "config", "show", "--json", "--config", str(team))
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["runtime"]["model"] == "openai:from-team"

    assert tether(tmp_path, "config", "set", "runtime.retries", "2", "--config", str(team)).returncode == 0
    assert team.read_text() == '[runtime]\nmodel = "openai:from-team"\nretries = 2\n'

    paths = tether(tmp_path, "config", "path", "--config", str(team))
    assert paths.stdout.splitlines()[1] == f"project: {team} (named by --config)"

    fresh = tmp_path / "fresh.toml"
    assert tether(tmp_path, "config", "init", "--config", str(fresh)).returncode == 0
    assert fresh.read_text().startswith("# tether configuration.")

    older = tmp_path / "older.toml"
    older.write_text('[runtime]\ndefault_model = "openai:gpt-4o"\n')
    migrated = tether(tmp_path, "config", "migrate", "--config", str(older))
    assert migrated.returncode == 0, migrated.stderr
    assert older.read_text() == '[runtime]\nmodel = "openai:gpt-4o"\n'
    assert (tmp_path / "agent.toml").read_text() == '[runtime]\nmodel = "openai:from-agent-toml"\n'


def test_the_flag_after_the_command_wins_over_the_groups(tmp_path: Path) -> None:
    first, second = tmp_path / "first.toml", tmp_path / "second.toml"
    first.write_text('[runtime]\nmodel = "openai:first"\n')
    second.write_text('[runtime]\nmodel = "openai:second"\n')

    before = tether(tmp_path, "config", "--config", str(first), "show", "--json")
    both = tether(tmp_path, "config", "--config", str(first), "show", "--json", "--config", str(second))

    assert json.loads(before.stdout)["runtime"]["model"] == "openai:first"
    assert json.loads(both.stdout)["runtime"]["model"] == "openai:second"


@pytest.mark.parametrize("where", ["before the command", "after the command"])
def test_sessions_open_the_store_the_named_file_configures(tmp_path: Path, where: str) -> None:
    store = tmp_path / "team-sessions"
    asyncio.run(FileSessionStore(store).save(Session.new(id="s1", title="Team chat", messages=(Message.user("hi"),))))
    team = tmp_path / "team.toml"
    team.write_text(f'[session]\nstore = "files"\npath = "{store}"\n')
    flag = ("--config", str(team))

    def sessions(*args: str) -> subprocess.CompletedProcess[str]:
        head, tail = args[:1], args[1:]
        return tether(
            tmp_path, "sessions", *(flag + head + tail if where == "before the command" else head + tail + flag)
        )

    listed = sessions("list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [entry["id"] for entry in json.loads(listed.stdout)] == ["s1"]
    exported = sessions("export", "s1")
    assert json.loads(exported.stdout)["title"] == "Team chat"
    assert "hi" in sessions("show", "s1").stdout
    assert sessions("delete", "s1").stdout == "deleted s1\n"
    assert list(store.iterdir()) == []


def test_run_and_chat_use_the_model_of_the_file_named_after_them(tmp_path: Path) -> None:
    team = tmp_path / "team.toml"
    team.write_text('[runtime]\nmodel = "scripted:echo"\n\n[session]\nstore = "memory"\n')

    ran = tether(tmp_path, "run", "--json", "hello there", "--config", str(team))
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["model"] == "scripted:echo"

    chatted = tether(tmp_path, "chat", "--config", str(team), stdin="/model\n")
    assert chatted.returncode == 0, chatted.stderr
    assert "model: scripted:echo" in chatted.stdout.splitlines()


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command under ``group``, groups included, as the words that name it."""
    found: list[tuple[str, ...]] = [path]
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            found += _commands(command, (*path, name))
        else:
            found.append((*path, name))
    return found


def test_the_help_options_are_taken_after_every_command_and_config_is_listed_where_it_is_read() -> None:
    from click.testing import CliRunner

    from tether.cli.app import main

    reading = {tuple(args[: 2 if args[0] in ("config", "sessions", "skills", "mcp") else 1]) for args in READERS}
    reading |= {("config",), ("sessions",), ("skills",), ("config", "init"), ("config", "path")}
    reading |= {("doctor",)}  # reads it too, and reports a broken file as its `config` line rather than failing
    reading |= {("models",)}  # lists the configured [providers.NAME], and names a broken file without failing
    reading |= {("runs", "submit")}  # makes the worker's agent from the configuration
    for words in _commands(main):
        for flag in ("-h", "--help"):
            result = CliRunner().invoke(main, [*words, flag], prog_name="tether")
            assert result.exit_code == 0, (words, flag, result.output)
            assert result.output.startswith(f"Usage: {' '.join(('tether', *words))}")
            assert ("--config PATH" in result.output) == (words in reading), words
