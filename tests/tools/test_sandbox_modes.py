"""The sandbox's modes and settings: ``required`` refuses without a usable bwrap, ``auto`` runs unconfined and
warns once, ``off`` never looks for bwrap; the probe runs once per process and tells "missing" from "installed
but blocked"; the environment is an allowlist; ``[tools.bash]`` reaches the command line's bash tool.

"Not available" is simulated by pointing the ``bwrap`` setting at a missing file, "blocked" at a script that
fails the way bwrap does under a container policy that forbids namespaces.
"""

from __future__ import annotations

import logging
import os
import stat
import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether import Agent
from tether.cli.build import Setup
from tether.config import BashConfig, Config, ToolsConfig, load_config
from tether.errors import ConfigInvalid, PermissionDenied
from tether.providers.default_model import ModelChoice
from tether.providers.scripted import ScriptedProvider, call, reply
from tether.sessions import MemorySessionStore
from tether.tools.base import Tool
from tether.tools.sandbox import LOCALE_VARIABLES, SHELL_VARIABLES, shell_environment
from tether.tools.shell import bash_tool
from tether.tools.workspace import Workspace

SECRET = "outside-secret-0815"
BLOCKED = "bwrap: No permissions to create new namespace, likely because the kernel does not allow it"


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    (tmp_path / "ws").mkdir()
    return Workspace(tmp_path / "ws")


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "outside" / "secret.txt"
    path.parent.mkdir()
    path.write_text(f"{SECRET}\n")
    return path


@pytest.fixture
def fake_bwrap(tmp_path: Path) -> Path:
    """A ``bwrap`` that is installed but cannot sandbox: it logs each start to ``bwrap.log`` and fails."""
    path = tmp_path / "bin" / "bwrap"
    path.parent.mkdir()
    path.write_text(f"#!/bin/sh\necho started >> {tmp_path / 'bwrap.log'}\necho '{BLOCKED}' >&2\nexit 1\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def starts(fake: Path) -> int:
    log = fake.parent.parent / "bwrap.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def sandbox_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.name == "tether.tools.sandbox"]


# --- required ---------------------------------------------------------------------------------------------------


async def test_required_without_bwrap_refuses_and_says_how_to_get_it(ws: Workspace, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-bwrap"
    tool = bash_tool(ws, sandbox="required", bwrap=str(missing))

    with pytest.raises(PermissionDenied) as caught:
        await tool.function(command="echo ran > ran.txt")

    assert caught.value.code == "permission_denied"
    message = caught.value.message
    assert f"bubblewrap ({missing}) was not found at {missing}" in message
    assert "apt-get install bubblewrap" in message
    assert 'tools.bash.sandbox = "required"' in message
    assert not (ws.root / "ran.txt").exists(), "nothing ran"


async def test_required_with_a_blocked_bwrap_refuses_with_its_reason(ws: Workspace, fake_bwrap: Path) -> None:
    with pytest.raises(PermissionDenied, match="No permissions to create new namespace"):
        await bash_tool(ws, sandbox="required", bwrap=str(fake_bwrap)).function(command="true")


async def test_the_model_gets_the_refusal_as_a_permission_denied_result(ws: Workspace, tmp_path: Path) -> None:
    model = ScriptedProvider([call("bash", {"command": "echo hi"}), reply("no shell then")])
    tool = bash_tool(ws, sandbox="required", bwrap=str(tmp_path / "no-such-bwrap"))

    result = await Agent(model, tools=[tool]).run("run it")

    (refused,) = result.messages[2].tool_results
    assert refused.is_error
    assert refused.code == "permission_denied"
    assert "install bubblewrap" in refused.content
    assert result.text == "no shell then"


# --- auto and off -----------------------------------------------------------------------------------------------


async def test_auto_without_bwrap_runs_unconfined_and_warns_once(
    ws: Workspace, tmp_path: Path, secret_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="tether.tools.sandbox")
    missing = str(tmp_path / "no-such-bwrap")

    first = await bash_tool(ws, bwrap=missing).function(command=f"cat {secret_file}")
    second = await bash_tool(ws, bwrap=missing).function(command="echo again")

    assert SECRET in first, "unconfined: the file outside the workspace is readable"
    assert second == "exit code 0\n--- stdout ---\nagain"
    (warning,) = sandbox_warnings(caplog)
    assert "bash commands run without a sandbox" in warning
    assert missing in warning
    assert "apt-get install bubblewrap" in warning


async def test_a_blocked_bwrap_is_probed_once_per_process(
    ws: Workspace, fake_bwrap: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="tether.tools.sandbox")
    for _ in range(3):
        out = await bash_tool(ws, bwrap=str(fake_bwrap)).function(command="echo ran")
        assert out == "exit code 0\n--- stdout ---\nran"

    assert starts(fake_bwrap) == 1
    (warning,) = sandbox_warnings(caplog)
    assert "is installed but cannot create a sandbox here" in warning
    assert BLOCKED in warning


async def test_off_runs_unconfined_without_looking_for_bwrap(
    ws: Workspace, fake_bwrap: Path, secret_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="tether.tools.sandbox")
    out = await bash_tool(ws, sandbox="off", bwrap=str(fake_bwrap)).function(command=f"cat {secret_file}")
    assert SECRET in out
    assert starts(fake_bwrap) == 0
    assert sandbox_warnings(caplog) == []


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"sandbox": "sometimes"}, "sandbox must be one of 'auto', 'required', 'off'"),
        ({"read_only_paths": ["relative/dir"]}, "read_only_paths must be absolute paths"),
        ({"bwrap": " "}, "bwrap must name the bubblewrap program"),
    ],
)
def test_bad_sandbox_settings_are_refused_when_the_tool_is_built(
    ws: Workspace, options: dict[str, object], words: str
) -> None:
    with pytest.raises(ConfigInvalid, match=words):
        bash_tool(ws, **options)  # type: ignore[arg-type]


