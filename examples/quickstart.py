"""A first agent: a tool, a model, a run, and its events as they stream.

With an API key in the environment (OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY) it uses that
provider; without one, the embedded local model (SmolLM2-135M, run by llama.cpp in this process), so it works
offline. Set TETHER_MODEL to any model string to choose.
"""

from __future__ import annotations

import asyncio
import os

from tether import Agent, Limits, TextDelta, ToolCallStarted, ToolResultReceived, tool

DEFAULTS = {
    "OPENAI_API_KEY": "openai:gpt-4o-mini",
    "ANTHROPIC_API_KEY": "anthropic:claude-haiku-4-5",
    "GEMINI_API_KEY": "gemini:gemini-2.5-flash",
}


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return a + b


def choose_model() -> str:
    if chosen := os.environ.get("TETHER_MODEL"):
        return chosen
    return next((model for key, model in DEFAULTS.items() if os.environ.get(key)), "local:smollm2")


async def main() -> None:
    model = choose_model()
    print(f"[model: {model}]")
    # tool_choice="required": the first answer must be a call (then the model answers); left to choose, the
    # embedded 135M model answers "17 + 25 = 42" itself, without the tool
    agent = Agent(model, tools=[add], system="Be brief.", limits=Limits(max_turns=5), tool_choice="required")
    stream = agent.stream("What is 17+25? Use the add tool.")
    async for event in stream:
        if isinstance(event, ToolCallStarted):
            print(f"-> {event.call.name}({event.call.arguments})")
        elif isinstance(event, ToolResultReceived):
            result = event.result
            repeated = result.code == "repeated"  # asked again: answered from the earlier result, not run
            print("<- (repeated: answered from the earlier result)" if repeated else f"<- {result.content}")
        elif isinstance(event, TextDelta):
            print(event.text, end="", flush=True)
    result = stream.result
    assert result is not None
    print(f"\n[{result.stop_reason}: {result.turns} turns, {result.usage.total_tokens} tokens]")


if __name__ == "__main__":
    asyncio.run(main())
