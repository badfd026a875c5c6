"""``--agent MODULE:ATTR`` for ``tether run`` and ``tether chat``: the Python agent's runs are its own (its model,
its store when it has one), the run's flags apply to it (``--mode``, ``--yes`` and the terminal's approval for
its ``Ask`` decisions), and what cannot be run is a ``ConfigInvalid`` naming the spec; ``tether worker`` takes
the same spec. Modules written into a temporary project, imported for real."""

from __future__ import annotations

import io
import itertools
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tether.cli.build import load_python_setup
from tether.cli.python_agent import plain_agent
from tether.cli.render import Renderer, make_console
from tether.cli.repl import Chat
from tether.cli.worker import AGENT_NAME, entry_point
from tether.errors import ConfigInvalid
from tether.messages import ToolCall
from tether.sessions import MemorySessionStore, SQLiteSessionStore

AGENTS = '''
from tether import Agent, tool
from tether.providers.scripted import ScriptedProvider, call, reply
from tether.sessions import MemorySessionStore
from tether.tools.permissions import Ask


@tool
def change(path: str) -> str:
    """Change a file."""
    return f"changed {path}"


def asks(call):
    return Ask("it changes a file")


def script():
    return ScriptedProvider([call("change", {"path": "a.txt"}), reply("Done.")])


plain = Agent(script(), tools=[change], can_use_tool=asks)
own_store = MemorySessionStore()
stored = Agent(script(), store=own_store)
approving = Agent(script(), tools=[change], can_use_tool=asks, approve=lambda call, reason: False)
needs_deps = Agent(script(), deps_type=int)
'''

_numbers = itertools.count()


@pytest.fixture
def module(tmp_path: Path) -> Iterator[str]:
    """The agents above in a module of their own (a new name each time: imports are cached)."""
    name = f"python_agents_{next(_numbers)}"
    (tmp_path / f"{name}.py").write_text(AGENTS)
    (tmp_path / "agent.toml").write_text('[session]\nstore = "memory"\n\n[tools]\nmode = "read-only"\n')
    yield name
    sys.modules.pop(name, None)


async def ran(agent: Any) -> str:
    """What became of the run's ``change`` call: its tool result."""
    result = await agent.run("change a.txt")
    (tool_result,) = [part for m in result.messages for part in m.parts if type(part).__name__ == "ToolResult"]
    return str(tool_result.content)


async def test_an_agent_without_a_store_keeps_its_sessions_in_the_configured_one(tmp_path: Path, module: str) -> None:
    setup = load_python_setup(f"{module}:plain", tmp_path, {})
    agent = setup.agent()
    assert agent is setup.python
    assert isinstance(agent.store, MemorySessionStore), "[session] store = memory, from agent.toml"
    assert setup.store is agent.store
    assert setup.model == "scripted:scripted"
    assert setup.tool_mode(setup.model, yes=False) == "full", "the agent's own mode, not agent.toml's tools.mode"

    stored = load_python_setup(f"{module}:stored", tmp_path, {})
    assert stored.store is sys.modules[module].own_store


async def test_yes_answers_the_agents_ask_and_without_it_the_run_pauses(tmp_path: Path, module: str) -> None:
    agent = load_python_setup(f"{module}:plain", tmp_path, {}).agent(yes=True)
    assert await ran(agent) == "changed a.txt"

    sys.modules.pop(module)
    agent = load_python_setup(f"{module}:plain", tmp_path, {}).agent(yes=False, approve=None)
    result = await agent.run("change a.txt")
    assert result.stop_reason == "paused", "no one to ask: the call waits for a decision"
    assert [(p.tool, p.arguments) for p in result.pending] == [("change", {"path": "a.txt"})]


async def test_the_terminals_approval_answers_an_ask_unless_the_agent_has_its_own(tmp_path: Path, module: str) -> None:
    asked: list[str] = []

    def terminal(call: ToolCall, reason: str) -> bool:
        asked.append(reason)
        return True

    agent = load_python_setup(f"{module}:plain", tmp_path, {}).agent(interactive=True, approve=terminal)
    assert await ran(agent) == "changed a.txt"
    assert asked == ["it changes a file"]

    agent = load_python_setup(f"{module}:approving", tmp_path, {}).agent(yes=True, approve=terminal)
    assert "the user did not approve this call" in await ran(agent), "its own approve wins over --yes"
    assert asked == ["it changes a file"]


async def test_mode_applies_and_another_model_is_refused(tmp_path: Path, module: str) -> None:
    setup = load_python_setup(f"{module}:plain", tmp_path, {})
    assert str(setup.agent(mode="read-only").mode) == "read-only"
    assert setup.tool_mode(setup.model, yes=False) == "read-only"
    assert setup.agent(model="scripted:scripted") is setup.python
    with pytest.raises(ConfigInvalid, match="its model is set in its Python code"):
        setup.agent(model="openai:gpt-4o-mini")


def test_what_cannot_be_run_is_a_configuration_error_naming_the_spec(tmp_path: Path, module: str) -> None:
    with pytest.raises(ConfigInvalid, match=r"needs deps of type int"):
        plain_agent(f"{module}:needs_deps", tmp_path)
    with pytest.raises(ConfigInvalid, match=r"is a function, not a tether Agent"):
        plain_agent(f"{module}:asks", tmp_path)
    with pytest.raises(ConfigInvalid, match=r"has no attribute 'plain.x'"):
        plain_agent(f"{module}:plain.x", tmp_path)


def test_the_worker_takes_the_same_spec_and_wraps_an_agent(tmp_path: Path, module: str) -> None:
    durable = entry_point(f"{module}:plain", tmp_path)
    assert durable.agent is sys.modules[module].plain
    assert durable.name == AGENT_NAME


async def test_the_configured_store_is_a_real_one_by_default(tmp_path: Path, module: str) -> None:
    (tmp_path / "agent.toml").unlink()
    setup = load_python_setup(f"{module}:plain", tmp_path, {"XDG_DATA_HOME": str(tmp_path / "data")})
    assert isinstance(setup.store, SQLiteSessionStore)
    agent = setup.agent(yes=True)
    result = await agent.run("change a.txt", session="s1")
    assert result.text == "Done."
    assert (await setup.store.load("s1")).messages[-1].text == "Done."
    await setup.store.aclose()


async def test_the_chat_keeps_the_agents_model_sets_its_mode_and_leaves_its_permissions_to_it(
    tmp_path: Path, module: str
) -> None:
    setup = load_python_setup(f"{module}:plain", tmp_path, {})
    file = io.StringIO()
    chat = Chat(
        lambda model, mode: setup.agent(model=model, mode=mode),
        setup.store,
        Renderer(make_console(file)),
        model=setup.model,
        mode=setup.tool_mode(setup.model, yes=False),
        own_permissions=True,
    )
    await chat.handle("/tools")
    assert "change  as the agent's can_use_tool decides" in file.getvalue()
    await chat.handle("/model openai:gpt-4o-mini")
    assert "its model is set in its Python code (still on scripted:scripted)" in file.getvalue()
    await chat.handle("/mode read-only")
    assert str(sys.modules[module].plain.mode) == "read-only"
