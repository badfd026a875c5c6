"""A scripted OpenAI-compatible model server for driving the real ``tether`` command.

It runs an aiohttp server on 127.0.0.1 in a thread of its own (the tests drive ``tether`` with blocking
pexpect calls meanwhile) and answers ``POST /v1/chat/completions`` with the next step of its script, streamed
as server-sent events. A step may say something, call tools, stall mid-answer until the test releases it
(waiting on an event, never a clock), fail with an HTTP status, or be computed from the request. Every
request body and its Authorization header are recorded. The usage it reports counts 100 input tokens a
message, or what ``count`` says.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

WAIT = 30.0
"""Seconds a test waits for something the server should see before it fails."""


@dataclass(frozen=True)
class Say:
    """Answer ``text``, streamed in ``pieces`` chunks; ``stall`` waits after them until released; ``then_think``
    is reasoning sent after the text, which shows where in the output the client was when the text had come;
    ``finish`` is the finish reason sent (``"length"``: the answer stopped at the output limit)."""

    text: str
    pieces: int = 3
    stall: bool = False
    then_think: str = ""
    finish: str = "stop"


@dataclass(frozen=True)
class Call:
    """Call one tool (or several, with ``more``), after optional text; arguments given as a string are sent
    as they are (broken JSON, as a model may write it); ``stall`` waits before the calls until released."""

    name: str
    arguments: dict[str, Any] | str
    text: str = ""
    more: tuple[tuple[str, dict[str, Any] | str], ...] = ()
    stall: bool = False


@dataclass(frozen=True)
class Fail:
    """Answer with an HTTP error, this body and these headers."""

    status: int
    body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)


Step = Say | Call | Fail
Responder = Callable[[dict[str, Any]], Step]


class MockLLM:
    """The server (see the module docstring). Use as a context manager: it starts and stops the thread."""

    def __init__(self, script: list[Step | Responder], *, count: Callable[[dict[str, Any]], int] | None = None) -> None:
        self.script = list(script)
        self.count = count or (lambda body: 100 * len(body["messages"]))
        """The input tokens a request is reported to have used (100 a message unless told)."""
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []
        self.stalled = threading.Event()
        """Set when a stalling step has sent its text and is waiting."""
        self._received = threading.Condition()
        self._loop = asyncio.new_event_loop()
        self._release: asyncio.Event | None = None
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name="mock-llm", daemon=True)
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> MockLLM:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(WAIT)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        with suppress(Exception):
            asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(WAIT)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(WAIT)
        self._loop.close()

    async def _start(self) -> None:
        self._release = asyncio.Event()
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def _stop(self) -> None:
        assert self._runner is not None
        await self._runner.cleanup()

    def release(self) -> None:
        """Let every stalled answer go on (and later ones not stall)."""
        if self._release is not None:
            self._loop.call_soon_threadsafe(self._release.set)

    def wait_for_requests(self, count: int) -> None:
        """Block until the server has received ``count`` requests (fails after ``WAIT`` seconds)."""
        with self._received:
            assert self._received.wait_for(lambda: len(self.requests) >= count, WAIT), (
                f"the server got {len(self.requests)} request(s), expected {count}"
            )

    def messages(self, index: int) -> list[dict[str, Any]]:
        """The messages of request ``index``."""
        messages: list[dict[str, Any]] = self.requests[index]["messages"]
        return messages

    # --- serving ------------------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        with self._received:
            index = len(self.requests)
            self.requests.append(body)
            self.authorizations.append(request.headers.get("Authorization"))
            self._received.notify_all()
        if index >= len(self.script):
            return web.json_response(
                {"error": {"message": f"mock script exhausted at request {index + 1}"}}, status=500
            )
        entry = self.script[index]
        step = entry if isinstance(entry, Say | Call | Fail) else entry(body)
        if isinstance(step, Fail):
            return web.json_response(step.body, status=step.status, headers=step.headers)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        with suppress(ConnectionResetError):  # the client went away (Ctrl-C, kill -9)
            await self._stream(response, body, step)
        return response

    async def _stream(self, response: web.StreamResponse, body: dict[str, Any], step: Say | Call) -> None:
        text = step.text
        for piece in _pieces(text, step.pieces if isinstance(step, Say) else 1):
            await _send(response, {"content": piece})
        if isinstance(step, Say) and step.then_think:
            await _send(response, {"reasoning_content": step.then_think})
        if step.stall:
            self.stalled.set()
            assert self._release is not None
            await self._release.wait()
        finish = step.finish if isinstance(step, Say) else "stop"
        if isinstance(step, Call):
            finish = "tool_calls"
            calls = ((step.name, step.arguments), *step.more)
            for index, (name, arguments) in enumerate(calls):
                call_id = f"call_{len(self.requests)}_{index}"
                raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
                head = {"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
                await _send(response, {"tool_calls": [head]})
                await _send(response, {"tool_calls": [{"index": index, "function": {"arguments": raw}}]})
        await _send(response, {}, finish)
        usage = {"prompt_tokens": self.count(body), "completion_tokens": 10, "total_tokens": 0}
        await response.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")


def _pieces(text: str, count: int) -> list[str]:
    if not text:
        return []
    size = max(1, -(-len(text) // count))
    return [text[i : i + size] for i in range(0, len(text), size)]


async def _send(response: web.StreamResponse, delta: dict[str, Any], finish: str | None = None) -> None:
    chunk = {"id": "mock", "object": "chat.completion.chunk", "model": "mock", "choices": [
        {"index": 0, "delta": delta, "finish_reason": finish}
    ]}  # fmt: skip
    await response.write(f"data: {json.dumps(chunk)}\n\n".encode())


@contextmanager
def serving(script: list[Step | Responder]) -> Iterator[MockLLM]:
    with MockLLM(script) as server:
        yield server
