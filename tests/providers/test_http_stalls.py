"""The request timeout over real sockets: what it bounds (each wait for the provider) and what it does not
(a stream's whole length, the consumer's own time), kept for many requests at once on one loop timer.

The server is the misbehaving loopback server of ``test_http_faults``; here it also paces some answers with
short sleeps, to be a slow but steady provider.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from tests.providers.test_http_faults import Exchange, Serve, chunk, completion, provider, read_texts, serve, stream_of
from tether.alarms import Deadline
from tether.errors import RequestTimeout
from tether.events import TextDelta
from tether.messages import Message
from tether.providers.base import Request

__all__ = ["serve"]  # the fixture, used by name


async def test_a_slow_but_steady_stream_longer_than_the_timeout_does_not_time_out(serve: Serve) -> None:
    pieces = [f"p{n} " for n in range(8)]

    async def respond(exchange: Exchange) -> None:
        await exchange.sse_head()
        for data in stream_of(*pieces):
            await exchange.event(data)
            await asyncio.sleep(0.08)  # each gap well inside the timeout, the whole far beyond it
        await exchange.end()

    server = await serve(respond)
    texts: list[str] = []
    await read_texts(provider(server.base_url), texts, timeout=0.3)
    assert texts == pieces
    assert server.count == 1


async def test_the_consumers_own_time_between_events_is_not_a_stall(serve: Serve) -> None:
    async def respond(exchange: Exchange) -> None:
        await exchange.sse(stream_of("one ", "two ", "three"))

    server = await serve(respond)
    texts: list[str] = []
    async for event in provider(server.base_url).stream(Request((Message.user("hi"),), timeout=0.1)):
        if isinstance(event, TextDelta):
            texts.append(event.text)
            await asyncio.sleep(0.25)  # the consumer works longer than the timeout: the provider is not waited on
    assert texts == ["one ", "two ", "three"]
    assert server.count == 1


async def test_a_whole_answer_stalling_after_its_head_is_retried(serve: Serve) -> None:
    body = json.dumps(completion("Whole")).encode()

    async def respond(exchange: Exchange) -> None:
        if exchange.number == 1:
            await exchange.head(200, {"Content-Type": "application/json", "Content-Length": str(len(body))})
            await exchange.raw(body[:10])
            await exchange.stall()
            return
        await exchange.body(200, body, "application/json")

    server = await serve(respond)
    texts: list[str] = []
    await read_texts(provider(server.base_url, stream=False), texts, timeout=0.2)
    assert texts == ["Whole"]
    assert server.count == 2


async def test_a_whole_body_already_there_is_read_without_a_deadline_and_a_slow_one_with_one_per_wait(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A body that came with its head is taken as it is: the request sets one deadline (the wait for the
    head). A body still coming is waited for piece by piece, each wait bounded, the whole not."""
    body = json.dumps(completion("Whole")).encode()
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()

    async def respond(exchange: Exchange) -> None:
        if exchange.number == 1:
            await exchange.raw(head + body)  # one write: head and body arrive together
            return
        await exchange.raw(head + body[:10])
        for start in range(10, len(body), 40):
            await asyncio.sleep(0.08)  # each gap inside the timeout, the whole beyond it
            await exchange.raw(body[start : start + 40])

    server = await serve(respond)
    waits: list[Deadline] = []
    original = Deadline.start

    def counted(stall: Deadline, seconds: float | None = None) -> None:
        waits.append(stall)
        original(stall, seconds)

    monkeypatch.setattr(Deadline, "start", counted)
    for number in (1, 2):
        texts: list[str] = []
        waits.clear()
        await read_texts(provider(server.base_url, stream=False), texts, timeout=0.2)
        assert texts == ["Whole"]
        if number == 1:
            assert len(waits) == 1, "the wait for the head only"
        else:
            assert len(waits) > 2
    assert server.count == 2


async def test_a_whole_answer_that_never_comes_times_out_with_the_timeout_named(serve: Serve) -> None:
    async def respond(exchange: Exchange) -> None:
        await exchange.stall()

    server = await serve(respond)
    chat = provider(server.base_url, stream=False)
    with pytest.raises(RequestTimeout) as caught:
        await read_texts(chat, [], timeout=0.1)
    assert caught.value.code == "timeout"
    assert str(caught.value) == "[timeout] openai-compatible sent nothing for 0.1 s before an answer"
    assert server.count == 4  # the first attempt and the default three retries


async def test_concurrent_requests_keep_their_own_deadlines(serve: Serve) -> None:
    """One request stalls, the others stream slowly but steadily: only the stalled one times out."""

    async def respond(exchange: Exchange) -> None:
        await exchange.sse_head()
        if exchange.seen.json()["messages"][-1]["content"] == "stall":
            await exchange.event(chunk("stuck"))
            await exchange.stall()
            return
        for data in stream_of("a", "b", "c", "d", "e"):
            await exchange.event(data)
            await asyncio.sleep(0.06)
        await exchange.end()

    server = await serve(respond)
    chat = provider(server.base_url)

    async def ask(prompt: str) -> list[str]:
        texts: list[str] = []
        async for event in chat.stream(Request((Message.user(prompt),), timeout=0.2)):
            if isinstance(event, TextDelta):
                texts.append(event.text)
        return texts

    results = await asyncio.gather(ask("stall"), *(ask(f"steady {n}") for n in range(5)), return_exceptions=True)
    assert isinstance(results[0], RequestTimeout)
    assert "in the middle of the stream" in str(results[0])
    assert results[1:] == [["a", "b", "c", "d", "e"]] * 5


async def test_a_cancellation_from_elsewhere_stays_a_cancellation(serve: Serve) -> None:
    started = asyncio.Event()

    async def respond(exchange: Exchange) -> None:
        started.set()
        await exchange.stall()

    server = await serve(respond)
    reading = asyncio.ensure_future(read_texts(provider(server.base_url), [], timeout=30))
    await started.wait()
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    assert server.count == 1  # not taken for a timeout, not retried


async def test_a_long_stream_arms_a_handful_of_loop_timers_not_one_per_chunk(serve: Serve) -> None:
    """The timeout is kept on a shared, lazily re-armed alarm: a stream of 200 chunks costs the event loop
    a few timers (the first request arms the alarm), not one or more per chunk."""
    pieces = [f"{n} " for n in range(200)]

    async def respond(exchange: Exchange) -> None:
        await exchange.sse_head()
        for data in stream_of(*pieces):
            await exchange.event(data)
            await asyncio.sleep(0)  # each chunk its own socket read
        await exchange.end()

    server = await serve(respond)
    chat = provider(server.base_url)
    await read_texts(chat, [], timeout=30)  # the connection and the alarm now exist
    loop = asyncio.get_running_loop()
    armed: list[Any] = []
    call_at = loop.call_at

    def counting_call_at(*args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        armed.append(args)
        return call_at(*args, **kwargs)

    loop.call_at = counting_call_at  # type: ignore[method-assign,assignment]
    try:
        texts: list[str] = []
        await read_texts(chat, texts, timeout=30)
    finally:
        del loop.call_at
    assert texts == pieces
    assert len(armed) < 5, f"{len(armed)} loop timers for one stream of {len(pieces)} chunks"
