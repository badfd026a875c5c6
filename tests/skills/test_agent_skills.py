"""An agent with skills, run by a scripted model: the catalog in the system prompt, a skill's body only once
the model loads it, the tool's refusals as results the model reads, and a skill's script run by ``bash`` in its
sandbox."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from tests.skills.helpers import write_skill
from tests.tools.sandboxing import require_bwrap
from tether import Agent, RunContext, ToolResult, tool
from tether.errors import ConfigInvalid
from tether.providers import ScriptedProvider, call, reply
from tether.skills import SkillInvalid
from tether.tools.shell import bash_tool
from tether.tools.workspace import Workspace

BODY = "# Greeting\nRun scripts/greet.sh with the person's name; answer with what it prints. SECRET-BODY-7"


@pytest.fixture
def skills(tmp_path: Path) -> Path:
    folder = write_skill(tmp_path / "skills", "greet", "Greets people in the house style.", body=BODY)
    (folder / "scripts").mkdir()
    (folder / "scripts" / "greet.sh").write_text(
        'echo "Hello, $1, from the skill"\n'
        'touch "$(dirname "$0")/written" 2>/dev/null && echo wrote-skill || echo skill-read-only\n'
        f"echo escaped > {shlex.quote(str(tmp_path / 'outside.txt'))} 2>/dev/null; echo done\n"
    )
    write_skill(tmp_path / "skills", "csv", "Reads CSV files.", body="# CSV\nSECRET-CSV-BODY")
    return tmp_path / "skills"


def results(messages: object) -> list[ToolResult]:
    """Every tool result of a transcript, in order."""
    assert isinstance(messages, list | tuple)
    return [result for message in messages for result in message.tool_results]


def texts(model: ScriptedProvider, index: int) -> str:
    """Everything request ``index`` showed the model: its system prompt and every message's text."""
    request = model.requests[index]
    parts = [request.system or ""]
    for message in request.messages:
        parts += [message.text, *(result.content for result in message.tool_results)]
    return "\n".join(parts)


async def test_the_body_reaches_the_model_only_once_it_loads_the_skill(skills: Path) -> None:
    model = ScriptedProvider([reply("no skill needed"), call("load_skill", {"name": "greet"}), reply("Hello")])
    agent = Agent(model, skills=[skills], system="Be brief.")

    await agent.run("What is 2+2?")
    result = await agent.run("Greet Ann.")

    first, before, after = texts(model, 0), texts(model, 1), texts(model, 2)
    assert "- greet: Greets people in the house style." in first
    assert "- csv: Reads CSV files." in first
    assert "SECRET-BODY-7" not in first
    assert "SECRET-BODY-7" not in before
    assert "SECRET-BODY-7" in after
    assert "SECRET-CSV-BODY" not in after, "only the skill asked for is loaded"
    (loaded,) = results(result.messages)
    assert not loaded.is_error
    assert agent.skills is not None
    assert f'folder="{agent.skills["greet"].folder}"' in loaded.content
    assert "- scripts/greet.sh" in loaded.content
    assert [t.name for t in model.requests[0].tools] == ["load_skill"]
    assert model.requests[0].tools[0].parameters["properties"]["name"]["enum"] == ["csv", "greet"]


