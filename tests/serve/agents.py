"""Agents that tests serve by ``module:attr`` (``tether serve --agent tests.serve.agents:agent``)."""

from __future__ import annotations

from tether import Agent, tool
from tether.providers import ScriptedProvider
from tether.providers.scripted import call, reply


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


agent = Agent(ScriptedProvider([call("add", {"a": 2, "b": 3}), reply("5")] * 50), tools=[add], name="adder")
