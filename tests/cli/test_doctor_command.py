"""`tether doctor` as a user runs it: a subprocess in a directory with an agent.toml, against a model API on
loopback, a real MCP server, real SQLite files (one in a directory mounted read-only) and the real bubblewrap."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tether
from tests.model_api import model_api
from tests.postgres import URL, require_postgres
from tests.read_only import run_with_read_only
from tether.keys import ALL_KEY_VARIABLES
from tether.tools.sandbox import bwrap_problem

SERVER = Path(__file__).resolve().parent.parent / "mcp" / "server.py"
SOURCE = Path(tether.__file__).resolve().parent.parent
"""The tether under test: the command runs it from any directory."""
KEY = "sk-doctor-0123456789abcdef"


def environment(home: Path, **extra: str) -> dict[str, str]:
    """The process's environment without any provider key, with the user's files under ``home``."""
    env = {name: value for name, value in os.environ.items() if name not in ALL_KEY_VARIABLES}
    env = {
        name: value
        for name, value in env.items()
        if not (name.startswith("TETHER_") and name != "TETHER_LOCAL_SERVERS")
    }
    env.update(XDG_CONFIG_HOME=str(home / "config"), XDG_DATA_HOME=str(home / "data"))
    env.update(XDG_STATE_HOME=str(home / "state"), HOME=str(home), PYTHONPATH=str(SOURCE))
    return {**env, **extra}


def doctor(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tether", "doctor", *args],
        cwd=cwd, env=environment(cwd, **env), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def write_config(directory: Path, model: str, *, base_url: str | None = None, extra: str = "") -> None:
    provider = model.partition(":")[0]
    text = f'[runtime]\nmodel = "{model}"\n\n'
    if base_url:
        text += f'[providers.{provider}]\nbase_url = "{base_url}"\n\n'
    text += f'[session]\npath = "{directory / "store" / "sessions.sqlite"}"\n\n[tools.bash]\nsandbox = "off"\n\n'
    (directory / "agent.toml").write_text(text + extra)


MCP_SERVER = f'[[mcp.servers]]\nid = "py"\ncommand = "{sys.executable}"\nargs = ["{SERVER}", "stdio"]\n'


def checks(done: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    report = json.loads(done.stdout)
    return {check["name"]: check for check in report["checks"]}


def test_everything_working_passes_every_check_and_exits_0(tmp_path: Path) -> None:
    with model_api("models") as api:
        write_config(tmp_path, "vllm:small-model", base_url=api.url, extra=MCP_SERVER)
        done = doctor(tmp_path, "--json")

    assert done.returncode == 0, done.stdout + done.stderr
    found = checks(done)
    assert list(found) == [
        "config", "model", "api_key", "provider", "mcp:py", "store", "durable", "sandbox", "skills",
    ]  # fmt: skip
    statuses = {name: check["status"] for name, check in found.items()}
    assert statuses == {
        "config": "ok", "model": "ok", "api_key": "skipped", "provider": "ok", "mcp:py": "ok", "store": "ok",
        "durable": "skipped", "sandbox": "skipped", "skills": "skipped",
    }  # fmt: skip
    assert found["mcp:py"]["detail"].startswith("started, ")
    assert api.requests == [("GET", "/v1/models", "")]
    assert json.loads(done.stdout)["ok"] is True
    with sqlite3.connect(tmp_path / "store" / "sessions.sqlite") as db:
        assert db.execute("SELECT count(*) FROM sessions").fetchone()[0] == 0


def test_a_refused_key_fails_the_provider_line_with_a_hint_exits_1_and_never_shows_the_key(tmp_path: Path) -> None:
    with model_api("refuse") as api:
        write_config(tmp_path, "openai:small-model", base_url=api.url)
        done = doctor(tmp_path, OPENAI_API_KEY=KEY)

    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert f"ok       api_key   OPENAI_API_KEY is set (***, {len(KEY)} characters)" in lines
    failed = next(index for index, line in enumerate(lines) if line.startswith("failed   provider"))
    assert lines[failed + 1].strip().startswith("hint: check the API key")
    assert lines[-1] == "1 check failed"
    assert KEY not in done.stdout + done.stderr


def test_a_provider_that_never_answers_fails_timeout_within_the_timeout_given(tmp_path: Path) -> None:
    with model_api("hang") as api:
        write_config(tmp_path, "vllm:small-model", base_url=api.url)
        done = doctor(tmp_path, "--json", "--timeout", "0.5")

    assert done.returncode == 1
    found = checks(done)["provider"]
    assert found["status"] == "failed"
    assert found["code"] == "timeout"
    assert checks(done)["store"]["status"] == "ok"  # the other checks are not held up by it


def test_a_missing_key_fails_api_key_and_skips_the_provider(tmp_path: Path) -> None:
    write_config(tmp_path, "anthropic:claude-test")

    done = doctor(tmp_path, "--json")

    assert done.returncode == 1
    found = checks(done)
    assert found["api_key"]["status"] == "failed"
    assert found["api_key"]["code"] == "config_invalid"
    assert "ANTHROPIC_API_KEY is not set" in found["api_key"]["detail"]
    assert found["provider"]["status"] == "skipped"


def test_a_configuration_that_does_not_load_fails_config_and_skips_the_rest(tmp_path: Path) -> None:
    (tmp_path / "agent.toml").write_text('[runtime]\nmax_turns = "many"\n')

    done = doctor(tmp_path, "--json")

    assert done.returncode == 1
    found = checks(done)
    assert found["config"]["status"] == "failed"
    assert found["config"]["code"] == "config_invalid"
    assert "agent.toml" in found["config"]["detail"]
    assert {check["status"] for name, check in found.items() if name != "config"} == {"skipped"}


def test_a_store_in_a_read_only_directory_fails_store_unavailable(tmp_path: Path) -> None:
    write_config(tmp_path, "scripted:echo")
    store = tmp_path / "store"
    store.mkdir()

    done = run_with_read_only(
        store, [sys.executable, "-m", "tether", "doctor", "--json"], env=environment(tmp_path), cwd=tmp_path
    )

    assert done.returncode == 1, done.stderr
    found = checks(done)["store"]
    assert found["status"] == "failed"
    assert found["code"] == "store_unavailable"
    assert "Read-only file system" in found["detail"]
    assert list(store.iterdir()) == []


def test_an_mcp_server_whose_command_is_not_there_fails_its_own_line(tmp_path: Path) -> None:
    write_config(tmp_path, "scripted:echo", extra='[[mcp.servers]]\nid = "gone"\ncommand = "no-such-server-here"\n')

    done = doctor(tmp_path, "--json")

    assert done.returncode == 1
    found = checks(done)["mcp:gone"]
    assert found["status"] == "failed"
    assert found["code"] == "config_invalid"
    assert "was not found on PATH" in found["detail"]
    assert "[[mcp.servers]]" in found["hint"]


def test_a_bwrap_that_is_not_there_fails_the_sandbox_line_naming_the_way_out(tmp_path: Path) -> None:
    write_config(tmp_path, "scripted:echo")
    text = (tmp_path / "agent.toml").read_text().replace('sandbox = "off"', 'sandbox = "required"\nbwrap = "/no/bwrap"')
    (tmp_path / "agent.toml").write_text(text)

    done = doctor(tmp_path, "--json")

    assert done.returncode == 1
    found = checks(done)["sandbox"]
    assert found["status"] == "failed"
    assert found["code"] == "permission_denied"
    assert "bubblewrap (/no/bwrap) was not found" in found["detail"]
    assert "bash commands are refused" in found["detail"]
    assert 'tools.bash.sandbox = "off"' in found["hint"]


@pytest.mark.skipif(bwrap_problem() is not None, reason="bubblewrap cannot make a sandbox here")
def test_a_working_bwrap_passes_the_sandbox_line(tmp_path: Path) -> None:
    write_config(tmp_path, "scripted:echo")
    text = (tmp_path / "agent.toml").read_text().replace('sandbox = "off"', 'sandbox = "auto"')
    (tmp_path / "agent.toml").write_text(text)

    done = doctor(tmp_path, "--json")

    assert done.returncode == 0, done.stdout
    assert checks(done)["sandbox"]["status"] == "ok"


def test_the_skills_line_counts_the_skills_and_names_a_broken_skill_md(tmp_path: Path) -> None:
    write_config(tmp_path, "scripted:echo")
    skills = tmp_path / ".tether" / "skills"
    for name, front in (("greet", "name: greet\ndescription: Greets.\n"), ("lint", "description: Lints.\n")):
        (skills / name).mkdir(parents=True)
        (skills / name / "SKILL.md").write_text(f"---\n{front}---\nBody.\n")
    (tmp_path / "config" / "tether" / "skills" / "greet").mkdir(parents=True)
    (tmp_path / "config" / "tether" / "skills" / "greet" / "SKILL.md").write_text(
        "---\nname: greet\ndescription: The user's.\n---\n"
    )

    broken = checks(doctor(tmp_path, "--json"))["skills"]
    (skills / "lint" / "SKILL.md").write_text("---\nname: lint\ndescription: Lints.\n---\n")
    fixed = checks(doctor(tmp_path, "--json"))["skills"]

    assert (broken["status"], broken["code"]) == ("failed", "skill_invalid")
    assert "lint/SKILL.md: no name" in broken["detail"]
    assert "fix the SKILL.md named" in broken["hint"]
    assert (fixed["status"], fixed["detail"]) == ("ok", "2 skills: greet, lint (1 shadowed)")


def test_the_workflow_database_is_checked_when_named_without_writing_to_it(tmp_path: Path) -> None:
    write_config(tmp_path, "scripted:echo")
    database = tmp_path / "runs.sqlite"
    with sqlite3.connect(database) as db:
        db.execute("CREATE TABLE kept (x)")
    before = database.read_bytes()

    named = doctor(tmp_path, "--json", "--db", str(database))
    new = doctor(tmp_path, "--json", "--db", str(tmp_path / "later" / "runs.sqlite"))

    assert named.returncode == 0, named.stdout
    assert checks(named)["durable"]["detail"] == f"{database}: writable"
    assert database.read_bytes() == before
    assert new.returncode == 0, new.stdout
    assert checks(new)["durable"]["status"] == "ok"
    assert not (tmp_path / "later").exists()


def test_a_workflow_database_in_a_read_only_directory_fails_store_unavailable(tmp_path: Path) -> None:
    write_config(tmp_path, "scripted:echo")
    directory = tmp_path / "runs"
    directory.mkdir()
    with sqlite3.connect(directory / "runs.sqlite") as db:
        db.execute("CREATE TABLE kept (x)")

    argv = [sys.executable, "-m", "tether", "doctor", "--json", "--db", str(directory / "runs.sqlite")]
    done = run_with_read_only(directory, argv, env=environment(tmp_path), cwd=tmp_path)

    assert done.returncode == 1, done.stderr
    found = checks(done)["durable"]
    assert found["status"] == "failed"
    assert found["code"] == "store_unavailable"


def test_doctor_is_listed_in_the_help_with_its_exit_codes(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tether", "doctor", "--help"], capture_output=True, text=True, timeout=60, check=True
    )

    assert "--json" in done.stdout
    assert "--timeout" in done.stdout
    assert "--db" in done.stdout
    assert "1 a check failed" in done.stdout


def test_a_postgresql_workflow_database_is_reached_and_its_password_never_shown(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    require_postgres(request.config, "tether doctor's PostgreSQL check")
    write_config(tmp_path, "scripted:echo")
    with_password = URL.replace("postgres@", "postgres:doctor-secret-pw@", 1)

    reached = doctor(tmp_path, "--json", "--db", URL)
    refused = doctor(tmp_path, "--json", "--db", URL.rsplit("/", 1)[0] + "/no_such_database_here")
    shown = doctor(tmp_path, "--db", with_password)

    assert reached.returncode == 0, reached.stdout
    assert checks(reached)["durable"]["detail"].endswith(": connected, takes writes")
    assert refused.returncode == 1
    assert checks(refused)["durable"]["code"] == "store_unavailable"
    assert "doctor-secret-pw" not in shown.stdout + shown.stderr


def write_key_reference(directory: Path, url: str, code: str) -> str:
    """An agent.toml whose openai key is the output of ``code`` run by this Python; the command, as shown."""
    command = f'{sys.executable} -c "{code}"'
    text = f'[runtime]\nmodel = "openai:small-model"\n\n[providers.openai]\nbase_url = "{url}"\n'
    text += f"api_key = '''cmd:{command}'''\n"
    text += f'\n[session]\npath = "{directory / "sessions.sqlite"}"\n\n[tools.bash]\nsandbox = "off"\n'
    (directory / "agent.toml").write_text(text)
    return command


def test_a_key_from_a_command_is_shown_by_its_source_and_length_never_its_value(tmp_path: Path) -> None:
    with model_api("refuse") as api:
        command = write_key_reference(tmp_path, api.url, "print('sk-doctor' + '-0123456789abcdef')")
        done = doctor(tmp_path, "--json")

    found = checks(done)
    assert found["api_key"]["status"] == "ok"
    assert found["api_key"]["detail"] == f"from the command {command!r} (***, {len(KEY)} characters)"
    assert api.requests[0][2] == f"Bearer {KEY}"  # the provider check sent the key the command printed
    assert found["provider"]["status"] == "failed"
    assert KEY not in done.stdout + done.stderr


def test_a_key_command_that_fails_fails_api_key_with_its_own_code_and_a_hint(tmp_path: Path) -> None:
    with model_api("models") as api:
        write_key_reference(tmp_path, api.url, "import sys; print('sk-doctor' + '-0123456789abcdef'); sys.exit(4)")
        done = doctor(tmp_path, "--json")

    found = checks(done)
    assert (found["api_key"]["status"], found["api_key"]["code"]) == ("failed", "secret_unavailable")
    assert "exited with status 4" in found["api_key"]["detail"]
    assert "run its command by hand" in found["api_key"]["hint"]
    assert found["provider"]["status"] == "skipped"
    assert api.requests == []
    assert KEY not in done.stdout + done.stderr


def test_every_model_of_a_fallback_is_checked_each_on_lines_of_its_own(tmp_path: Path) -> None:
    """``--model vllm:small-model,anthropic:claude-test``: the first model's API is reached, and the second's key,
    not set, fails its own line, which a check of the first model alone would not show."""
    with model_api("models") as api:
        write_config(tmp_path, "vllm:small-model", base_url=api.url)
        done = doctor(tmp_path, "--json", "--model", "vllm:small-model,anthropic:claude-test")

    assert done.returncode == 1, done.stdout + done.stderr
    found = checks(done)
    statuses = {name: check["status"] for name, check in found.items() if name.partition(":")[0] in {
        "model", "api_key", "provider"}}  # fmt: skip
    assert statuses == {
        "model:vllm:small-model": "ok", "api_key:vllm:small-model": "skipped", "provider:vllm:small-model": "ok",
        "model:anthropic:claude-test": "ok", "api_key:anthropic:claude-test": "failed",
        "provider:anthropic:claude-test": "skipped",
    }  # fmt: skip
    assert "ANTHROPIC_API_KEY is not set" in found["api_key:anthropic:claude-test"]["detail"]
    assert api.requests == [("GET", "/v1/models", "")]
