"""Skills with the ``tether`` command, run as a user would: the project's ``.tether/skills/`` and the user's
``skills/`` found by themselves, ``[agent] skills`` first; a skill's body sent only once the model loads it; a
user's skill's script run by ``bash`` in its sandbox; ``tether skills list``; a broken SKILL.md found skipped
with one warning, a broken one named stopping the command; discovery switched off."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import Project
from tests.e2e.mock_llm import Call, MockLLM, Say
from tests.skills.helpers import write_skill
from tests.tools.sandboxing import require_bwrap


def request_text(server: MockLLM, index: int) -> str:
    return json.dumps(server.messages(index))


def user_skills(project: Project) -> Path:
    return project.root / "config" / "tether" / "skills"  # XDG_CONFIG_HOME/tether/skills


@pytest.fixture
def skilled(project: Project) -> Project:
    """A project with a skill of its own (``greet``) and a user with two (``deploy``, and a ``greet`` the
    project's shadows), the user's ``deploy`` with a script."""
    write_skill(project.cwd / ".tether" / "skills", "greet", "Greets people.", body="# Greet\nPROJECT-BODY")
    write_skill(user_skills(project), "greet", "The user's greeting.", body="USER-GREET-BODY")
    deploy = write_skill(user_skills(project), "deploy", "Deploys the site.", body="# Deploy\nRun scripts/go.sh")
    (deploy / "scripts").mkdir()
    (deploy / "scripts" / "go.sh").write_text('echo "deployed by $(basename "$(dirname "$0")")"; echo $HOME\n')
    return project


def test_the_command_finds_the_projects_and_the_users_skills_and_loads_a_body_when_asked(
    skilled: Project, request: pytest.FixtureRequest
) -> None:
    require_bwrap(request.config)
    script = user_skills(skilled).resolve() / "deploy" / "scripts" / "go.sh"
    steps: list[Any] = [
        Call("load_skill", {"name": "deploy"}),
        Call("bash", {"command": f"sh {script}"}),
        Say("Deployed."),
    ]
    with MockLLM(steps) as server:
        skilled.use(server)
        done = skilled.run("run", "Deploy the site", "--yes", "--json")

    assert done.returncode == 0, done.stderr
    first, second, third = (request_text(server, index) for index in range(3))
    assert "- deploy: Deploys the site." in first
    assert "- greet: Greets people." in first
    assert "The user's greeting." not in first, "the project's skill shadows the user's of the same name"
    assert "Run scripts/go.sh" not in first
    assert "Run scripts/go.sh" in second
    assert "PROJECT-BODY" not in third
    results = [
        part["content"]
        for message in json.loads(done.stdout)["messages"]
        if message["role"] == "tool"
        for part in message["parts"]
    ]
    assert "deployed by scripts" in results[1]
    assert "/tmp/home" in results[1], "the script ran in the sandbox (its private HOME)"
    assert "without a sandbox" not in done.stderr


def test_agent_skills_in_agent_toml_come_first(skilled: Project) -> None:
    write_skill(skilled.cwd / "team-skills", "greet", "The team's greeting.")
    (skilled.cwd / "agent.toml").write_text('[agent]\nskills = ["team-skills"]\n')

    listed = skilled.run("skills", "list", "--json")

    assert listed.returncode == 0, listed.stderr
    rows = {(row["name"], row["description"], row["shadowed"]) for row in json.loads(listed.stdout)}
    assert rows == {
        ("deploy", "Deploys the site.", False),
        ("greet", "The team's greeting.", False),
        ("greet", "Greets people.", True),
        ("greet", "The user's greeting.", True),
    }
    table = skilled.run("skills", "list")
    assert "team-skills/greet" in table.stdout
    assert "(shadowed)" in table.stdout


def test_a_broken_skill_found_is_skipped_with_one_warning_and_a_named_one_stops_the_command(skilled: Project) -> None:
    write_skill(skilled.cwd / ".tether" / "skills", "lint", front="name: Lint\ndescription: Lints.\n")
    with MockLLM([Say("Hi.")]) as server:
        skilled.use(server)
        done = skilled.run("run", "hello", "--yes")
        listed = skilled.run("skills", "list", "--json")
        with (skilled.cwd / "agent.toml").open("a") as config:
            config.write('[agent]\nskills = [".tether/skills/lint"]\n')
        named = skilled.run("run", "hello", "--yes")

    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "skipped the skill" in line]
    assert len(warnings) == 1, done.stderr
    assert ".tether/skills/lint/SKILL.md: skill_invalid (bad_name): the name 'Lint' must be" in warnings[0]
    assert "- greet: Greets people." in request_text(server, 0)
    assert "lint" not in request_text(server, 0)
    assert listed.returncode == 0, listed.stderr
    (row,) = [row for row in json.loads(listed.stdout) if row["broken"]]
    assert (row["name"], row["broken"]["code"], row["broken"]["reason"]) == ("lint", "skill_invalid", "bad_name")
    assert named.returncode == 1
    assert len(server.requests) == 1, "a skill named in [agent] skills and broken stops the command"
    assert ".tether/skills/lint/SKILL.md: the name 'Lint' must be 1-64 lowercase letters" in named.stderr


def test_discovery_is_switched_off_by_the_flag_or_the_key(skilled: Project) -> None:
    write_skill(skilled.cwd / ".tether" / "skills", "lint", front="name: Lint\ndescription: Lints.\n")
    write_skill(skilled.cwd / "named", "release", "Writes release notes.")
    with MockLLM([Say("One."), Say("Two.")]) as server:
        skilled.use(server)
        flagged = skilled.run("run", "hello", "--yes", "--no-discover-skills")
        with (skilled.cwd / "agent.toml").open("a") as config:
            config.write('[agent]\nskills = ["named"]\ndiscover_skills = false\n')
        keyed = skilled.run("run", "hello", "--yes")
        listed = skilled.run("skills", "list", "--json")

    assert (flagged.returncode, keyed.returncode) == (0, 0), flagged.stderr + keyed.stderr
    assert "skipped the skill" not in flagged.stderr + keyed.stderr, "the broken project skill is not even read"
    assert "load_skill" not in json.dumps(server.requests[0]), "no skill at all: no tool"
    assert "- release: Writes release notes." in request_text(server, 1)
    assert "greet" not in request_text(server, 1)
    assert "deploy" not in request_text(server, 1)
    assert [row["name"] for row in json.loads(listed.stdout)] == ["release"]


def test_no_skills_no_tool_and_nothing_in_the_prompt(project: Project) -> None:
    with MockLLM([Say("Hi.")]) as server:
        project.use(server)
        done = project.run("run", "hello", "--yes")
        listed = project.run("skills", "list")

    assert done.returncode == 0, done.stderr
    assert "load_skill" not in json.dumps(server.requests[0])
    assert "no skills" in listed.stdout
