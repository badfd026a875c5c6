"""Faults over real sockets: a small HTTP/1.1 server on 127.0.0.1 misbehaves, and each run ends as the HTTP
layer's contract says (``tether/providers/http/client.py``): dropped and stalled streams, malformed chunks, rate
limits, server errors, nothing listening, deadlines, servers that ignore ``stream: true``, and the pool.

The server is written on asyncio streams so that it can misbehave at the byte level: it counts requests and
connections, and it stalls on events it is told about (never on a clock).
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp.streams
import pytest

from tests.helpers import assert_valid, result_of
from tether import Agent, Limits
from tether.errors import (
    ProviderError,
    ProviderUnavailable,
    RateLimited,
    RequestTimeout,
    TransportError,
)
from tether.events import RunEvent, RunResult, TextDelta, TurnCompleted
from tether.messages import Message
from tether.providers.base import Request
from tether.providers.http import RetryPolicy
from tether.providers.http.sse import ServerSentEvent, SSEDecoder
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.registry import PROFILES

# --- the server ---------------------------------------------------------------------------------------------


@dataclass
class Seen:
    """One request as the server read it."""

    number: int
    connection: int
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class Exchange:
    """One request and the means to answer it, well or badly."""

    def __init__(self, seen: Seen, writer: asyncio.StreamWriter, closing: asyncio.Event) -> None:
        self.seen = seen
        self.number = seen.number
        self.keep_alive = True
        self._writer = writer
        self._closing = closing

    async def raw(self, data: bytes) -> None:
        self._writer.write(data)
        await self._writer.drain()

    async def head(self, status: int, headers: dict[str, str]) -> None:
        lines = [f"HTTP/1.1 {status} Status"] + [f"{name}: {value}" for name, value in headers.items()]
        await self.raw(("\r\n".join(lines) + "\r\n\r\n").encode())

    async def body(self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None) -> None:
        await self.head(status, {"Content-Type": content_type, "Content-Length": str(len(body)), **(headers or {})})
        await self.raw(body)

    async def json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        await self.body(status, json.dumps(payload).encode(), "application/json", headers)

    async def sse_head(self) -> None:
        await self.head(200, {"Content-Type": "text/event-stream", "Transfer-Encoding": "chunked"})

    async def chunk(self, data: str | bytes) -> None:
        """One piece of a chunked body."""
        raw = data.encode() if isinstance(data, str) else data
        await self.raw(b"%x\r\n%s\r\n" % (len(raw), raw))

    async def event(self, data: str) -> None:
        await self.chunk(f"data: {data}\n\n")

    async def end(self) -> None:
        """The last chunk of a chunked body."""
        await self.raw(b"0\r\n\r\n")

    async def sse(self, datas: list[str]) -> None:
        """A whole, well-formed event stream."""
        await self.sse_head()
        for data in datas:
            await self.event(data)
        await self.end()

    def close(self) -> None:
        """End the connection gracefully (a FIN): for a body without length, that is its end."""
        self.keep_alive = False
        self._writer.close()

    def drop(self) -> None:
        """Cut the connection at once (a reset), mid-response if one is under way."""
        self.keep_alive = False
        self._writer.transport.abort()

    async def wait_for(self, event: asyncio.Event) -> None:
        """Stall until ``event`` is set (or the server closes)."""
        waits = [asyncio.ensure_future(event.wait()), asyncio.ensure_future(self._closing.wait())]
        _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        if self._closing.is_set():
            self.keep_alive = False

    async def stall(self) -> None:
        """Send nothing more until the server closes (a stall that outlasts any timeout)."""
        await self.wait_for(self._closing)


Handler = Callable[[Exchange], Awaitable[None]]


class LoopbackServer:
    """HTTP/1.1 with keep-alive on 127.0.0.1; ``handler`` answers each request."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests: list[Seen] = []
        self.connections = 0
        self.base_url = ""
        self._closing = asyncio.Event()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._writers: list[asyncio.StreamWriter] = []

    @property
    def count(self) -> int:
        return len(self.requests)

    async def start(self) -> LoopbackServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, backlog=1024)
        port = self._server.sockets[0].getsockname()[1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self

    async def close(self) -> None:
        assert self._server is not None
        self._closing.set()
        self._server.close()
        for writer in self._writers:
            writer.transport.abort()
        await asyncio.gather(*self._tasks)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.append(writer)
        self.connections += 1
        connection = self.connections
        try:
            while not self._closing.is_set():
                line = await reader.readline()
                if not line.strip():
                    return
                method, path, _ = line.decode().split(" ", 2)
                headers: dict[str, str] = {}
                while (header := await reader.readline()) not in (b"\r\n", b""):
                    name, _, value = header.decode().partition(":")
                    headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                seen = Seen(len(self.requests) + 1, connection, method, path, headers, body)
                self.requests.append(seen)
                exchange = Exchange(seen, writer, self._closing)
                await self.handler(exchange)
                if not exchange.keep_alive:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.transport.abort()
            self._tasks.discard(task)


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Handler], Awaitable[LoopbackServer]]]:
    """``server = await serve(handler)``: a running server, closed after the test."""
    servers: list[LoopbackServer] = []

    async def start(handler: Handler) -> LoopbackServer:
        server = await LoopbackServer(handler).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        await server.close()


