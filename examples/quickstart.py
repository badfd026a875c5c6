"""A first agent: a tool, a model, a run, and its events as they stream.

The model here is tether's ScriptedProvider, a deterministic stand-in that needs no network and no API key;
swap in a model string such as "openai:gpt-4o-mini" once that provider is configured.
"""

from __future__ import annotations

import asyncio

from tether import Agent, Limits, tool
from tether.events import TextDelta, ToolCallStarted, ToolResultReceived
from tether.providers.scripted import ScriptedProvider, call, reply


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return a + b


async def main() -> None:
    model = ScriptedProvider([call("add", {"a": 17, "b": 25}), reply("17 + 25 = 42.", chunk_size=4)])
    agent = Agent(model, tools=[add], system="Be brief.", limits=Limits(max_turns=5))
    stream = agent.stream("What is 17 + 25?")
    async for event in stream:
        if isinstance(event, ToolCallStarted):
            print(f"-> {event.call.name}({event.call.arguments})")
        elif isinstance(event, ToolResultReceived):
            print(f"<- {event.result.content}")
        elif isinstance(event, TextDelta):
            print(event.text, end="", flush=True)
    result = stream.result
    assert result is not None
    print(f"\n[{result.stop_reason}: {result.turns} turns, {result.usage.total_tokens} tokens]")


if __name__ == "__main__":
    asyncio.run(main())
