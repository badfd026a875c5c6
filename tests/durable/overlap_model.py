"""An OpenAI-compatible model server that records how many requests each worker has in flight at once.

A worker is told apart by the ``X-Worker`` header its agent sends (each worker's ``agent.toml`` names its own).
A request is in flight from its arrival until its answer is sent or its client went away; the answer (``echo:
PROMPT``) is streamed in pieces a little apart, so that runs overlap as they would with a real model and a
client that was killed is noticed at the next piece.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from contextlib import suppress
from typing import Any

from aiohttp import web

PIECES = 6
PAUSE = 0.05
"""Seconds between two pieces of an answer."""


class OverlapModel:
    """The server, in a thread of its own; use as a context manager."""

    def __init__(self) -> None:
        self.most: Counter[str] = Counter()
        """The most requests each worker had in flight at once."""
        self.most_overall = 0
        self.asked: list[tuple[str, str]] = []
        """(worker, prompt) of every request, in arrival order."""
        self._in_flight: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name="overlap-model", daemon=True)
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> OverlapModel:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(30)
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._runner is not None
        with suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        self._loop.close()

    def prompts(self) -> Counter[str]:
        with self._lock:
            return Counter(prompt for _, prompt in self.asked)

    async def _start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        worker = request.headers.get("X-Worker", "-")
        body = await request.json()
        prompt = str(body["messages"][-1]["content"])
        with self._lock:
            self.asked.append((worker, prompt))
            self._in_flight[worker] += 1
            self.most[worker] = max(self.most[worker], self._in_flight[worker])
            self.most_overall = max(self.most_overall, sum(self._in_flight.values()))
        try:
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            with suppress(ConnectionResetError):  # the worker was killed
                await self._answer(response, f"echo: {prompt}")
            return response
        finally:
            with self._lock:
                self._in_flight[worker] -= 1

    async def _answer(self, response: web.StreamResponse, text: str) -> None:
        size = -(-len(text) // PIECES)
        for start in range(0, len(text), size):
            await _send(response, {"content": text[start : start + size]})
            await asyncio.sleep(PAUSE)
        await _send(response, {}, "stop")
        usage = {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
        await response.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")


async def _send(response: web.StreamResponse, delta: dict[str, Any], finish: str | None = None) -> None:
    chunk = {"id": "m", "object": "chat.completion.chunk", "model": "mock", "choices": [
        {"index": 0, "delta": delta, "finish_reason": finish}
    ]}  # fmt: skip
    await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