Serve = Callable[[Handler], Awaitable[LoopbackServer]]


# --- what the server says -----------------------------------------------------------------------------------


def chunk(content: str | None = None, finish: str | None = None, **extra: Any) -> str:
    """A Chat Completions stream chunk, as JSON text."""
    delta = {"content": content} if content is not None else {}
    return json.dumps(
        {"id": "chatcmpl-1", "model": "test-model", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        | extra
    )


def stream_of(*pieces: str) -> list[str]:
    """The data of a well-formed streamed answer made of ``pieces``."""
    usage = {"prompt_tokens": 5, "completion_tokens": len(pieces)}
    return [
        *(chunk(piece) for piece in pieces),
        chunk(finish="stop"),
        json.dumps({"id": "chatcmpl-1", "choices": [], "usage": usage}),
        "[DONE]",
    ]


def completion(text: str) -> dict[str, Any]:
    """A whole (non-streamed) Chat Completions answer."""
    return {
        "id": "chatcmpl-2",
        "object": "chat.completion",
        "model": "test-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


def server_error(message: str = "The server had an error while processing your request.") -> dict[str, Any]:
    return {"error": {"message": message, "type": "server_error", "param": None, "code": None}}


FAST = RetryPolicy(base_delay=0.001)
"""The default number of retries, with backoff short enough for tests."""


@dataclass(frozen=True)
class RecordingPolicy(RetryPolicy):
    """A RetryPolicy that records every wait it is asked for: (attempt, Retry-After)."""

    asked: list[tuple[int, float | None]] = field(default_factory=list)

    def delay(self, attempt: int, retry_after: float | None) -> float:
        self.asked.append((attempt, retry_after))
        return super().delay(attempt, retry_after)


def provider(base_url: str, retry: RetryPolicy = FAST, *, stream: bool = True) -> OpenAIChatProvider:
    return OpenAIChatProvider(
        "test-model", profile=PROFILES["openai-compatible"], base_url=base_url, retry=retry, stream=stream
    )


def code_of(result: RunResult) -> str:
    assert isinstance(result.error, ProviderError), f"{result.stop_reason}: {result.error!r}"
    return result.error.code


@pytest.fixture
def no_jitter(monkeypatch: pytest.MonkeyPatch) -> None:
    """Backoff waits take the shortest time their jitter allows (zero), so the default policy runs fast."""
    monkeypatch.setattr("tether.providers.http.retry.random.uniform", lambda low, high: low)


async def collect(agent: Agent, prompt: str = "hi") -> tuple[list[RunEvent], RunResult]:
    events = [event async for event in agent.stream(prompt)]
    return events, result_of(events)


async def read_texts(chat: OpenAIChatProvider, texts: list[str], timeout: float | None = None) -> None:
    """Stream one request straight from the provider, keeping its text deltas in ``texts``."""
    async for event in chat.stream(Request((Message.user("hi"),), timeout=timeout)):
        if isinstance(event, TextDelta):
            texts.append(event.text)


# --- (a) the connection drops in the middle of a stream -----------------------------------------------------


async def test_a_connection_dropped_mid_stream_is_not_retried_and_keeps_the_partial_text(serve: Serve) -> None:
    async def respond(exchange: Exchange) -> None:
        await exchange.sse_head()
        await exchange.event(chunk("The answer "))
        await exchange.event(chunk("is 4"))
        exchange.drop()

    server = await serve(respond)
    result = await Agent(provider(server.base_url)).run("2+2?")
    assert server.count == 1
    assert result.stop_reason == "error"
    assert code_of(result) == "transport"
    assert isinstance(result.error, TransportError)
    assert result.text == "The answer is 4"
    assert result.degraded
    assert [m.role for m in result.messages] == ["user"]  # the broken turn is not in the transcript
    assert_valid(result)


@pytest.mark.parametrize("cut", range(1, 5))
async def test_a_stream_starting_with_a_byte_order_mark_keeps_its_first_event(serve: Serve, cut: int) -> None:
    # The mark is cut into two HTTP chunks at each byte boundary (4: between the mark and "data").
    first = b"\xef\xbb\xbf" + f"data: {chunk('The answer ')}\n\n".encode()

    async def respond(exchange: Exchange) -> None:
        await exchange.sse_head()
        await exchange.chunk(first[:cut])
        await exchange.chunk(first[cut:])
        for data in stream_of("is 4"):
            await exchange.event(data)
        await exchange.end()

    server = await serve(respond)
    result = await Agent(provider(server.base_url)).run("2+2?")
    assert (result.stop_reason, result.text) == ("complete", "The answer is 4")


async def test_a_stream_that_just_ends_before_finishing_is_a_transport_error_not_retried(serve: Serve) -> None:
    """A body delimited by the connection's end (no length, no chunks) that stops before ``finish_reason``."""

    async def respond(exchange: Exchange) -> None:
        await exchange.head(200, {"Content-Type": "text/event-stream", "Connection": "close"})
        await exchange.raw(f"data: {chunk('Half an ')}\n\ndata: {chunk('answer')}\n\n".encode())
        exchange.close()

    server = await serve(respond)
    result = await Agent("openai-compatible:test-model", base_url=server.base_url).run("hi")
    assert server.count == 1
    assert result.stop_reason == "error"
    assert code_of(result) == "transport"
    assert result.text == "Half an answer"


async def test_a_drop_after_only_a_keep_alive_comment_is_retried(serve: Serve) -> None:
    """A comment is not an event: nothing was delivered, so the request is made again."""

    async def respond(exchange: Exchange) -> None:
        if exchange.number == 1:
            await exchange.sse_head()
            await exchange.chunk(": ping\n\n")
            exchange.drop()
            return
        await exchange.sse(stream_of("Second ", "try"))

    server = await serve(respond)
    result = await Agent(provider(server.base_url)).run("hi")
    assert server.count == 2
    assert result.stop_reason == "complete"
    assert result.text == "Second try"


async def test_a_provider_stream_never_replays_delivered_events(serve: Serve) -> None:
    """Straight on the provider: the events before the drop arrive once, then the failure; one request."""

    async def respond(exchange: Exchange) -> None:
        await exchange.sse_head()
        await exchange.event(chunk("once"))
        exchange.drop()

    server = await serve(respond)
    texts: list[str] = []
    with pytest.raises(TransportError):
        await read_texts(provider(server.base_url), texts)
    assert texts == ["once"]
    assert server.count == 1


# --- (b) a malformed chunk ----------------------------------------------------------------------------------


def malformed_then(good: bool) -> Handler:
    async def respond(exchange: Exchange) -> None:
        if exchange.number == 1 or not good:
            await exchange.sse_head()
            await exchange.event(chunk("Hel"))
            await exchange.event('{"choices": [{"index": 0, "delta": {"content": "lo"')  # cut-off JSON
            await exchange.event(chunk(finish="stop"))
            await exchange.event("[DONE]")
            await exchange.end()
            return
        await exchange.sse(stream_of("Hello ", "again"))

    return respond


async def test_a_malformed_chunk_gets_one_corrective_retry_and_the_run_completes(serve: Serve) -> None:
    server = await serve(malformed_then(good=True))
    events, result = await collect(Agent("openai-compatible:test-model", base_url=server.base_url))
    assert server.count == 2
    assert result.stop_reason == "complete"
    assert result.text == "Hello again"
    rejected = [e for e in events if isinstance(e, TurnCompleted) and e.rejected]
    assert len(rejected) == 1
    assert "malformed" in (rejected[0].rejected or "")
    retry = server.requests[1].json()["messages"]
    assert retry[-1]["role"] == "user"
    assert "could not be used" in retry[-1]["content"]  # the correction tells the model what went wrong
    assert_valid(result)


async def test_a_malformed_chunk_twice_ends_the_run_as_invalid_response(serve: Serve) -> None:
    server = await serve(malformed_then(good=False))
    result = await Agent("openai-compatible:test-model", base_url=server.base_url).run("hi")
    assert server.count == 2
    assert result.stop_reason == "invalid_response"
    assert result.degraded
    assert result.text == "Hel"  # best effort: the text that came before the malformed chunk
    assert_valid(result)


async def test_a_chunk_that_is_not_a_json_object_is_malformed_too(serve: Serve) -> None:
    async def respond(exchange: Exchange) -> None:
        if exchange.number == 1:
            await exchange.sse(["[1, 2, 3]", "[DONE]"])
            return
        await exchange.sse(stream_of("fine"))

    server = await serve(respond)
    result = await Agent(provider(server.base_url)).run("hi")
    assert (server.count, result.stop_reason, result.text) == (2, "complete", "fine")


# --- (c) stalls past the idle timeout -----------------------------------------------------------------------


async def test_a_stream_stalling_mid_way_times_out_without_retry(serve: Serve) -> None:
    async def respond(exchange: Exchange) -> None:
        await exchange.sse_head()
        await exchange.event(chunk("Thinking about "))
        await exchange.event(chunk("it"))
        await exchange.stall()

    server = await serve(respond)
    agent = Agent("openai-compatible:test-model", base_url=server.base_url, limits=Limits(request_timeout=0.2))
    result = await agent.run("hi")
    assert server.count == 1  # events were delivered: no retry
    assert result.stop_reason == "timeout"
    assert code_of(result) == "timeout"
    assert isinstance(result.error, RequestTimeout)  # the HTTP idle timeout, not a run-level deadline
    assert result.text == "Thinking about it"
    assert_valid(result)


async def test_a_stall_before_any_byte_is_retried_then_times_out(serve: Serve) -> None:
    async def respond(exchange: Exchange) -> None:
        await exchange.stall()

    server = await serve(respond)
    policy = RecordingPolicy(max_retries=2, base_delay=0.001)
    with pytest.raises(RequestTimeout) as caught:
        async for _ in provider(server.base_url, policy).stream(Request((Message.user("hi"),), timeout=0.2)):
            pass
    assert server.count == 3
    assert [attempt for attempt, _ in policy.asked] == [0, 1]
    assert caught.value.code == "timeout"


async def test_a_stall_after_the_headers_before_any_event_is_retried(serve: Serve) -> None:
    async def respond(exchange: Exchange) -> None:
        if exchange.number == 1:
            await exchange.sse_head()
            await exchange.chunk(": still here\n\n")
            await exchange.stall()
            return
        await exchange.sse(stream_of("Back"))

    server = await serve(respond)
    texts: list[str] = []
    await read_texts(provider(server.base_url), texts, timeout=0.2)
    assert server.count == 2
    assert texts == ["Back"]


async def test_a_stall_before_any_byte_is_retried_by_the_run_then_ends_it_as_timeout(serve: Serve) -> None:
    async def respond(exchange: Exchange) -> None:
        await exchange.stall()

    server = await serve(respond)
    retry = RetryPolicy(max_retries=2, base_delay=0.001)
    agent = Agent(provider(server.base_url, retry), limits=Limits(request_timeout=0.2))
    result = await agent.run("hi")
    assert result.stop_reason == "timeout"
    assert isinstance(result.error, ProviderError)
    assert result.error.code == "timeout"
    assert server.count == 3, "the request timeout is kept per attempt, so the run's retries all happen"
    assert_valid(result)


# --- (d) rate limits ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "seconds"), [({"Retry-After": "0"}, 0.0), ({"retry-after-ms": "1"}, 0.001)], ids=["seconds", "ms"]
)
async def test_429_with_retry_after_is_retried_after_the_wait_the_server_asked(
    serve: Serve, header: dict[str, str], seconds: float
) -> None:
    async def respond(exchange: Exchange) -> None:
        if exchange.number == 1:
            body = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}
            await exchange.json(429, body, header)
            return
        await exchange.sse(stream_of("Made it"))

    server = await serve(respond)
    policy = RecordingPolicy()  # default base_delay: the server's wait is what is used
    result = await Agent(provider(server.base_url, policy)).run("hi")
    assert server.count == 2
    assert result.stop_reason == "complete"
    assert result.text == "Made it"
    assert policy.asked == [(0, seconds)]
    assert result.usage.requests == 1  # one provider call for the loop; the retry is inside it


