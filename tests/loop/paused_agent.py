"""The agent of the pausing tests, the same in the test's process and in the process that resumes its run.

``python -m tests.loop.paused_agent`` reads a paused run's state and the decisions (JSON, one object on stdin),
resumes the run with this agent (whose scripted model answers once) and prints what happened as JSON: the
transcript, the tools that ran here and the last request the model received.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import msgspec

from tether import Agent, Limits, Tool, tool
from tether.messages import messages_to_jsonable
from tether.paused import Decision
from tether.providers.scripted import ScriptedProvider, Step, call, parallel, reply

RAN: list[str] = []
"""What the tools of this process ran, in order."""


@tool(approval=True)
def delete(path: str) -> str:
    """Delete a file."""
    RAN.append(f"delete {path}")
    return f"deleted {path}"


@tool(external=True)
def page_title(url: str) -> str:
    """Open a page in the user's browser and return its title."""
    raise AssertionError("an external tool's body never runs")


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    RAN.append(f"add {a} {b}")
    return a + b


@tool
def title_here(url: str) -> str:
    """What an inline run's ``page_title`` gives: the same title, from a tool that runs."""
    return "Example Domain"


TURN = parallel(
    call("delete", {"path": "old.txt"}, id="c1"),
    call("page_title", {"url": "https://example.com"}, id="c2"),
    call("add", {"a": 2, "b": 3}, id="c3"),
)
"""The turn that pauses: an approval, an external call and an ordinary one."""


def agent(script: list[Step], *, inline: bool = False, limits: Limits | None = None) -> Agent[Any, Any]:
    """The agent: with ``inline``, its approvals asked of a callback that says yes and its external tool a tool
    that runs (under the same name), so that its run is the one a resumed run must equal."""
    external: Tool = page_title
    if inline:
        external = Tool.from_function(title_here.function, name="page_title", description=page_title.description)
    return Agent(
        ScriptedProvider(script),
        tools=[delete, external, add],
        system="Be brief.",
        approve=(lambda call, reason: True) if inline else None,
        limits=limits,
    )


async def resume_here(text: str) -> dict[str, Any]:
    """Resume the state and decisions of ``text`` with an agent whose model answers once."""
    given = json.loads(text)
    decisions = msgspec.convert(given["decisions"], dict[str, Decision])
    resumer = agent([reply("Deleted old.txt; the page is Example Domain; 2+3=5.")])
    result = await resumer.resume(given["state"], decisions)
    model = resumer.provider
    assert isinstance(model, ScriptedProvider)
    return {
        "stop_reason": str(result.stop_reason),
        "run_id": result.run_id,
        "text": result.text,
        "messages": messages_to_jsonable(result.messages),
        "ran": RAN,
        "requests": len(model.requests),
        "last_request": messages_to_jsonable(model.requests[-1].messages),
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(resume_here(sys.stdin.read()))))
