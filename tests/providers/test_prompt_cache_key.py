"""OpenAI's ``prompt_cache_key``: a run in a session sends its session id, a run without one a digest of its agent's
stable prefix, on Chat Completions and Responses alike, over loopback HTTP; servers of other profiles get none."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from tests.providers.conftest import Serve
from tether import Agent, tool
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.openai_responses import OpenAIResponsesProvider
from tether.providers.registry import PROFILES
from tether.sessions.memory import MemorySessionStore


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def chat_answer(body: dict[str, Any]) -> dict[str, Any]:
    message = {"role": "assistant", "content": "done"}
    usage = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}
    return {"id": "c", "object": "chat.completion", "model": body["model"], "usage": usage,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}  # fmt: skip


def responses_answer(body: dict[str, Any]) -> dict[str, Any]:
    text = {"type": "output_text", "text": "done", "annotations": []}
    item = {"type": "message", "id": "m", "role": "assistant", "status": "completed", "content": [text]}
    usage = {"input_tokens": 10, "output_tokens": 2, "total_tokens": 12}
    return {"id": "r", "object": "response", "status": "completed", "model": body["model"], "output": [item],
            "usage": usage}  # fmt: skip


async def recording(serve: Serve, path: str, answer: Any) -> tuple[str, list[dict[str, Any]]]:
    bodies: list[dict[str, Any]] = []

    async def handle(request: web.Request) -> web.Response:
        bodies.append(await request.json())
        return web.json_response(answer(bodies[-1]))

    app = web.Application()
    app.router.add_post(path, handle)
    return await serve(app) + "/v1", bodies


async def test_chat_completions_sends_the_session_id_or_the_agents_prefix_digest(serve: Serve) -> None:
    url, bodies = await recording(serve, "/v1/chat/completions", chat_answer)
    provider = OpenAIChatProvider("gpt-4o", base_url=url, api_key="k", stream=False)
    agent = Agent(provider, tools=[add], system="Be brief.", store=MemorySessionStore())
    other = Agent(provider, tools=[add], system="Be thorough.")

    await agent.run("hi", session="team-42")
    await agent.run("hi")
    await agent.run("again")
    await other.run("hi")

    keys = [body["prompt_cache_key"] for body in bodies]
    assert keys[0] == "team-42"
    assert keys[1] == keys[2], "the runs of one agent share its prefix's key"
    assert keys[1].startswith("tether-")
    assert keys[3] != keys[1], "another system prompt, another key"


async def test_responses_sends_the_session_id_and_a_long_one_as_its_digest(serve: Serve) -> None:
    url, bodies = await recording(serve, "/v1/responses", responses_answer)
    agent = Agent(OpenAIResponsesProvider("gpt-4o", base_url=url, api_key="k", stream=False), system="Be brief.",
                  store=MemorySessionStore())  # fmt: skip

    await agent.run("hi", session="s1")
    await agent.run("hi", session="x" * 100)

    assert bodies[0]["prompt_cache_key"] == "s1"
    long_key = bodies[1]["prompt_cache_key"]
    assert long_key.startswith("tether-")
    assert len(long_key) <= 64


async def test_servers_of_other_profiles_get_no_key(serve: Serve) -> None:
    url, bodies = await recording(serve, "/v1/chat/completions", chat_answer)
    provider = OpenAIChatProvider("qwen3", base_url=url, profile=PROFILES["vllm"], stream=False)

    await Agent(provider, system="Be brief.").run("hi")

    assert "prompt_cache_key" not in bodies[0]