async def test_429_insufficient_quota_is_not_retried(serve: Serve) -> None:
    async def respond(exchange: Exchange) -> None:
        body = {
            "error": {"message": "You exceeded your quota.", "type": "insufficient_quota", "code": "insufficient_quota"}
        }
        await exchange.json(429, body, {"Retry-After": "0", "x-request-id": "req_quota"})

    server = await serve(respond)
    result = await Agent(provider(server.base_url)).run("hi")
    assert server.count == 1
    assert result.stop_reason == "error"
    assert isinstance(result.error, RateLimited)
    assert result.error.request_id == "req_quota"
    assert result.error.provider_message == "You exceeded your quota."


# --- (e) server errors --------------------------------------------------------------------------------------


def fails_then_answers(failures: int, status: int = 500) -> Handler:
    async def respond(exchange: Exchange) -> None:
        if exchange.number <= failures:
            await exchange.json(status, server_error(), {"x-request-id": f"req_{exchange.number}"})
            return
        await exchange.sse(stream_of("Recovered"))

    return respond


async def test_500_three_times_gives_up_after_max_retries_plus_one_requests(serve: Serve) -> None:
    server = await serve(fails_then_answers(3))
    result = await Agent(provider(server.base_url, RetryPolicy(max_retries=2, base_delay=0.001))).run("hi")
    assert server.count == 3
    assert result.stop_reason == "error"
    assert code_of(result) == "provider_unavailable"
    assert isinstance(result.error, ProviderUnavailable)
    assert result.error.status == 500
    assert result.error.request_id == "req_3"  # the last attempt's
    assert result.error.provider_message == server_error()["error"]["message"]


