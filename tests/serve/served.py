"""A served app on a real socket, and a streamed run read as a client reads it: the tests of ``tether.serve``
talk HTTP to uvicorn on 127.0.0.1 with aiohttp, never to the app in-process."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import uvicorn
from starlette.applications import Starlette

from tether.serve.api import Api
from tether.serve.runs import ServerRun
from tether.serve.security import Caller


class Served:
    """A running server: its base URL and its app's API (to reach a run's task, as a host would)."""

    def __init__(self, base: str, app: Starlette) -> None:
        self.base = base
        self.app = app

    @property
    def api(self) -> Api:
        api: Api = self.app.state.tether
        return api

    def run(self, run_id: str) -> ServerRun:
        return self.api.runs.get(run_id, Caller("any", local=True))


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = asyncio.Event()

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        self.ready.set()


@contextlib.asynccontextmanager
async def served(app: Starlette, *, root: str = "") -> AsyncIterator[Served]:
    """``app`` served by uvicorn on a free port of 127.0.0.1 until the block ends."""
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, log_level="warning", lifespan="on", timeout_graceful_shutdown=5
    )
    server = _Server(config)
    task = asyncio.get_running_loop().create_task(server.serve())
    ready = asyncio.get_running_loop().create_task(server.ready.wait())
    await asyncio.wait([task, ready], return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        ready.cancel()
        task.result()
        raise RuntimeError("the server did not start")
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Served(f"http://127.0.0.1:{port}{root}", app)
    finally:
        server.should_exit = True
        await task


def parse_sse(text: str) -> list[tuple[str | None, str]]:
    """``(event name, data)`` of each server-sent event of ``text``."""
    events = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        name = None
        data = []
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
        events.append((name, "\n".join(data)))
    return events


def json_events(text: str) -> list[dict[str, Any]]:
    """The JSON events of a ``POST /api/runs`` stream, each checked to be named by its kind."""
    events = []
    for name, data in parse_sse(text):
        event = json.loads(data)
        assert event["kind"] == name
        events.append(event)
    return events


async def run_events(
    session: aiohttp.ClientSession, base: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """A whole run through ``POST /api/runs``: its events."""
    async with session.post(base + "/api/runs", json=body, headers=headers or {}) as response:
        assert response.status == 200, await response.text()
        assert response.headers["content-type"].startswith("text/event-stream")
        return json_events(await response.text())


async def read_until(response: aiohttp.ClientResponse, kind: str) -> list[dict[str, Any]]:
    """The events of a stream read until one of ``kind`` (the rest left unread)."""
    buffer = ""
    seen: list[dict[str, Any]] = []
    async for chunk in response.content.iter_any():
        buffer += chunk.decode()
        while "\n\n" in buffer:
            block, buffer = buffer.split("\n\n", 1)
            seen.extend(json_events(block + "\n\n"))
            if seen and seen[-1]["kind"] == kind:
                return seen
    raise AssertionError(f"the stream ended before a {kind} event: {[e['kind'] for e in seen]}")
