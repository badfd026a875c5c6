"""What `config show` prints: the effective configuration with its origins, never a secret."""

from __future__ import annotations

import json
import tomllib

import pytest

from tests.config.helpers import Dirs
from tether.config.redact import Redactor, looks_like_key, secret_values
from tether.config.schema import Config
from tether.config.show import render_json, render_toml

OPENAI_KEY = "sk-proj-Zx81abcDEFghiJKLmnoPQRstu"
BOX_KEY = "plainpassword"  # not key-shaped: only known as a secret because api_key_env names its variable


@pytest.mark.parametrize(
    "text",
    [
        OPENAI_KEY,
        "sk-ant-api03-abcdefghijklmnop",
        "ghp_abcdefghijklmnopqrstuvwxyz0123",
        "AIzaSyA1234567890abcdefghijklmnopq",
        "Bearer abc.def.ghi-token",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.sig",
        "f3a9c2e1b7d84a6f9e0c1b2a3d4e5f60aa",
    ],
)
def test_key_shaped_values_are_recognised(text: str) -> None:
    assert looks_like_key(text)


@pytest.mark.parametrize(
    "text",
    [
        "openai:gpt-4o-mini",
        "ollama:qwen2.5-coder:32b-instruct-q4_K_M",
        "http://localhost:11434/v1",
        "https://api.deepseek.com/v1",
        "meta-llama/Llama-3.1-8B-Instruct",
        "OPENAI_API_KEY",
        "${GITHUB_TOKEN}",
        "Bearer ${TOKEN}",
        "/home/me/.local/share/tether/sessions.sqlite",
        "@modelcontextprotocol/server-filesystem",
        "/srv/disk-cache/sessions.sqlite",
        "task_runner",
    ],
)
def test_ordinary_settings_are_not_taken_for_keys(text: str) -> None:
    assert not looks_like_key(text)


def test_redaction_hides_secret_headers_env_entries_url_passwords_and_named_variable_values() -> None:
    redactor = Redactor(secret_values({"BOX_KEY": BOX_KEY, "HOME": "/home/me"}, {"BOX_KEY"}))
    data = {
        "headers": {"Authorization": "Basic dXNlcjpwYXNz", "X-Team": "research", "X-Api-Key": "${BOX_KEY}"},
        "env": {"GITHUB_TOKEN": "literal", "DEBUG": "1", "API_KEY": "${API_KEY}"},
        "base_url": "https://me:hunter2@box/v1?api_key=abc&model=x",
        "args": ["--token=literal", "--verbose", f"--password={BOX_KEY}"],
        "note": f"uses {BOX_KEY} inside",
    }

    assert redactor.data(data) == {
        "headers": {"Authorization": "***", "X-Team": "research", "X-Api-Key": "${BOX_KEY}"},
        "env": {"GITHUB_TOKEN": "***", "DEBUG": "1", "API_KEY": "${API_KEY}"},
        "base_url": "https://me:***@box/v1?api_key=***&model=x",
        "args": ["--token=***", "--verbose", "--password=***"],
        "note": "***",
    }


def test_ordinary_variables_are_not_secrets_even_when_their_names_say_auth_or_pwd() -> None:
    env = {"PWD": "/home/me/project", "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock", "MY_TOKEN": "tok-value-1"}
    redactor = Redactor(secret_values(env, ()))

    assert redactor.text("/home/me/project/sessions.sqlite") == "/home/me/project/sessions.sqlite"
    assert redactor.text("/tmp/ssh-agent.sock") == "/tmp/ssh-agent.sock"
    assert redactor.text("tok-value-1") == "***"


def secret_config(dirs: Dirs) -> dict[str, str]:
    dirs.write_user(
        '[runtime]\nmodel = "box:qwen3"\n\n[providers.box]\nprofile = "vllm"\nbase_url = "http://box:8000/v1"\n'
        'api_key_env = "BOX_KEY"\n'
        f'headers = {{ Authorization = "Bearer {OPENAI_KEY}", "X-Echo" = "{BOX_KEY}", "X-Team" = "research" }}\n'
    )
    dirs.write_project(
        '[[mcp.servers]]\nid = "gh"\ncommand = "gh-mcp"\nenv = { GITHUB_TOKEN = "${GITHUB_TOKEN}" }\n'
        f'args = ["--key", "{OPENAI_KEY}"]\n'
    )
    return {"BOX_KEY": BOX_KEY, "OPENAI_API_KEY": OPENAI_KEY, "GITHUB_TOKEN": "ghp_secretvalue0123456789abcdef"}


def test_show_never_prints_a_key_from_the_file_or_the_environment(dirs: Dirs) -> None:
    env = secret_config(dirs)
    loaded = dirs.load(env)

    for text in (render_toml(loaded, env), render_json(loaded, env)):
        for secret in env.values():
            assert secret not in text
        assert "research" in text
        assert "${GITHUB_TOKEN}" in text
        assert "BOX_KEY" in text  # the variable's name is not a secret


def test_show_toml_loads_back_to_the_same_configuration_and_names_origins(dirs: Dirs) -> None:
    dirs.write_user('[runtime]\nmodel = "ollama:qwen3"\n\n[runtime.limits]\nrun_timeout = 60\n')
    dirs.write_project('[tools]\nmode = "read-only"\n\n[[mcp.servers]]\nid = "fs"\ncommand = "npx"\n')
    loaded = dirs.load({"TETHER_SESSION__STORE": "memory"}, flags={"runtime.limits.max_turns": 4})

    text = render_toml(loaded, {})

    assert Config.model_validate(tomllib.loads(text)) == loaded.config
    lines = text.splitlines()
    assert f'model = "ollama:qwen3" # {dirs.user_toml} line 2' in lines
    assert "max_turns = 4 # command line (runtime.limits.max_turns)" in lines
    assert "max_tool_calls = 100 # default" in lines
    assert 'max_cost_usd = "off" # default' in lines
    assert f'mode = "read-only" # {dirs.agent_toml} line 2' in lines
    assert f'command = "npx" # {dirs.agent_toml} line 6' in lines
    assert 'store = "memory" # environment variable TETHER_SESSION__STORE' in lines


def test_show_json_is_the_configuration_with_null_for_unset_values(dirs: Dirs) -> None:
    dirs.write_project('[runtime]\nmodel = "openai:gpt-4o"\n')

    data = json.loads(render_json(dirs.load(), {}))

    assert data["runtime"]["model"] == "openai:gpt-4o"
    assert data["runtime"]["limits"]["run_timeout"] is None
    assert Config.model_validate({**data, "runtime": {"model": "openai:gpt-4o"}}) == dirs.load().config
