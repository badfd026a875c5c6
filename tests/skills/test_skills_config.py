"""``[agent] skills`` in agent.toml (and its variable), and the command line's three places for skills."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.skills.helpers import write_skill
from tether.cli.build import find_skills, user_skills
from tether.config import load_config
from tether.errors import ConfigInvalid


def test_agent_skills_is_a_list_of_paths_from_the_file_or_the_environment(tmp_path: Path) -> None:
    (tmp_path / "agent.toml").write_text('[agent]\nskills = ["team", "~/mine"]\n')

    from_file = load_config(tmp_path, {"HOME": str(tmp_path)})
    from_env = load_config(tmp_path, {"HOME": str(tmp_path), "TETHER_AGENT__SKILLS": '["other"]'})

    assert from_file.agent.skills == ["team", "~/mine"]
    assert from_env.agent.skills == ["other"]


def test_an_empty_path_is_refused_naming_the_key_and_line(tmp_path: Path) -> None:
    (tmp_path / "agent.toml").write_text('[agent]\nskills = [""]\n')

    with pytest.raises(ConfigInvalid) as raised:
        load_config(tmp_path, {"HOME": str(tmp_path)})

    assert "agent.skills" in raised.value.message
    assert "line 2" in raised.value.message


def test_the_commands_skills_are_the_configured_then_the_projects_then_the_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    monkeypatch.setenv("HOME", env["HOME"])
    write_skill(tmp_path / "home" / "mine", "greet", "Mine.")
    write_skill(tmp_path / "work" / ".tether" / "skills", "greet", "The project's.")
    write_skill(tmp_path / "work" / ".tether" / "skills", "lint", "The project's lint.")
    write_skill(tmp_path / "xdg" / "tether" / "skills", "lint", "The user's lint.")
    write_skill(tmp_path / "xdg" / "tether" / "skills", "deploy", "The user's deploy.")
    config = load_config(tmp_path / "work", env, {"agent.skills": ["~/mine"]})

    found = find_skills(config.agent, tmp_path / "work", env)

    assert user_skills(env) == tmp_path / "xdg" / "tether" / "skills"
    assert found is not None
    assert [(s.name, s.description) for s in found] == [
        ("deploy", "The user's deploy."),
        ("greet", "Mine."),
        ("lint", "The project's lint."),
    ]
    assert not find_skills(load_config(tmp_path, env).agent, tmp_path / "nowhere", {"HOME": str(tmp_path)})
    named_only = find_skills(
        load_config(tmp_path / "work", env, {"agent.discover_skills": False}).agent, tmp_path / "work", env
    )
    assert named_only.names == [], "discover_skills = false: neither the project's nor the user's"