@pytest.mark.usefixtures("no_jitter")
async def test_500_three_times_then_success_completes_with_the_default_policy(serve: Serve) -> None:
    server = await serve(fails_then_answers(3))
    result = await Agent("openai-compatible:test-model", base_url=server.base_url).run("hi")
    assert server.count == 4
    assert result.stop_reason == "complete"
    assert result.text == "Recovered"


@pytest.mark.parametrize("status", [502, 503, 504, 529])
async def test_each_retryable_status_is_retried(serve: Serve, status: int) -> None:
    server = await serve(fails_then_answers(1, status))
    result = await Agent(provider(server.base_url)).run("hi")
    assert (server.count, result.stop_reason) == (2, "complete")


@pytest.mark.parametrize(("status", "code"), [(400, "bad_request"), (401, "auth_failed"), (404, "bad_request")])
async def test_client_errors_are_not_retried(serve: Serve, status: int, code: str) -> None:
    server = await serve(fails_then_answers(1, status))
    result = await Agent(provider(server.base_url)).run("hi")
    assert server.count == 1
    assert result.stop_reason == "error"
    assert code_of(result) == code


async def test_an_error_body_that_arrives_in_pieces_is_read_whole(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error response's body comes in two TCP segments; its message and code are read from all of it.

    The server sends the second half only once the client holds the first in its buffer (a hook on aiohttp's
    ``StreamReader.feed_data`` says when), so the two halves never arrive together. Cut off, this
    ``insufficient_quota`` body would not be JSON, its code would be lost and it would be retried.
    """
    body = json.dumps(
        {
            "error": {
                "message": "You exceeded your current quota.",
                "type": "insufficient_quota",
                "code": "insufficient_quota",
            }
        }
    ).encode()
    buffered = asyncio.Event()
    feed_data = aiohttp.streams.StreamReader.feed_data

    def hooked(self: aiohttp.streams.StreamReader, *args: Any, **kwargs: Any) -> Any:
        buffered.set()
        return feed_data(self, *args, **kwargs)

    monkeypatch.setattr(aiohttp.streams.StreamReader, "feed_data", hooked)

    async def respond(exchange: Exchange) -> None:
        buffered.clear()
        await exchange.head(429, {"Content-Type": "application/json", "Content-Length": str(len(body))})
        await exchange.raw(body[:25])
        await exchange.wait_for(buffered)
        await exchange.raw(body[25:])

    server = await serve(respond)
    with pytest.raises(RateLimited) as caught:
        async for _ in provider(server.base_url).stream(Request((Message.user("hi"),), timeout=30)):
            pass
    assert caught.value.provider_message == "You exceeded your current quota."
    assert caught.value.details.get("insufficient_quota") is True
    assert server.count == 1


# --- (f) nothing listening ----------------------------------------------------------------------------------


def closed_port() -> int:
    """A loopback port that was just bound and closed: nothing listens on it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_nothing_listening_is_a_transport_error_after_retries() -> None:
    policy = RecordingPolicy(max_retries=2, base_delay=0.001)
    result = await Agent(provider(f"http://127.0.0.1:{closed_port()}/v1", policy)).run("hi")
    assert result.stop_reason == "error"
    assert code_of(result) == "transport"
    assert [attempt for attempt, _ in policy.asked] == [0, 1]  # two waits: three attempts
    assert result.degraded
    assert result.text  # a sentence saying why, not a traceback
    assert_valid(result)


@pytest.mark.usefixtures("no_jitter")
async def test_nothing_listening_through_a_model_string_ends_in_a_result() -> None:
    agent = Agent("openai-compatible:test-model", base_url=f"http://127.0.0.1:{closed_port()}/v1")
    result = await agent.run("hi")
    assert (result.stop_reason, code_of(result)) == ("error", "transport")


# --- (g) the run's deadline ---------------------------------------------------------------------------------


def always(status: int, retry_after: str) -> Handler:
    """A server that answers every request with ``status`` and a ``Retry-After``."""
    body = server_error("Service unavailable")
    if status == 429:
        body = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}

    async def respond(exchange: Exchange) -> None:
        await exchange.json(status, body, {"Retry-After": retry_after})

    return respond


