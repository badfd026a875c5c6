"""The sequential benchmark workload run through another agent framework; prints its figures as JSON.

Run (in the peers' own environment): python bench/peers/peer_workload.py FRAMEWORK BASE_URL
FRAMEWORK is pydantic-ai, openai-agents or langgraph. Same workload as bench/workload.py's ``sequential``:
40 runs of 5 tool-call turns and a final answer, one at a time, after one warm-up run.
"""

from __future__ import annotations

import asyncio
import json
import resource
import sys
import time
from collections.abc import Awaitable, Callable

RUNS = 40
STEPS_PER_RUN = 6
MODEL = "tools-5"
PROMPT = "Add the numbers."


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def pydantic_ai(base_url: str) -> Callable[[], Awaitable[str]]:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=base_url, api_key="x"))
    agent = Agent(model, tools=[add])

    async def run() -> str:
        return str((await agent.run(PROMPT)).output)

    return run


def openai_agents(base_url: str) -> Callable[[], Awaitable[str]]:
    from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    model = OpenAIChatCompletionsModel(model=MODEL, openai_client=AsyncOpenAI(base_url=base_url, api_key="x"))
    agent = Agent(name="bench", instructions="", tools=[function_tool(add)], model=model)

    async def run() -> str:
        return str((await Runner.run(agent, PROMPT, max_turns=20)).final_output)

    return run


def langgraph(base_url: str) -> Callable[[], Awaitable[str]]:
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import create_react_agent

    graph = create_react_agent(ChatOpenAI(model=MODEL, base_url=base_url, api_key="x"), [tool(add)])

    async def run() -> str:
        state = await graph.ainvoke({"messages": [("user", PROMPT)]}, {"recursion_limit": 50})
        return str(state["messages"][-1].content)

    return run


FRAMEWORKS = {"pydantic-ai": pydantic_ai, "openai-agents": openai_agents, "langgraph": langgraph}


async def main(framework: str, base_url: str) -> dict[str, object]:
    started_import = time.perf_counter()
    run = FRAMEWORKS[framework](base_url)
    import_s = time.perf_counter() - started_import
    await run()
    failures = 0
    before = resource.getrusage(resource.RUSAGE_SELF)
    wall = time.perf_counter()
    for _ in range(RUNS):
        failures += not (await run()).endswith("is done.")
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return {
        "framework": framework,
        "cpu_ms_per_step": cpu * 1000 / (RUNS * STEPS_PER_RUN),
        "wall_s": wall,
        "failures": failures,
        "setup_and_import_s": import_s,
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2]))))
