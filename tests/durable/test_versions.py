"""The deploy version (``tether.durable.versions``): the same agents give the same version in any process; a
change of model, instructions, tools (their schemas or their code) or output type gives another."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tether import Agent, tool
from tether.durable.versions import agent_identity, deploy_version
from tether.providers.scripted import ScriptedProvider


@tool
def add(a: int, b: int) -> str:
    """Add two numbers."""
    return str(a + b)


@tool(name="add")
def add_floats(a: float, b: float) -> str:
    """Add two numbers."""
    return str(a + b)


@tool(name="add")
def add_twice(a: int, b: int) -> str:
    """Add two numbers."""
    return str(2 * (a + b))


@dataclass
class Total:
    amount: int


@dataclass
class Sum:
    amount: float


def version_of(**changes: Any) -> str:
    arguments: dict[str, Any] = {"tools": [add], "system": "Be brief.", "output_type": Total, **changes}
    model = arguments.pop("model", None) or ScriptedProvider([])
    identity = agent_identity(arguments.pop("name", "agent"), Agent(model, **arguments))
    return deploy_version([identity], app_name="tether", engine="3.4")


def test_the_same_agent_has_one_version_and_every_change_of_it_another() -> None:
    base = version_of()
    assert version_of() == base
    changed = {
        "instructions": version_of(system="Be very brief."),
        "model": version_of(model="openai-compatible:other", base_url="http://127.0.0.1:9/v1"),
        "a tool's schema": version_of(tools=[add_floats]),
        "a tool's code": version_of(tools=[add_twice]),
        "no tools": version_of(tools=[]),
        "output type": version_of(output_type=Sum),
        "durable name": version_of(name="other"),
    }
    for what, version in changed.items():
        assert version != base, what
        assert version.startswith("tether-"), version
    assert len(set(changed.values())) == len(changed)


def test_the_version_is_the_same_in_another_process(tmp_path: Path) -> None:
    code = "from tests.durable.test_versions import version_of; print(version_of())"
    root = str(Path(__file__).resolve().parents[2])
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True, cwd=root
    )
    assert completed.stdout.strip() == version_of()


def test_the_cli_prompt_of_a_durable_agent_leaves_out_the_files_and_the_directory(tmp_path: Path) -> None:
    """A worker and the process enqueuing for it build their prompts at different moments and, on many machines,
    in different directories: neither the workflow database appearing between them nor the directory they were
    started in may make two versions."""
    from tether.cli.build import system_prompt

    here, there = tmp_path / "here", tmp_path / "there"
    here.mkdir()
    there.mkdir()
    before = system_prompt(here, durable=True)
    (here / "runs.sqlite").write_bytes(b"")
    assert system_prompt(here, durable=True) == before == system_prompt(there, durable=True)
    assert str(here) not in before
    assert "runs.sqlite" in system_prompt(here)
    assert str(here) in system_prompt(here)


def test_an_mcp_servers_tools_are_left_out_of_the_version() -> None:
    """``tether runs submit`` does not connect the MCP servers ``tether worker`` does: both have one version."""
    from tether.tools.base import Tool

    async def call(arguments: dict[str, Any]) -> str:
        return "remote"

    server: Any = object()  # stands for an MCP connection: only its presence matters here
    remote = Tool.from_schema("search", "Search the web.", {"type": "object", "properties": {}}, call, server=server)
    assert version_of(tools=[add, remote]) == version_of()