RETRY_AFTER_STATUSES = pytest.mark.parametrize(
    ("status", "code"), [(429, "rate_limited"), (503, "provider_unavailable"), (529, "provider_unavailable")]
)


@RETRY_AFTER_STATUSES
async def test_retry_after_is_honoured_on_every_retryable_status(serve: Serve, status: int, code: str) -> None:
    """RFC 9110 pairs ``Retry-After`` with 503 as much as with 429; the contract honours it on any retry."""
    server = await serve(always(status, "2"))
    policy = RecordingPolicy(max_retries=1, max_delay=0.001)  # capped, so the test does not wait 2 s
    result = await Agent(provider(server.base_url, policy)).run("hi")
    assert policy.asked == [(0, 2.0)]
    assert code_of(result) == code


@RETRY_AFTER_STATUSES
@pytest.mark.usefixtures("no_jitter")
async def test_retries_stop_at_once_when_the_servers_wait_would_pass_the_run_deadline(
    serve: Serve, status: int, code: str
) -> None:
    server = await serve(always(status, "3600"))
    agent = Agent("openai-compatible:test-model", base_url=server.base_url, limits=Limits(run_timeout=20))
    result = await agent.run("hi")
    assert server.count == 1
    assert result.stop_reason == "error"
    assert code_of(result) == code


