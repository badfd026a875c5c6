"""A provider's ``stream()`` is the HTTP client's iterator as it is (``HttpClient.answer``): nothing is sent
before the first event is asked for, a non-streamed answer is asked for once, and a run waiting for its answer
keeps no generator of the provider's alive (each would hold a frame, an ``asend`` object and a weak reference
in asyncio's set of async generators, per run in flight: ``bench/objects.py``).

Over real sockets, with the loopback server of ``test_http_faults``.
"""

from __future__ import annotations

import asyncio
import gc
import json
import types
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.providers.test_http_faults import Exchange, Serve, completion, provider, serve, stream_of
from tether import Agent
from tether.errors import BadRequest
from tether.events import StreamEnd, StreamStart, TextDelta
from tether.messages import Message
from tether.providers.base import Provider, Request
from tether.providers.gemini import GeminiProvider

__all__ = ["serve"]  # the fixture, used by name

HI = Request((Message.user("hi"),), timeout=30)


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
async def test_a_stream_closed_before_its_first_event_sends_no_request(serve: Serve, streamed: bool) -> None:
    async def respond(exchange: Exchange) -> None:
        await exchange.json(200, completion("never asked"))

    server = await serve(respond)
    chat = provider(server.base_url, stream=streamed)
    events = chat.stream(HI)
    await events.aclose()  # type: ignore[attr-defined]
    with pytest.raises(StopAsyncIteration):
        await anext(events)
    assert server.count == 0


async def test_a_whole_answer_is_handed_out_event_by_event_and_then_ends(serve: Serve) -> None:
    async def respond(exchange: Exchange) -> None:
        await exchange.json(200, completion("Whole"))

    server = await serve(respond)
    events = [event async for event in provider(server.base_url, stream=False).stream(HI)]
    assert type(events[0]) is StreamStart
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Whole"]
    assert type(events[-1]) is StreamEnd
    assert server.count == 1


async def test_a_failed_whole_answer_is_not_asked_for_again_by_the_next_ask(serve: Serve) -> None:
    async def respond(exchange: Exchange) -> None:
        await exchange.json(400, {"error": {"message": "no such model", "type": "invalid_request_error"}})

    server = await serve(respond)
    events = provider(server.base_url, stream=False).stream(HI)
    with pytest.raises(BadRequest):
        await anext(events)
    with pytest.raises(StopAsyncIteration):
        await anext(events)
    assert server.count == 1


def provider_generators() -> dict[int, str]:
    """The async generators alive whose code is a provider's (``tether/providers/``): id -> name."""
    gc.collect()
    return {
        id(obj): obj.ag_code.co_qualname
        for obj in gc.get_objects()
        if isinstance(obj, types.AsyncGeneratorType) and "/tether/providers/" in obj.ag_code.co_filename
    }


def gemini_answer(text: str) -> dict[str, Any]:
    """A Gemini answer (whole, or one chunk of a stream)."""
    candidate = {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}
    return {"candidates": [candidate], "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 1}}


async def answer_chat(exchange: Exchange, streamed: bool) -> None:
    if streamed:
        await exchange.sse(stream_of("Done"))
    else:
        await exchange.json(200, completion("Done"))


async def answer_gemini(exchange: Exchange, streamed: bool) -> None:
    if streamed:
        await exchange.sse([json.dumps(gemini_answer("Done"))])
    else:
        await exchange.json(200, gemini_answer("Done"))


PROVIDERS: dict[str, tuple[Callable[[str, bool], Provider], Callable[[Exchange, bool], Awaitable[None]]]] = {
    "chat": (lambda url, streamed: provider(url, stream=streamed), answer_chat),
    "gemini": (lambda url, streamed: GeminiProvider("gemini-2.5-flash", base_url=url, api_key="k", stream=streamed),
               answer_gemini),
}  # fmt: skip


@pytest.mark.parametrize("name", PROVIDERS)
@pytest.mark.parametrize(
    ("streamed", "expected"), [(True, ["HttpClient._stream"]), (False, [])], ids=["streamed", "whole"]
)
async def test_a_run_waiting_for_its_answer_keeps_no_generator_of_the_providers(
    serve: Serve, streamed: bool, expected: list[str], name: str
) -> None:
    """Streamed: only the HTTP client's reader of the stream; whole: none at all (the wait is a coroutine)."""
    make, answer_with = PROVIDERS[name]
    asked, answer = asyncio.Event(), asyncio.Event()

    async def respond(exchange: Exchange) -> None:
        if exchange.number > 1:  # the first run makes the loop's pooled session (and its closer) beforehand
            asked.set()
            await exchange.wait_for(answer)
        await answer_with(exchange, streamed)

    server = await serve(respond)
    agent = Agent(make(server.base_url, streamed))
    assert (await agent.run("hi")).text == "Done"
    before = provider_generators()  # the session closers of this loop and earlier ones: not the run's
    run = asyncio.ensure_future(agent.run("hi"))
    await asyncio.wait_for(asked.wait(), 30)
    await asyncio.sleep(0.01)  # the client is now waiting for the answer's head
    waiting = [name for key, name in provider_generators().items() if key not in before]
    answer.set()
    result = await run
    assert result.text == "Done"
    assert waiting == expected
