"""``runtime.model = [...]`` in agent.toml, ``--model a,b`` and ``TETHER_MODEL=a,b``: the command runs on the
second model when the first is not there, and says so."""

from __future__ import annotations

import json
from typing import Any

import pexpect

from tests.e2e.conftest import Project, screen
from tests.e2e.mock_llm import MockLLM, Say
from tests.e2e.test_connection_errors import free_port


def test_a_list_of_models_answers_on_the_second_when_the_first_refuses_the_connection(project: Project) -> None:
    port = free_port()
    with MockLLM([Say("Hello from the backup.")]) as server:
        (project.cwd / "agent.toml").write_text(
            '[runtime]\nmodel = ["down:m", "up:mock"]\nretries = 0\n\n'
            f'[providers.down]\nprofile = "openai-compatible"\nbase_url = "http://127.0.0.1:{port}/v1"\n\n'
            f'[providers.up]\nprofile = "openai-compatible"\nbase_url = "{server.base_url}"\n'
        )
        result = project.run("run", "hello")

        assert result.returncode == 0, result.stderr
        assert "Hello from the backup." in result.stdout
        assert len(server.requests) == 1


def providers_toml(down_port: int, server: MockLLM) -> str:
    """Two providers, ``down`` (nothing listens) and ``up`` (the mock model); no model chosen."""
    return (
        "[runtime]\nretries = 0\n\n"
        f'[providers.down]\nprofile = "openai-compatible"\nbase_url = "http://127.0.0.1:{down_port}/v1"\n\n'
        f'[providers.up]\nprofile = "openai-compatible"\nbase_url = "{server.base_url}"\n'
    )


def test_model_a_comma_b_is_a_fallback_and_the_move_is_one_dim_line(project: Project) -> None:
    """``--model down:m,up:mock``: the run answers on the second model, and says on stderr, once, that it moved
    on, from which model, why, and to which."""
    with MockLLM([Say("Hello from the backup.")]) as server:
        (project.cwd / "agent.toml").write_text(providers_toml(free_port(), server))
        result = project.run("run", "--model", "down:m,up:mock", "hello")

    assert result.returncode == 0, result.stderr
    assert "Hello from the backup." in result.stdout
    moves = [line for line in result.stderr.splitlines() if "→" in line]
    assert moves == ["[down:m transport → up:mock]"], result.stderr


def test_tether_model_a_comma_b_is_a_fallback_and_json_lists_the_moves(project: Project) -> None:
    """``TETHER_MODEL=down:m,up:mock`` is the same list; ``--json`` lists each move taken."""
    with MockLLM([Say("Hello from the backup.")]) as server:
        (project.cwd / "agent.toml").write_text(providers_toml(free_port(), server))
        result = project.run("run", "--json", "hello", TETHER_MODEL="down:m,up:mock")

    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["text"] == "Hello from the backup."
    assert [(f["model"], f["code"], f["next_model"], f["attempt"]) for f in data["fallbacks"]] == [
        ("down:m", "transport", "up:mock", 2)
    ]
    assert [(r["model"], r["error"]) for r in data["turn_records"]] == [("m", "transport"), ("mock", None)]


def test_chat_model_a_comma_b_is_a_fallback_too(project: Project, children: list[Any]) -> None:
    """``tether chat --model down:m,up:mock``: the chat's agent is the whole list, and says when it moves on."""
    with MockLLM([Say("Hello from the backup.")]) as server:
        (project.cwd / "agent.toml").write_text(providers_toml(free_port(), server))
        child = project.spawn("chat", "--model", "down:m,up:mock")
        children.append(child)
        child.expect_exact("tether>")
        child.sendline("hello")
        child.expect_exact("[down:m transport → up:mock]")
        child.expect_exact("Hello from the backup.")
        child.expect_exact("tether>")
        child.sendeof()
        child.expect(pexpect.EOF)
        child.close()

    assert child.exitstatus == 0, screen(child)
    assert len(server.requests) == 1
