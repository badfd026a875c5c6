"""`tether config` as a user runs it: a real subprocess, HOME and XDG_CONFIG_HOME in tmp dirs, output and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

OPENAI_KEY = "sk-proj-Qw3rtyUIOPasdfGHJKLzxcv0987"
WORK_KEY = "correct-horse-battery"  # not key-shaped: secret only because api_key_env names WORK_KEY

COMMENTED = """\
# Team settings -- reviewed 2024-05.
[runtime]
model = "openai:gpt-4o"   # the model we pay for

[runtime.limits]
max_turns = 12   # keep runs short
# run_timeout = 600

[tools]
mode = "read-only"
"""


@dataclass
class User:
    """A user with a home, an XDG config directory and a project directory."""

    project: Path
    home: Path
    xdg: Path

    @property
    def agent_toml(self) -> Path:
        return self.project / "agent.toml"

    @property
    def user_toml(self) -> Path:
        return self.xdg / "tether" / "config.toml"

    def tether(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        base = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_") and not k.endswith("_API_KEY")}
        return subprocess.run(
            [sys.executable, "-m", "tether.cli.app", *args],
            cwd=self.project,
            env={**base, "HOME": str(self.home), "XDG_CONFIG_HOME": str(self.xdg), **env},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )


@pytest.fixture
def user(tmp_path: Path) -> User:
    dirs = User(tmp_path / "project", tmp_path / "home", tmp_path / "xdg")
    for directory in (dirs.project, dirs.home, dirs.xdg):
        directory.mkdir()
    return dirs


def test_show_prints_the_effective_configuration_with_origins(user: User) -> None:
    user.user_toml.parent.mkdir()
    user.user_toml.write_text("[runtime.limits]\nmax_turns = 5\n")
    user.agent_toml.write_text(COMMENTED)

    completed = user.tether("config", "show", TETHER_SESSION__STORE="memory")

    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    assert f'model = "openai:gpt-4o" # {user.agent_toml} line 3' in lines
    assert f"max_turns = 12 # {user.agent_toml} line 6" in lines
    assert 'store = "memory" # environment variable TETHER_SESSION__STORE' in lines


def test_show_never_prints_a_key_held_in_the_environment_or_written_in_a_file(user: User) -> None:
    user.agent_toml.write_text(
        '[runtime]\nmodel = "work:qwen3"\n\n[providers.work]\nbase_url = "http://llm.internal/v1"\n'
        'api_key_env = "WORK_KEY"\n'
        f'headers = {{ "X-Api-Key" = "{OPENAI_KEY}", "X-Forward" = "{WORK_KEY}" }}\n'
    )
    env = {"OPENAI_API_KEY": OPENAI_KEY, "WORK_KEY": WORK_KEY, "TETHER_PROVIDERS__WORK__PROFILE": "vllm"}

    for args in (("config", "show"), ("config", "show", "--json")):
        completed = user.tether(*args, **env)

        assert completed.returncode == 0, completed.stderr
        assert OPENAI_KEY not in completed.stdout + completed.stderr
        assert WORK_KEY not in completed.stdout + completed.stderr
        assert "WORK_KEY" in completed.stdout
    data = json.loads(completed.stdout)
    assert data["providers"]["work"]["headers"] == {"X-Api-Key": "***", "X-Forward": "***"}
    assert data["providers"]["work"]["profile"] == "vllm"


def test_show_exits_1_naming_key_and_line_of_an_invalid_file(user: User) -> None:
    user.agent_toml.write_text(COMMENTED.replace("max_turns = 12", "max_turns = -1"))

    completed = user.tether("config", "show")

    assert completed.returncode == 1
    assert completed.stdout == ""
    assert f"{user.agent_toml} line 6: runtime.limits.max_turns: must be a whole number >= 1" in completed.stderr


def test_an_invalid_setting_holding_a_key_is_reported_without_the_key(user: User) -> None:
    completed = user.tether("config", "show", TETHER_PROVIDERS__OPENAI__API_KEY_ENV=OPENAI_KEY)

    assert completed.returncode == 1
    assert "environment variable TETHER_PROVIDERS__OPENAI__API_KEY_ENV" in completed.stderr
    assert OPENAI_KEY not in completed.stderr


def test_set_on_a_commented_file_keeps_every_comment_and_changes_one_line(user: User) -> None:
    user.agent_toml.write_text(COMMENTED)

    completed = user.tether("config", "set", "runtime.limits.max_turns", "30")

    assert completed.returncode == 0, completed.stderr
    assert user.agent_toml.read_text() == COMMENTED.replace("max_turns = 12", "max_turns = 30")
    assert sorted(p.name for p in user.project.iterdir()) == ["agent.toml"], "no backup in the workspace"


def test_set_refuses_an_invalid_value_with_exit_1_and_leaves_the_file_alone(user: User) -> None:
    user.agent_toml.write_text(COMMENTED)

    completed = user.tether("config", "set", "tools.mode", "write")

    assert completed.returncode == 1
    assert f"{user.agent_toml} line 10: tools.mode: must be one of 'read-only', 'full'" in completed.stderr
    assert user.agent_toml.read_text() == COMMENTED
    assert sorted(p.name for p in user.project.iterdir()) == ["agent.toml"]


def test_set_user_writes_the_user_config_under_xdg_config_home(user: User) -> None:
    completed = user.tether("config", "set", "--user", "runtime.model", "ollama:qwen3")

    assert completed.returncode == 0, completed.stderr
    assert user.user_toml.read_text() == '[runtime]\nmodel = "ollama:qwen3"\n'
    assert not user.agent_toml.exists()


@pytest.mark.parametrize(
    "args",
    [
        ("config", "set", "runtime..model", "x"),
        ("config", "set", "runtime.model"),
        ("config", "show", "--yaml"),
        ("config", "init", "extra"),
    ],
)
def test_usage_errors_exit_2(user: User, args: tuple[str, ...]) -> None:
    completed = user.tether(*args)

    assert completed.returncode == 2, completed.stderr


def test_init_writes_a_commented_file_that_show_accepts(user: User) -> None:
    completed = user.tether("config", "init")

    assert completed.returncode == 0, completed.stderr
    text = user.agent_toml.read_text()
    assert text.startswith("# tether configuration.")
    assert "# max_turns = 20" in text
    assert user.tether("config", "show").returncode == 0


def test_init_refuses_to_overwrite_with_exit_1_unless_forced(user: User) -> None:
    user.agent_toml.write_text(COMMENTED)

    refused = user.tether("config", "init")
    assert refused.returncode == 1
    assert "already exists; use --force" in refused.stderr
    assert user.agent_toml.read_text() == COMMENTED

    forced = user.tether("config", "init", "--force")
    assert forced.returncode == 0, forced.stderr
    assert user.agent_toml.read_text().startswith("# tether configuration.")
    assert (user.project / "agent.toml.bak").read_text() == COMMENTED


def test_init_user_writes_under_xdg_config_home(user: User) -> None:
    completed = user.tether("config", "init", "--user")

    assert completed.returncode == 0, completed.stderr
    assert user.user_toml.read_text().startswith("# tether configuration.")


def test_path_prints_the_files_tether_reads(user: User) -> None:
    user.agent_toml.write_text(COMMENTED)

    completed = user.tether("config", "path")

    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == [f"user: {user.user_toml} (not found)", f"project: {user.agent_toml}"]


def test_help_lists_config_without_loading_pydantic_or_tomlkit() -> None:
    code = (
        "import sys\n"
        "from tether.cli.app import main\n"
        "try:\n    main(['--help'], prog_name='tether')\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in {'pydantic', 'tomlkit', 'tomllib'}))\n"
    )
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)

    assert "  config " in completed.stdout
    assert completed.stdout.splitlines()[-1] == "[]"


OLDER = """\
# written for the older CLI
[runtime]
default_model = "openai:gpt-4o"   # the model we pay for
max_steps = 12
turn_timeout_ms = 90000

