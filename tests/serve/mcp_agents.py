"""The agents ``tether mcp serve --agent`` serves in tests/serve/test_mcp_server.py: scripted models that answer
from the last message, so one agent serves any number of calls.

``MCP_AGENT_LOG`` names a file the slow tool writes its markers to (``started``, ``cancelled``);
``MCP_AGENT_STORE`` the SQLite file of the agent's sessions.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from pydantic import BaseModel

from tether import Agent, tool
from tether.errors import ProviderUnavailable
from tether.output import OUTPUT_TOOL
from tether.providers import ScriptedProvider
from tether.providers.base import Request
from tether.providers.scripted import Step, call, fail, reply
from tether.sessions import SQLiteSessionStore

SECRET = "sk-mcp-test-0123456789abcdef"
"""A key the agent knows (``secrets=``): the model's answer quotes it, the client must see it masked."""


def _mark(marker: str) -> None:
    with Path(os.environ["MCP_AGENT_LOG"]).open("a") as file:
        file.write(marker + "\n")


@tool(read_only=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(read_only=True)
async def slow() -> str:
    """Take a long time: until cancelled, in practice."""
    _mark("started")
    try:
        await asyncio.sleep(600)
    except asyncio.CancelledError:
        _mark("cancelled")
        raise
    return "finished"


def answer(request: Request) -> Step:
    """The model: a tool's result is answered with it; a prompt says what to do."""
    last = request.messages[-1]
    if last.role == "tool":
        return reply(f"the tool said {last.tool_results[0].content}")
    prompt = last.text
    if prompt == "add":
        return call("add", {"a": 2, "b": 3})
    if prompt == "slow":
        return call("slow", {})
    if prompt == "fail":
        return fail(ProviderUnavailable("the model's server is down"))
    if prompt == "leak":
        return reply(f"the key is {SECRET}")
    if prompt == "count":
        asked = sum(1 for message in request.messages if message.role == "user")
        return reply(f"you asked {asked} times")
    return reply(f"echo: {prompt}")


def _store() -> SQLiteSessionStore | None:
    path = os.environ.get("MCP_AGENT_STORE")
    return SQLiteSessionStore(path) if path else None


agent = Agent(
    ScriptedProvider([answer], repeat_last=True),
    name="helper bot",
    tools=[add, slow],
    secrets=[SECRET],
    store=_store(),
)


class Weather(BaseModel):
    city: str
    celsius: int


def forecast(request: Request) -> Step:
    """The typed agent's model: the output tool at once; asked to leak, with the key as the city."""
    city = SECRET if request.messages[-1].text == "leak" else "Oslo"
    return call(OUTPUT_TOOL, {"city": city, "celsius": -3})


typed = Agent(ScriptedProvider([forecast], repeat_last=True), name="weather", output_type=Weather, secrets=[SECRET])


def tags(request: Request) -> Step:
    """The list agent's model: its output, a list, in the output tool's ``result``."""
    return call(OUTPUT_TOOL, {"result": ["red", "green"]})


listed = Agent(ScriptedProvider([tags], repeat_last=True), name="tags", output_type=list[str])
