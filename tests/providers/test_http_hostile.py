"""Hostile answers over real loopback sockets: bodies that are not UTF-8, whole bodies and streams that never
end, one line that never ends. Each ends with ``invalid_response`` naming the limit, is not retried, and
holds at most about the cap in memory while the server would go on sending (tracemalloc's peak, never time).

The server is a bare asyncio one, so that it can send without end: it writes until the client hangs up.
"""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from tether.errors import ConfigInvalid, InvalidResponse
from tether.messages import Message
from tether.providers.base import Request
from tether.providers.http import HttpClient, ResponseLimits, RetryPolicy
from tether.providers.openai_chat import OpenAIChatProvider

MIB = 1024 * 1024
RETRY_AT_ONCE = RetryPolicy(max_retries=3, base_delay=0.0)
TEXT_CHUNK = b'data: {"id":"c1","model":"m","choices":[{"index":0,"delta":{"content":"and on"}}]}\n\n'

Answer = Callable[[asyncio.StreamWriter], Awaitable[None]]


class Server:
    """Answers every POST with ``answer``; counts requests and the bytes it managed to send."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests = 0
        self.url = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    ),
                    0,
                )
                await reader.readexactly(length)
                self.requests += 1
                await self.answer(writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Answer], Awaitable[Server]]]:
    servers: list[asyncio.Server] = []

    async def start(answer: Answer) -> Server:
        server = Server(answer)
        listening = await asyncio.start_server(server.handle, "127.0.0.1", 0)
        servers.append(listening)
        server.url = f"http://127.0.0.1:{listening.sockets[0].getsockname()[1]}/v1"
        return server

    yield start
    for listening in servers:
        listening.close()
        await listening.wait_closed()


async def send(writer: asyncio.StreamWriter, data: bytes) -> None:
    writer.write(data)
    await writer.drain()


def head(content_type: str, length: int | None = None) -> bytes:
    framing = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    return f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n{framing}\r\n\r\n".encode()


def chunked(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def endless(writer: asyncio.StreamWriter, first: bytes, piece: bytes) -> None:
    """``first``, then ``piece`` as chunks of a chunked body until the client hangs up."""
    await send(writer, first)
    while True:
        await send(writer, chunked(piece))


def client(url: str, limits: ResponseLimits | None = None) -> HttpClient:
    return HttpClient(url, provider="hostile", retry=RETRY_AT_ONCE, limits=limits)


async def streamed(http: HttpClient) -> list[str]:
    datas = []
    async for event in http.stream_events("/chat/completions", {}, timeout=30, deadline=None):
        datas.append(event.data)
    return datas


async def peak_during(work: Awaitable[Any]) -> tuple[BaseException | None, int]:
    """The exception ``work`` ended with, and the peak of memory allocated while it ran."""
    tracemalloc.start()
    try:
        try:
            await work
        except Exception as error:  # noqa: BLE001 - handed back to be checked
            failure: BaseException | None = error
        else:
            failure = None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return failure, peak


# --- not UTF-8 ----------------------------------------------------------------------------------------------

NOT_UTF8 = b'{"choices":[{"index":0,"message":{"role":"assistant","content":"caf\xe9"}}]}'


@pytest.mark.parametrize("charset", ["", "; charset=iso-8859-1", "; charset=utf-8"])
async def test_a_whole_body_that_is_not_utf8_is_invalid_response_and_not_retried(serve: Any, charset: str) -> None:
    """JSON is UTF-8 whatever the charset says; bytes that are not are the server's fault, not the network's."""

    async def answer(writer: asyncio.StreamWriter) -> None:
        await send(writer, head("application/json" + charset, len(NOT_UTF8)) + NOT_UTF8)

    server = await serve(answer)
    with pytest.raises(InvalidResponse, match="not UTF-8") as caught:
        await client(server.url).post_json("/chat/completions", {}, timeout=30, deadline=None)
    assert caught.value.code == "invalid_response"
    assert server.requests == 1


async def test_a_whole_answer_where_a_stream_was_asked_for_is_decoded_as_strictly(serve: Any) -> None:
    async def answer(writer: asyncio.StreamWriter) -> None:
        await send(writer, head("application/json; charset=latin-1", len(NOT_UTF8)) + NOT_UTF8)

    server = await serve(answer)
    with pytest.raises(InvalidResponse, match="not UTF-8"):
        await streamed(client(server.url))
    assert server.requests == 1


async def test_a_provider_reports_a_body_that_is_not_utf8_as_invalid_response(serve: Any) -> None:
    async def answer(writer: asyncio.StreamWriter) -> None:
        await send(writer, head("application/json", len(NOT_UTF8)) + NOT_UTF8)

    server = await serve(answer)
    chat = OpenAIChatProvider("m", base_url=server.url, api_key="k", stream=False, retry=RETRY_AT_ONCE)
    with pytest.raises(InvalidResponse):
        async for _ in chat.stream(Request((Message.user("hi"),), timeout=30)):
            pass
    assert server.requests == 1


# --- bodies and streams without end ----------------------------------------------------------------------------


async def test_an_endless_whole_body_is_refused_past_max_body_bytes_in_bounded_memory(serve: Any) -> None:
    async def answer(writer: asyncio.StreamWriter) -> None:
        await endless(writer, head("application/json") + chunked(b'{"choices": ['), b" " * (64 * 1024))

    server = await serve(answer)
    http = client(server.url, ResponseLimits(max_body_bytes=2 * MIB))
    failure, peak = await peak_during(http.post_json("/chat/completions", {}, timeout=30, deadline=None))

    assert isinstance(failure, InvalidResponse)
    assert "max_body_bytes" in failure.message
    assert failure.details == {"limit": "max_body_bytes", "max_body_bytes": 2 * MIB}
    assert server.requests == 1
    assert peak < 6 * MIB  # the cap, one piece, aiohttp's buffer: not the body


async def test_a_body_whose_length_is_past_the_cap_is_refused_before_it_is_read(serve: Any) -> None:
    async def answer(writer: asyncio.StreamWriter) -> None:
        await send(writer, head("application/json", 100 * MIB))
        while True:
            await send(writer, b" " * (64 * 1024))

    server = await serve(answer)
    with pytest.raises(InvalidResponse, match="max_body_bytes"):
        await client(server.url, ResponseLimits(max_body_bytes=MIB)).post_json("/x", {}, timeout=30, deadline=None)
    assert server.requests == 1


async def test_an_endless_answer_where_a_stream_was_asked_for_is_capped_the_same_way(serve: Any) -> None:
    async def answer(writer: asyncio.StreamWriter) -> None:
        await endless(writer, head("application/json"), b" " * (64 * 1024))

    server = await serve(answer)
    http = client(server.url, ResponseLimits(max_body_bytes=2 * MIB))
    failure, peak = await peak_during(streamed(http))

    assert isinstance(failure, InvalidResponse)
    assert "max_body_bytes" in failure.message
    assert server.requests == 1
    assert peak < 6 * MIB


async def test_an_endless_line_is_refused_past_max_event_bytes_in_bounded_memory(serve: Any) -> None:
    async def answer(writer: asyncio.StreamWriter) -> None:
        await endless(writer, head("text/event-stream") + chunked(b"data: "), b"x" * (64 * 1024))

    server = await serve(answer)
    http = client(server.url, ResponseLimits(max_event_bytes=2 * MIB))
    failure, peak = await peak_during(streamed(http))

    assert isinstance(failure, InvalidResponse)
    assert "max_event_bytes" in failure.message
    assert server.requests == 1
    assert peak < 8 * MIB


async def test_an_endless_stream_is_refused_past_max_stream_bytes_through_a_provider(serve: Any) -> None:
    """Many small events, each fine, never ending: the provider's ``response_limits`` reach its client, and
    the stream stops at the cap (mid-stream, after events were delivered: not retried)."""

    async def answer(writer: asyncio.StreamWriter) -> None:
        await endless(writer, head("text/event-stream"), TEXT_CHUNK * 100)

    server = await serve(answer)
    chat = OpenAIChatProvider(
        "m", base_url=server.url, api_key="k", retry=RETRY_AT_ONCE, response_limits=ResponseLimits(max_stream_bytes=MIB)
    )
    deltas = 0

    async def consume() -> None:
        nonlocal deltas
        async for _ in chat.stream(Request((Message.user("hi"),), timeout=30)):
            deltas += 1

    failure, peak = await peak_during(consume())

    assert isinstance(failure, InvalidResponse)
    assert "max_stream_bytes" in failure.message
    assert deltas > 1000  # it was a stream: events were delivered before the cap
    assert server.requests == 1
    assert peak < 6 * MIB


async def test_bytes_after_the_end_marker_are_not_read_without_end(serve: Any) -> None:
    """``[DONE]`` ends the answer; what follows is read only a little, to keep the connection, never all."""

    async def answer(writer: asyncio.StreamWriter) -> None:
        await endless(writer, head("text/event-stream") + chunked(TEXT_CHUNK + b"data: [DONE]\n\n"), b": x" * 20_000)

    server = await serve(answer)
    failure, peak = await peak_during(
        _collect(client(server.url).stream_events("/c", {}, timeout=30, deadline=None, end_marker="[DONE]"))
    )
    assert failure is None
    assert peak < 4 * MIB


async def _collect(events: AsyncIterator[Any]) -> None:
    async for _ in events:
        pass


# --- the limits themselves ------------------------------------------------------------------------------------


def test_the_defaults_are_generous_and_ordered() -> None:
    limits = ResponseLimits()
    assert limits.max_event_bytes <= limits.max_body_bytes <= limits.max_stream_bytes
    assert limits.max_event_bytes >= 16 * MIB  # a base64 image in one event


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "1"])
@pytest.mark.parametrize("name", ["max_body_bytes", "max_event_bytes", "max_stream_bytes"])
def test_a_limit_that_is_not_a_positive_integer_is_refused_by_name(name: str, value: Any) -> None:
    with pytest.raises(ConfigInvalid, match=f"ResponseLimits.{name}"):
        ResponseLimits(**{name: value})