async def test_the_tools_refusals_are_results_the_model_reads(skills: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("outside-secret")
    (skills / "greet" / "link").symlink_to(tmp_path / "secret.txt")
    asks = [
        call("load_skill", {"name": "greet", "file": "../../secret.txt"}),
        call("load_skill", {"name": "greet", "file": "link"}),
        call("load_skill", {"name": "greet", "file": "scripts/greet.sh"}),
        call("load_skill", {"name": "nope"}),
        call("load_skill", {"name": "greet", "file": "missing.md"}),
    ]
    model = ScriptedProvider([*asks, reply("done")])

    result = await Agent(model, skills=[skills]).run("go")

    answered = results(result.messages)
    assert [(r.is_error, r.code) for r in answered] == [
        (True, "permission_denied"),
        (True, "permission_denied"),
        (False, None),
        (True, "invalid_arguments"),
        (True, "tool_failed"),
    ]
    assert all("outside-secret" not in r.content for r in answered)
    assert "Hello, $1" in answered[2].content


async def test_the_catalog_is_the_same_whatever_the_order_and_names_no_path(skills: Path, tmp_path: Path) -> None:
    one = ScriptedProvider([reply("a")])
    other = ScriptedProvider([reply("a")])

    await Agent(one, skills=[skills / "greet", skills / "csv"]).run("x")
    await Agent(other, skills=[skills / "csv", skills / "greet"]).run("x")

    assert one.requests[0].system == other.requests[0].system
    assert str(tmp_path) not in (one.requests[0].system or "")
    assert "bash" not in (one.requests[0].system or ""), "no bash tool: scripts are not mentioned"


async def test_the_catalog_follows_a_system_function_and_comes_before_a_runs_instructions(skills: Path) -> None:
    model = ScriptedProvider([reply("a")])

    def system(ctx: RunContext[None]) -> str:
        return "From the function."

    await Agent(model, skills=[skills], system=system).run("x", instructions="From the run.")

    prompt = model.requests[0].system or ""
    assert prompt.index("From the function.") < prompt.index("- greet:") < prompt.index("From the run.")


async def test_load_skill_is_read_only_and_offered_in_read_only_mode(skills: Path) -> None:
    model = ScriptedProvider([call("load_skill", {"name": "csv"}), reply("a")])

    result = await Agent(model, skills=[skills], mode="read-only").run("x")

    assert "SECRET-CSV-BODY" in results(result.messages)[0].content


def test_an_agent_refuses_a_malformed_skill_and_a_tool_taking_the_tools_name(skills: Path) -> None:
    write_skill(skills, "broken", front="name: Broken\ndescription: d\n")

    @tool
    def load_skill(name: str) -> str:
        """Not the built-in one."""
        return name

    with pytest.raises(SkillInvalid, match="lowercase"):
        Agent("scripted:echo", skills=[skills])
    with pytest.raises(ConfigInvalid, match="two tools are named 'load_skill'"):
        Agent("scripted:echo", tools=[load_skill], skills=[skills / "csv"])
    assert Agent("scripted:echo").skills is None


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap is Linux-only")
async def test_an_agent_with_skills_shows_their_folders_to_its_bash_sandbox_read_only(
    skills: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    require_bwrap(request.config)
    (tmp_path / "work").mkdir()
    shell = bash_tool(Workspace(tmp_path / "work"), sandbox="required")  # no read_only_paths given
    script = (skills / "greet").resolve() / "scripts" / "greet.sh"
    steps = [call("load_skill", {"name": "greet"}), call("bash", {"command": f"sh {script} Ann"}), reply("Hi")]

    result = await Agent(ScriptedProvider(steps), tools=[shell], skills=[skills]).run("Greet Ann.")
    without = await Agent(ScriptedProvider(steps[1:]), tools=[shell]).run("Greet Ann.")

    ran = results(result.messages)[1].content
    assert "Hello, Ann, from the skill" in ran
    assert "skill-read-only" in ran, "the skill's folder is read-only in the sandbox"
    assert not (skills / "greet" / "written").exists()
    assert not (tmp_path / "outside.txt").exists(), "a write outside the workspace vanished with the sandbox"
    assert "No such file" in results(without.messages)[0].content, "the tool given is left as it was"
    assert shell.read_only_paths == ()


async def test_with_a_bash_tool_the_instructions_say_how_to_run_a_script(skills: Path, tmp_path: Path) -> None:
    model = ScriptedProvider([reply("a")])
    shell = bash_tool(Workspace(tmp_path), sandbox="off")

    await Agent(model, tools=[shell], skills=[skills]).run("x")

    assert "Run a skill's scripts with the bash tool" in (model.requests[0].system or "")
