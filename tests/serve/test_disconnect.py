"""What a client that goes does to its run, over real sockets: cancelled by default with a valid transcript saved
(every tool call answered), finished and saved with ``on_disconnect="detach"``; and a client that stops reading
is dropped without slowing its run or any other stream."""

from __future__ import annotations

import asyncio
import json
import socket
from typing import Any

import aiohttp

from tether import Agent, tool
from tether.messages import ToolResult, transcript_problems
from tether.providers import ScriptedProvider
from tether.providers.scripted import call, reply
from tether.serve.security import Caller
from tether.sessions import MemorySessionStore

from .served import read_until, run_events, served


def waiting_agent(release: asyncio.Event) -> Agent[Any, Any]:
    """An agent whose one tool call waits for ``release``, then answers."""

    @tool
    async def wait_for_it() -> str:
        """Wait until released."""
        await release.wait()
        return "released"

    model = ScriptedProvider([call("wait_for_it", {}), reply("done")])
    return Agent(model, tools=[wait_for_it], store=MemorySessionStore())


async def test_a_client_that_disconnects_mid_run_cancels_it_and_its_session_keeps_a_valid_transcript() -> None:
    agent = waiting_agent(asyncio.Event())  # never released: only a cancel ends the call
    async with served(agent.to_asgi()) as server, aiohttp.ClientSession() as http:
        async with http.post(server.base + "/api/runs", json={"prompt": "go"}) as response:
            seen = await read_until(response, "tool_call_started")
            response.close()  # the client goes, mid-call
        run = server.run(seen[0]["run_id"])
        await run.ended()
        session = await agent.store.load(seen[0]["session_id"])  # type: ignore[union-attr]
    assert run.status == "cancelled"
    assert transcript_problems(session.messages) == []
    results = [p for m in session.messages for p in m.parts if isinstance(p, ToolResult)]
    assert [r.call_id for r in results] == [seen[-1]["call"]["id"]]
    assert results[0].is_error


async def test_with_detach_a_run_whose_client_went_finishes_and_is_saved() -> None:
    release = asyncio.Event()
    agent = waiting_agent(release)
    async with served(agent.to_asgi(on_disconnect="detach")) as server, aiohttp.ClientSession() as http:
        async with http.post(server.base + "/api/runs", json={"prompt": "go"}) as response:
            seen = await read_until(response, "tool_call_started")
            response.close()
        run = server.run(seen[0]["run_id"])
        await run.alone()  # the server saw the client go
        assert run.running
        release.set()
        await run.ended()
        session = await agent.store.load(seen[0]["session_id"])  # type: ignore[union-attr]
    assert run.status == "complete"
    assert session.messages[-1].text == "done"
    assert transcript_problems(session.messages) == []


async def test_a_client_that_stops_reading_is_dropped_and_never_delays_another_stream() -> None:
    chunk = "x" * 65536
    flood = ScriptedProvider([reply(chunk * 256, chunk_size=65536, gap=0.001)])  # 16 MB: thrice what can be buffered
    quick = ScriptedProvider([reply("quick answer")])
    flooding = Agent(flood, store=MemorySessionStore())
    app = flooding.to_asgi(models={"scripted:quick": Agent(quick)}, stream_buffer=16)
    async with served(app) as server, aiohttp.ClientSession() as http:
        host, port = server.base.removeprefix("http://").split(":")
        slow = socket.socket()
        slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # its buffer small and fixed: it fills
        slow.connect((host, int(port)))
        reader, writer = await asyncio.open_connection(sock=slow)
        body = json.dumps({"prompt": "flood me"}).encode()
        writer.write(
            f"POST /api/runs HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode() + body
        )  # fmt: skip
        await reader.readuntil(b"event: run_started\ndata: ")
        run_id = json.loads(await reader.readline())["run_id"]  # from here on, this client reads nothing
        events = await run_events(http, server.base, {"prompt": "hi", "model": "scripted:quick"})
        flooded = server.run(run_id)
        await flooded.ended()
        writer.close()
    assert events[-1]["result"]["text"] == "quick answer"
    assert flooded.status == "cancelled"


async def test_a_use_chat_client_that_goes_mid_run_leaves_its_chat_saved_with_a_valid_transcript() -> None:
    agent = waiting_agent(asyncio.Event())
    body = {"id": "c1", "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "go"}]}]}
    async with served(agent.to_asgi()) as server, aiohttp.ClientSession() as http:
        async with http.post(server.base + "/api/chat", json=body) as response:
            async for line in response.content:
                if b'"tool-input-available"' in line:
                    break
            response.close()
        (run,) = [server.run(r["run_id"]) for r in server.api.runs.listing(Caller("any", local=True))]
        await run.ended()
        session = await agent.store.load("local-chat-c1")  # type: ignore[union-attr]
    assert run.status == "cancelled"
    assert transcript_problems(session.messages) == []
    assert session.messages[0].text == "go"