# --- the environment --------------------------------------------------------------------------------------------

NAMES = st.text(alphabet=string.ascii_letters + string.digits + "_", min_size=1, max_size=12)
SECRETISH = st.builds(
    "".join, st.tuples(NAMES, st.sampled_from(["_URL", "_DSN", "_PAT", "_PASS", "_KEY", "_TOKEN", "_AUTH", ""]))
)


@settings(max_examples=40, deadline=None)
@given(
    environ=st.dictionaries(SECRETISH, st.text(max_size=8), max_size=12),
    passed=st.lists(SECRETISH, max_size=4),
    shell=st.dictionaries(st.sampled_from(sorted(SHELL_VARIABLES)), st.text(max_size=8)),
    locale=st.dictionaries(
        st.sampled_from(["LC_ALL", "LC_TIME", "LC_SECRET"]),
        st.sampled_from(["C", "en_US.UTF-8", "de_DE@euro", "sk-proj-Q7x9Zt2LmN4vB8cR1y", "ghp_0123456789abcdef"]),
    ),
)
def test_the_environment_is_an_allowlist(
    environ: dict[str, str], passed: list[str], shell: dict[str, str], locale: dict[str, str]
) -> None:
    merged = {**environ, **shell, **locale}
    passed = [name for name in passed if not name.startswith("LC_")]
    env = shell_environment(merged, pass_env=passed, extra={"ADDED": "1"}, overrides={"HOME": "/sandbox"})

    for name in env.keys() - {"ADDED", "HOME"}:
        assert name in SHELL_VARIABLES or name in LOCALE_VARIABLES or name in passed, name
        assert env[name] == merged[name]
    for name in passed:
        if name in merged and name not in ("ADDED", "HOME"):
            assert env[name] == merged[name], "pass_env brings a variable in, whatever its name"
    for name in shell.keys() - {"HOME"}:
        assert env[name] == shell[name], "what a shell needs is kept"
    for name, value in locale.items():
        is_locale = name != "LC_SECRET" and value in ("C", "en_US.UTF-8", "de_DE@euro")
        assert (env.get(name) == value) == is_locale, "a locale category only, and only with a locale's value"
    assert env["ADDED"] == "1"
    assert env["HOME"] == "/sandbox"


# --- configuration ----------------------------------------------------------------------------------------------


def test_the_bash_settings_default_to_auto_without_network() -> None:
    settings = Config().tools.bash
    assert settings == BashConfig(sandbox="auto", network=False, bwrap="bwrap", pass_env=[], read_only_paths=[])


@pytest.mark.parametrize(
    ("text", "key", "words"),
    [
        ('sandbox = "sometimes"', "tools.bash.sandbox", "'auto'"),
        ('network = "yes"', "tools.bash.network", "must be true or false"),
        ('pass_env = ["MY-VAR"]', "tools.bash.pass_env", "not the name of an environment variable"),
        ('read_only_paths = ["opt/tools"]', "tools.bash.read_only_paths", "not an absolute path"),
        ('bwrap = ""', "tools.bash.bwrap", "bubblewrap program"),
    ],
)
def test_bad_bash_settings_name_their_key(tmp_path: Path, text: str, key: str, words: str) -> None:
    (tmp_path / "agent.toml").write_text(f"[tools.bash]\n{text}\n")
    with pytest.raises(ConfigInvalid) as caught:
        load_config(tmp_path, {"HOME": str(tmp_path)})
    assert key in caught.value.message
    assert words in caught.value.message


def test_the_bash_settings_load_from_the_file_and_the_environment(tmp_path: Path) -> None:
    (tmp_path / "agent.toml").write_text('[tools.bash]\nnetwork = true\npass_env = ["CARGO_HOME"]\n')
    env = {"HOME": str(tmp_path), "TETHER_TOOLS__BASH__SANDBOX": "required"}
    settings = load_config(tmp_path, env).tools.bash
    assert settings.sandbox == "required"
    assert settings.network is True
    assert settings.pass_env == ["CARGO_HOME"]


def cli_bash(ws: Workspace, bash: BashConfig) -> Tool:
    """The bash tool the command line builds from ``[tools.bash]``."""
    config = Config(tools=ToolsConfig(bash=bash))
    setup = Setup(config, ModelChoice("scripted:test"), MemorySessionStore(), ws, os.environ)
    (tool,) = [tool for tool in setup.tools() if tool.name == "bash"]
    return tool


async def test_the_command_lines_bash_tool_follows_the_settings(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = str(tmp_path / "no-such-bwrap")
    with pytest.raises(PermissionDenied):
        await cli_bash(ws, BashConfig(sandbox="required", bwrap=missing)).function(command="true")

    monkeypatch.setenv("CARGO_HOME", "/opt/cargo")
    monkeypatch.setenv("OTHER_SETTING", "left out")
    tool = cli_bash(ws, BashConfig(sandbox="off", pass_env=["CARGO_HOME"]))
    out = await tool.function(command='echo "$CARGO_HOME|$OTHER_SETTING"')
    assert out == "exit code 0\n--- stdout ---\n/opt/cargo|"
