"""Many streams at once: every one of 50 concurrent chats streams to its end (``bench/serve_load.py`` measures
200, their time and their memory)."""

from __future__ import annotations

import asyncio

import aiohttp

from tether import Agent
from tether.providers import ScriptedProvider
from tether.providers.base import Request
from tether.providers.scripted import Step, reply
from tether.sessions import MemorySessionStore

from .served import run_events, served

STREAMS = 50


def echo(request: Request) -> Step:
    """Each chat's answer names its prompt, in four streamed pieces."""
    return reply(f"answer to {request.messages[-1].text}", chunk_size=4)


async def test_fifty_concurrent_streaming_chats_all_complete_with_their_own_answers() -> None:
    agent = Agent(ScriptedProvider([echo] * STREAMS), store=MemorySessionStore())
    connector = aiohttp.TCPConnector(limit=STREAMS)
    async with served(agent.to_asgi()) as server, aiohttp.ClientSession(connector=connector) as http:
        chats = await asyncio.gather(*(run_events(http, server.base, {"prompt": f"chat {i}"}) for i in range(STREAMS)))
        async with http.get(server.base + "/api/runs") as response:
            listed = (await response.json())["runs"]
    for i, events in enumerate(chats):
        assert events[-1]["kind"] == "run_completed"
        assert "".join(e["text"] for e in events if e["kind"] == "text_delta") == f"answer to chat {i}"
    assert len({events[0]["session_id"] for events in chats}) == STREAMS
    assert sorted(run["status"] for run in listed) == ["complete"] * STREAMS