[llm]
retry_max = 2
stream_default = false

[policy]
deny_tools = ["bash"]
"""


def test_show_reads_an_older_file_with_one_notice_on_stderr_and_clean_json_on_stdout(user: User) -> None:
    user.agent_toml.write_text(OLDER)

    completed = user.tether("config", "show", "--json")

    assert completed.returncode == 0, completed.stderr
    data = json.loads(completed.stdout)
    assert data["runtime"]["model"] == "openai:gpt-4o"
    assert data["runtime"]["limits"]["max_turns"] == 12
    assert data["runtime"]["limits"]["run_timeout"] == 90.0
    assert data["runtime"]["retries"] == 2
    assert data["cli"]["stream"] is False
    assert data["tools"]["deny"] == ["bash"]
    (notice,) = completed.stderr.splitlines()
    assert notice.startswith(f"notice: {user.agent_toml} uses the older layout; read runtime.default_model as ")
    assert "llm.stream_default as cli.stream" in notice
    assert notice.endswith("'tether config migrate' rewrites it")

    text = user.tether("config", "show")
    assert f"max_turns = 12 # {user.agent_toml} line 4 (as runtime.max_steps)" in text.stdout.splitlines()
    assert "notice:" not in text.stdout


def test_migrate_rewrites_the_older_file_keeps_a_backup_and_says_what_moved(user: User) -> None:
    user.agent_toml.write_text(OLDER)
    before = json.loads(user.tether("config", "show", "--json").stdout)

    completed = user.tether("config", "migrate")

    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.splitlines() == [
        "moved runtime.default_model -> runtime.model",
        "moved runtime.max_steps -> runtime.limits.max_turns",
        "moved runtime.turn_timeout_ms -> runtime.limits.run_timeout (90000 -> 90.0, ms -> s)",
        "moved llm.retry_max -> runtime.retries",
        "moved llm.stream_default -> cli.stream",
        "moved policy.deny_tools -> tools.deny",
        f"migrated {user.agent_toml} (the previous file is {user.agent_toml}.bak)",
    ]
    assert (user.project / "agent.toml.bak").read_text() == OLDER
    assert "# the model we pay for" in user.agent_toml.read_text()
    after = user.tether("config", "show", "--json")
    assert after.stderr == "", "no notice any more"
    assert json.loads(after.stdout) == before

    again = user.tether("config", "migrate")
    assert again.returncode == 0, again.stderr
    assert again.stdout == f"{user.agent_toml} is already in tether's layout; nothing to change\n"
    assert (user.project / "agent.toml.bak").read_text() == OLDER


def test_migrate_refuses_an_invalid_file_naming_key_and_line(user: User) -> None:
    user.agent_toml.write_text(OLDER.replace("max_steps = 12", "max_steps = 0"))

    completed = user.tether("config", "migrate")

    assert completed.returncode == 1
    assert f"{user.agent_toml} line 4: runtime.max_steps: must be a whole number >= 1" in completed.stderr
    assert user.agent_toml.read_text() == OLDER.replace("max_steps = 12", "max_steps = 0")
    assert not (user.project / "agent.toml.bak").exists()


def test_migrate_takes_a_path_or_the_config_file(user: User) -> None:
    elsewhere = user.home / "team.toml"
    for args, env in [
        (("config", "migrate", str(elsewhere)), {}),
        (("config", "--config", str(elsewhere), "migrate"), {}),
        (("config", "migrate"), {"TETHER_CONFIG": str(elsewhere)}),
    ]:
        elsewhere.write_text(OLDER)
        completed = user.tether(*args, **env)
        assert completed.returncode == 0, (args, completed.stderr)
        assert completed.stdout.endswith(f"migrated {elsewhere} (the previous file is {elsewhere}.bak)\n")
        assert 'model = "openai:gpt-4o"' in elsewhere.read_text()
    assert not user.agent_toml.exists()

    missing = user.tether("config", "migrate", "nowhere.toml")
    assert missing.returncode == 1
    assert f"{user.project / 'nowhere.toml'}: no such file" in missing.stderr


def test_the_config_file_replaces_agent_toml_for_every_config_command(user: User) -> None:
    user.agent_toml.write_text('[runtime]\nmodel = "openai:from-agent-toml"\nnot_a_key = 1\n')
    team = user.home / "team.toml"
    team.write_text('[runtime]\nmodel = "openai:from-config"\n')

    shown = user.tether("config", "--config", str(team), "show", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["runtime"]["model"] == "openai:from-config"

    paths = user.tether("config", "--config", str(team), "path")
    assert paths.stdout.splitlines() == [f"user: {user.user_toml} (not found)", f"project: {team} (named by --config)"]

    assert user.tether("config", "--config", str(team), "set", "runtime.limits.max_turns", "4").returncode == 0
    assert team.read_text() == '[runtime]\nmodel = "openai:from-config"\n\n[runtime.limits]\nmax_turns = 4\n'
    assert "max_turns" not in user.agent_toml.read_text()

    fresh = user.home / "fresh.toml"
    assert user.tether("config", "--config", str(fresh), "init").returncode == 0
    assert fresh.read_text().startswith("# tether configuration.")


def test_tether_config_names_the_file_and_the_flag_beats_it(user: User) -> None:
    by_variable, by_flag = user.home / "variable.toml", user.home / "flag.toml"
    by_variable.write_text('[runtime]\nmodel = "openai:by-variable"\n')
    by_flag.write_text('[runtime]\nmodel = "openai:by-flag"\n')

    shown = user.tether("config", "show", "--json", TETHER_CONFIG=str(by_variable))
    assert json.loads(shown.stdout)["runtime"]["model"] == "openai:by-variable"
    flagged = user.tether("config", "--config", str(by_flag), "show", "--json", TETHER_CONFIG=str(by_variable))
    assert json.loads(flagged.stdout)["runtime"]["model"] == "openai:by-flag"


def test_a_config_file_that_does_not_exist_exits_1_naming_it(user: User) -> None:
    missing = user.home / "missing.toml"

    for args, env in [
        (("config", "--config", str(missing), "show"), {}),
        (("config", "show"), {"TETHER_CONFIG": str(missing)}),
    ]:
        completed = user.tether(*args, **env)
        assert completed.returncode == 1
        assert completed.stdout == ""
        assert f"{missing}: no such file (named by" in completed.stderr
        assert "Traceback" not in completed.stderr


@pytest.mark.parametrize(
    ("text", "key", "line"),
    [
        ('[runtime]\nmodel = "openai:x"\nmax_turn = 3\n', "runtime.max_turn", 3),
        ('[runtime]\ndefault_model = "openai:x"\nmax_step = 3\n', "runtime.max_step", 3),
        ('[runtime]\ndefault_model = "openai:x"\n\n[llm]\ntemperature = 0.1\n', "llm.temperature", 5),
    ],
    ids=["tether layout", "older layout", "older key with no equivalent"],
)
def test_an_unknown_key_exits_1_naming_key_and_line_in_either_layout(
    user: User, text: str, key: str, line: int
) -> None:
    user.agent_toml.write_text(text)

    completed = user.tether("config", "show")

    assert completed.returncode == 1
    assert f"{user.agent_toml} line {line}: {key}: unknown key" in completed.stderr


def test_four_config_set_processes_at_once_wait_for_the_lock_and_keep_every_key(user: User) -> None:
    import time

    from tether.config.lock import update_lock

    user.agent_toml.write_text(COMMENTED)
    base = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_") and not k.endswith("_API_KEY")}
    env = {**base, "HOME": str(user.home), "XDG_CONFIG_HOME": str(user.xdg)}
    with update_lock(user.agent_toml):
        setters = [
            subprocess.Popen(
                [sys.executable, "-m", "tether.cli.app", "config", "set", f"providers.ollama.headers.x{n}", f"v{n}"],
                cwd=user.project,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in range(4)
        ]
        time.sleep(3.0)  # time for every process to start and reach the lock
        assert user.agent_toml.read_text() == COMMENTED, "a process wrote while the lock was held"
    for setter in setters:
        out, err = setter.communicate(timeout=60)
        assert setter.returncode == 0, err
        assert out == f"set providers.ollama.headers.x{setters.index(setter)} in {user.agent_toml}\n"

    text = user.agent_toml.read_text()
    assert text.startswith(COMMENTED)
    assert tomllib.loads(text)["providers"]["ollama"]["headers"] == {f"x{n}": f"v{n}" for n in range(4)}
    assert sorted(p.name for p in user.project.iterdir()) == ["agent.toml"]