@RETRY_AFTER_STATUSES
@pytest.mark.usefixtures("no_jitter")
async def test_retries_within_the_run_deadline_go_on_to_max_retries(serve: Serve, status: int, code: str) -> None:
    """The contrast to the test above: the same server with a wait that fits is retried the usual 3 times."""
    server = await serve(always(status, "0"))
    agent = Agent("openai-compatible:test-model", base_url=server.base_url, limits=Limits(run_timeout=20))
    result = await agent.run("hi")
    assert server.count == 4
    assert code_of(result) == code


async def test_a_jittered_backoff_past_the_deadline_is_not_waited_for(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tether.providers.http.retry.random.uniform", lambda low, high: high)
    server = await serve(fails_then_answers(10))
    slow = RetryPolicy(base_delay=1000.0, max_delay=1000.0)
    result = await Agent(provider(server.base_url, slow), limits=Limits(run_timeout=20)).run("hi")
    assert server.count == 1
    assert result.stop_reason == "error"  # the provider gave up; the run deadline did not have to cut it
    assert code_of(result) == "provider_unavailable"


@RETRY_AFTER_STATUSES
async def test_a_provider_stops_retrying_at_the_requests_deadline(serve: Serve, status: int, code: str) -> None:
    server = await serve(always(status, "5"))
    deadline = asyncio.get_running_loop().time() + 4
    with pytest.raises(ProviderError) as caught:
        async for _ in provider(server.base_url).stream(Request((Message.user("hi"),), deadline=deadline)):
            pass
    assert caught.value.code == code
    assert server.count == 1


# --- (h) a server that ignores stream: true -----------------------------------------------------------------


async def test_a_whole_json_answer_to_a_streamed_request_still_works(serve: Serve) -> None:
    async def respond(exchange: Exchange) -> None:
        await exchange.json(200, completion("Not streamed, but fine."))

    server = await serve(respond)
    result = await Agent("openai-compatible:test-model", base_url=server.base_url).run("hi")
    assert server.requests[0].json()["stream"] is True  # it was asked to stream
    assert result.stop_reason == "complete"
    assert result.text == "Not streamed, but fine."
    assert (result.usage.input_tokens, result.usage.output_tokens) == (3, 2)


async def test_a_whole_json_answer_cut_off_before_anything_was_delivered_is_retried(serve: Serve) -> None:
    """Nothing reached the caller when the JSON body broke off, so this is a connection failure before an
    answer, retried like any other."""
    whole = json.dumps(completion("Second time lucky.")).encode()

    async def respond(exchange: Exchange) -> None:
        if exchange.number == 1:
            await exchange.head(200, {"Content-Type": "application/json", "Content-Length": str(len(whole))})
            await exchange.raw(whole[:20])
            exchange.drop()
            return
        await exchange.body(200, whole, "application/json")

    server = await serve(respond)
    result = await Agent(provider(server.base_url)).run("hi")
    assert server.count == 2
    assert result.stop_reason == "complete"
    assert result.text == "Second time lucky."


async def test_a_non_streaming_provider_is_retried_like_a_streaming_one(serve: Serve) -> None:
    async def respond(exchange: Exchange) -> None:
        if exchange.number == 1:
            await exchange.json(503, server_error())
            return
        await exchange.json(200, completion("Whole."))

    server = await serve(respond)
    result = await Agent(provider(server.base_url, stream=False)).run("hi")
    assert server.requests[0].json()["stream"] is False
    assert (server.count, result.stop_reason, result.text) == (2, "complete", "Whole.")


# --- (i) the connection pool --------------------------------------------------------------------------------


async def answer(exchange: Exchange) -> None:
    await exchange.sse(stream_of("Hello ", "there"))


async def test_many_concurrent_runs_complete_on_one_server(serve: Serve) -> None:
    server = await serve(answer)
    agent = Agent("openai-compatible:test-model", base_url=server.base_url)
    results = await asyncio.gather(*(agent.run(f"run {n}") for n in range(200)))
    assert [r.stop_reason for r in results] == ["complete"] * 200
    assert {r.text for r in results} == {"Hello there"}
    assert server.count == 200
    assert sorted(r.json()["messages"][-1]["content"] for r in server.requests) == sorted(
        f"run {n}" for n in range(200)
    )


async def test_200_runs_are_in_flight_at_the_same_time(serve: Serve) -> None:
    """The server answers no one until all 200 requests have arrived: a pool capped below 200 connections
    would leave the runs waiting until their request timeout."""
    runs = 200
    everyone = asyncio.Event()

    async def respond(exchange: Exchange) -> None:
        if server.count == runs:
            everyone.set()
        await exchange.wait_for(everyone)
        await answer(exchange)

    server = await serve(respond)
    agent = Agent("openai-compatible:test-model", base_url=server.base_url, limits=Limits(request_timeout=20))
    results = await asyncio.gather(*(agent.run("hi") for _ in range(runs)))
    assert [r.stop_reason for r in results] == ["complete"] * runs
    assert server.connections >= runs


async def test_sequential_runs_reuse_keep_alive_connections(serve: Serve) -> None:
    server = await serve(answer)
    agent = Agent("openai-compatible:test-model", base_url=server.base_url)
    for n in range(20):
        result = await agent.run(f"run {n}")
        assert result.stop_reason == "complete"
    assert server.count == 20
    assert server.connections <= 2


async def test_agents_on_one_origin_share_connections(serve: Serve) -> None:
    server = await serve(answer)
    for _ in range(5):
        agent = Agent("openai-compatible:test-model", base_url=server.base_url)
        assert (await agent.run("hi")).stop_reason == "complete"
        other = Agent(provider(server.base_url))
        assert (await other.run("hi")).stop_reason == "complete"
    assert server.count == 10
    assert server.connections <= 2


async def test_a_connection_is_reused_when_the_body_ends_after_the_done_event(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Servers often end the chunked body in a later write than ``[DONE]`` (the framework closes the response
    after the generator finishes). The connection must still go back to the pool, not be dropped for a new
    TCP (and TLS) handshake per request. The server sends the body's last chunk once the client has decoded
    ``[DONE]`` (a hook on ``SSEDecoder.feed`` says when), so the two never arrive together."""
    done_decoded = asyncio.Event()
    feed = SSEDecoder.feed

    def hooked(self: SSEDecoder, data: bytes) -> list[ServerSentEvent]:
        events = feed(self, data)
        if any(event.data == "[DONE]" for event in events):
            done_decoded.set()
        return events

    monkeypatch.setattr(SSEDecoder, "feed", hooked)

    async def respond(exchange: Exchange) -> None:
        done_decoded.clear()
        await exchange.sse_head()
        for data in stream_of("Hello"):
            await exchange.event(data)
        await exchange.wait_for(done_decoded)
        await exchange.end()

    server = await serve(respond)
    agent = Agent("openai-compatible:test-model", base_url=server.base_url)
    for _ in range(5):
        result = await agent.run("hi")
        assert (result.stop_reason, result.text) == ("complete", "Hello")
    assert server.count == 5
    assert server.connections == 1
