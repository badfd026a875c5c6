"""The HTTP layer of every wire provider: the layers composed into one client per API.

The contract
------------
* **Connections.** One ``aiohttp.ClientSession`` per event loop and origin (scheme, host, port), shared by
  every provider and run on that loop, with a pool sized for thousands of concurrent runs (``pool.py``).
  Sessions live as long as their loop: ``asyncio.run()`` (and any runner that shuts down async generators)
  closes them; a host managing its own loop calls :func:`~tether.providers.http.pool.close_sessions` first.
* **Timeouts.** ``Request.timeout`` bounds connecting, the wait for the first byte and every wait between
  chunks; a stream that goes quiet that long fails with ``timeout``. The time the consumer spends between
  events does not count. The waits are kept on the event loop's one lazily re-armed timer
  (:class:`tether.alarms.Deadline`), not on a loop timer per chunk.
* **Redirects are never followed** (``attempt.py``).
* **Limits.** An answer is read piece by piece within :class:`~tether.providers.http.body.ResponseLimits` (a
  whole body, one event, a whole stream); past a cap it is ``invalid_response`` naming the limit, and the
  connection is dropped. A whole body is decoded as strict UTF-8 (JSON's encoding, whatever ``charset`` the
  server claims); bytes that are not are ``invalid_response``.
* **Retries** (``retry.py``): one ladder for streamed and whole answers. **A stream is never retried once an
  event has been delivered**: the consumer has acted on it, and a replay would duplicate output.
* **Errors.** Every failure is a :class:`~tether.errors.ProviderError` subclass with a stable code and the
  HTTP status, the provider's own message and its request id (``errors.py``: the one mapping HTTP errors and
  in-stream errors share). A context-length error is ``context_overflow``.
* **Secrets.** API keys are held in :class:`Secret` and only ever written into request headers: no message,
  repr or log line contains one.
* **Exchanges.** A request that carries a recorder (``Request.record``, a run that keeps its exchanges) has
  its body and the answer it reads handed to it: each event's data, or the whole body. Without one, no copy.

The layers, each its own module: an attempt (``attempt.py``: post once, map the status), the retry ladder
around attempts (``retry.py``), server-sent events framed from a stream (``sse.py``, ``stream.py``), and the
protocol's decoder (``providers/decoding.py``) fed each event's JSON where the bytes are read: one generator
for the whole answer, however many layers it passes through.
"""

from __future__ import annotations

import asyncio
import urllib.parse
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import msgspec

from tether.alarms import Alarm, Deadline, shared_alarm
from tether.errors import InvalidResponse, ProviderError
from tether.events import LlmEvent, RateLimitWait, StreamEnd
from tether.providers.base import ModelInfo, OnRetry, OnWait, Request, Server
from tether.providers.decoding import parse_json_text as parse_event_json
from tether.providers.http.attempt import Signer, client_timeout, refused, transport_error
from tether.providers.http.body import ResponseLimits, decode_text, parse_json, read_body
from tether.providers.http.pool import session_for
from tether.providers.http.ratelimit import Limiter, Spend, Ticket, estimate_tokens
from tether.providers.http.retry import RetryPolicy, next_wait, retry_event, retrying
from tether.providers.http.sse import ServerSentEvent
from tether.providers.http.stream import EventStream, open_events
from tether.providers.memo import exact
from tether.providers.wire import decoded

if TYPE_CHECKING:
    import aiohttp

    from tether.exchanges import ExchangeRecorder
    from tether.providers.decoding import Decoder

__all__ = ["HttpClient", "OverHttp", "RetryPolicy", "Secret", "Signer", "WholeAnswer", "parse_event_json"]

T = TypeVar("T")
Item = TypeVar("Item")
_Pooled = tuple["weakref.ref[asyncio.AbstractEventLoop]", "aiohttp.ClientSession", Alarm]


class Secret:
    """A credential that never shows itself: its repr and str are ``***``; :meth:`reveal` gives the value."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__


class HttpClient:
    """JSON requests to one API, answered with JSON or a stream of server-sent events, read within ``limits``."""

    __slots__ = ("_api_key", "_headers", "_limiter", "_pooled", "_signer", "_urls", "base_url", "limits",
                 "provider", "retry")  # fmt: skip

    def __init__(
        self,
        base_url: str,
        *,
        provider: str,
        api_key: Secret | None = None,
        auth_header: str = "Authorization",
        auth_prefix: str = "Bearer ",
        headers: dict[str, str] | None = None,
        retry: RetryPolicy | None = None,
        limits: ResponseLimits | None = None,
        limiter: Limiter | None = None,
        signer: Signer | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.provider = provider
        self.retry = retry or RetryPolicy()
        self.limits = limits or ResponseLimits()
        self._api_key = api_key
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        if api_key is not None:
            self._headers[auth_header] = auth_prefix + api_key.reveal()
        self._urls: dict[str, str] = {}
        self._limiter = limiter  # the client-side rate limit each attempt waits for (ratelimit.py); None: no cost
        self._signer = signer
        self._pooled: _Pooled | None = None
        """The running loop, the session ``session_for`` gave for it, and that loop's alarm, which keeps this
        client's request timeouts."""

    def __repr__(self) -> str:
        return f"HttpClient({self.base_url!r}, provider={self.provider!r})"

    def renew_key(self, api_key: Secret, *, auth_header: str = "Authorization", auth_prefix: str = "Bearer ") -> None:
        """Send ``api_key`` from the next request on (a fresh Entra token; Azure's ``api-key`` header, replacing
        ``Authorization``); it is the secret masked in this client's errors from then on."""
        self._api_key = api_key
        self._headers.pop("Authorization", None)
        self._headers[auth_header] = auth_prefix + api_key.reveal()

    def credentials(self) -> tuple[str, ...]:
        """The key sent with every request; ``()`` without one."""
        return (self._api_key.reveal(),) if self._api_key is not None else ()

    @property
    def server(self) -> Server:
        """Host and port of the API (``server.address``), from its base URL."""
        try:
            parts = urllib.parse.urlsplit(self.base_url)
            return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            return None, None

    # --- what providers ask for ---------------------------------------------------------------------------

    def answer(
        self,
        path: str,
        body: bytes,
        decoder: Decoder,
        request: Request,
        *,
        streaming: bool,
        end_marker: str | None = None,
    ) -> AsyncIterator[LlmEvent]:
        """``request``'s events, streamed or read whole (:class:`WholeAnswer`): what a provider's ``stream()``
        returns as it is, with no generator of its own around it. Nothing is sent before the first event is
        asked for; the response is released or closed however the consumer leaves. The body is held as long as
        the answer is awaited: at its size (``memo.exact``)."""
        body = exact(body)
        record = request.record
        if record is not None:  # the run keeps its exchanges (``tether.exchanges``)
            record.sent(body)
        if not streaming:
            return WholeAnswer(self, path, body, decoder, request)
        reading: _Reading[LlmEvent] = (
            _Decoding(decoder, self.provider) if record is None else _Recording(decoder, self.provider, record)
        )
        if self._limiter is not None:
            reading = _Settling(reading, request.on_wait)
        return self._stream(path, body, request.timeout, request.deadline, request.on_retry, end_marker, reading)

    def post_json(
        self, path: str, body: dict[str, Any] | bytes, *, timeout: float | None, deadline: float | None,
        on_retry: OnRetry | None = None,
    ) -> Coroutine[Any, Any, Any]:  # fmt: skip
        """POST ``body`` (a dict, or JSON already encoded); the response's JSON, parsed."""
        return self._parsed(path, _payload(body), timeout, deadline, on_retry)

    def stream_events(
        self, path: str, body: dict[str, Any] | bytes, *, timeout: float | None, deadline: float | None,
        end_marker: str | None = None, on_retry: OnRetry | None = None,
    ) -> AsyncGenerator[ServerSentEvent, None]:  # fmt: skip
        """POST ``body`` and yield the response's server-sent events as they arrive (an answer that is not an
        event stream, as one event of its whole body); an event whose data is ``end_marker`` ends the stream."""
        return self._stream(path, _payload(body), timeout, deadline, on_retry, end_marker, _RAW)

    async def get_json(self, path: str, *, timeout: float | None) -> Any:
        """GET ``path`` once and return its JSON: a look at the API (its models list) that spends no tokens, for
        health checks. Not retried (a check reports what it found, now); otherwise one attempt like a request's
        (redirects refused, statuses mapped, the key masked in what an error quotes, ``timeout`` bounding
        connecting and each wait of the answer)."""
        data = await self._attempt(path, None, timeout, self._read)
        return parse_json(data, self.provider)

    # --- the layers composed ------------------------------------------------------------------------------

    async def _stream(
        self,
        path: str,
        payload: bytes,
        timeout: float | None,
        deadline: float | None,
        on_retry: OnRetry | None,
        end_marker: str | None,
        reading: _Reading[Item],
    ) -> AsyncGenerator[Item, None]:
        """What ``reading`` makes of each event, then of the end; of each retry before its wait (``retry.py``'s
        ladder, climbed here so a retry is said first); of a rate limit's wait before an attempt, usage settled."""
        tried, limiter, settling, ticket = 0, self._limiter, None, None
        if limiter is not None:
            settling = reading if isinstance(reading, _Settling) else _Settling(reading, None)
            reading = settling
        while True:
            if limiter is not None and settling is not None:
                ticket = limiter.reserve(estimate_tokens(payload))
                if ticket.delay > 0:
                    for item in reading.waiting(ticket):
                        yield item
                    await limiter.ready(ticket)
                limiter.sent(ticket)
                settling.spend = ticket.spend
            try:
                opened = await self._attempt(path, payload, timeout, self._open, ticket)
                break
            except ProviderError as error:
                wait = next_wait(error, tried, self.retry, deadline, on_retry)
                for item in reading.retry(error, tried, wait):
                    yield item
                await asyncio.sleep(wait)
            tried += 1
        if isinstance(opened, str):  # a whole answer where a stream was asked for
            for item in reading.whole(opened):
                yield item
        else:
            try:
                events: list[ServerSentEvent] | None = opened.first
                ended = False
                while events is not None and not ended:
                    for event in events:
                        if event.data == end_marker:
                            ended = True
                            break
                        for item in reading.event(event):
                            yield item
                    events = None if ended else await opened.read_on()
                if ended:
                    await opened.finish()
            finally:
                opened.close()
        for item in reading.end():
            yield item

    async def _parsed(
        self, path: str, payload: bytes, timeout: float | None, deadline: float | None, on_retry: OnRetry | None
    ) -> Any:
        if self._limiter is not None:
            await self._limiter.acquire(estimate_tokens(payload))
        data = await retrying(self._attempt, (path, payload, timeout, self._read), self.retry, deadline, on_retry)
        return parse_json(data, self.provider)

    async def _attempt(
        self,
        path: str,
        payload: bytes | None,
        timeout: float | None,
        read: Callable[[aiohttp.ClientResponse, Deadline], Awaitable[T]],
        ticket: Ticket | None = None,
    ) -> T:
        """One attempt: post ``payload`` (or, without one, get: ``get_json``), then ``read`` what the answer
        starts with, its waits bounded by ``timeout``; a failure of the connection (or a wait past the timeout)
        is a ``transport`` (``timeout``) error. With a rate limit, the answer's head tells it when the request
        had certainly reached the server (``ticket``), and what quota the server has left."""
        pooled = self._ready_pool() or await self._pool()
        wait, url = Deadline(pooled[2], timeout), self._url(path)
        try:
            wait.start()
            try:
                if payload is not None:
                    target, headers = (
                        (url, self._headers) if self._signer is None else self._signer(url, payload, self._headers)
                    )
                    response = await pooled[1].post(
                        target, data=payload, headers=headers, allow_redirects=False, timeout=client_timeout(timeout)
                    )
                else:
                    headers = {name: value for name, value in self._headers.items() if name != "Content-Type"}
                    response = await pooled[1].get(
                        url, headers=headers, allow_redirects=False, timeout=client_timeout(timeout)
                    )
            finally:
                wait.stop()
            if self._limiter is not None:
                self._limiter.answered(ticket, response.headers)
            if response.status >= 300:
                secret = self._api_key.reveal() if self._api_key is not None else None
                error = await refused(response, url, wait, provider=self.provider, secret=secret)
                if self._limiter is not None and error.code == "rate_limited" and error.retry_after:
                    self._limiter.pause(error.retry_after)  # every waiter of this API, not only this attempt
                raise error
            return await read(response, wait)
        except ProviderError:
            raise
        except asyncio.CancelledError:
            if not wait.expired():
                raise
            raise transport_error(self.provider, TimeoutError(), timeout, mid_stream=False) from None
        except Exception as exc:
            raise transport_error(self.provider, exc, timeout, mid_stream=False) from exc

    def _read(self, response: aiohttp.ClientResponse, wait: Deadline) -> Awaitable[bytearray]:
        """A whole answer's body (its reading, awaited by the attempt itself: no frame of its own)."""
        max_body = self.limits.max_body_bytes
        return read_body(response, max_body, provider=self.provider, setting="max_body_bytes", wait=wait)

    def _open(self, response: aiohttp.ClientResponse, wait: Deadline) -> Awaitable[EventStream | str]:
        """A stream's answer up to its first event (``stream.open_events``)."""
        return open_events(response, wait, self.limits, self.provider)

    def _url(self, path: str) -> str:
        return self._urls.get(path) or self._urls.setdefault(path, self.base_url + path)  # one string per path

    def _ready_pool(self) -> _Pooled | None:
        """This loop's session and alarm when they are kept and the session is open (every request but a
        loop's first): no coroutine is made for them."""
        pooled = self._pooled
        if pooled is not None and pooled[0]() is asyncio.get_running_loop() and not pooled[1].closed:
            return pooled
        return None

    async def _pool(self) -> _Pooled:
        """The running loop's session for this client's origin, and the alarm that keeps this client's request
        timeouts on that loop (kept, so that a request does not look them up again)."""
        pooled = self._ready_pool()
        if pooled is None:  # the first request on this event loop, or after its session was closed
            loop = asyncio.get_running_loop()
            pooled = self._pooled = (weakref.ref(loop), await session_for(self.base_url), shared_alarm(loop))
        return pooled


class OverHttp:
    """What every HTTP provider is, as a :class:`~tether.providers.base.ServedProvider`: its credentials and
    server are its client's."""

    __slots__ = ()

    _client: HttpClient
    info: ModelInfo

    def credentials(self) -> tuple[str, ...]:
        """The secrets sent with each request: the API key."""
        return self._client.credentials()

    @property
    def server(self) -> Server:
        """The host and port of the provider's API."""
        return self._client.server

    async def reach(self, timeout: float) -> str:
        """Reach the API and see the key accepted, without spending a token: ``GET {base_url}/models``, which
        OpenAI, Anthropic, Gemini and every OpenAI-compatible server answer (``Agent.health()``). Returns what
        was found, in a few words; a ``ProviderError`` when the API cannot be reached or refuses the key."""
        client = self._client
        data = await client.get_json("/models", timeout=timeout)
        listed = data.get("data", data.get("models")) if isinstance(data, dict) else None
        if not isinstance(listed, list):
            return f"GET {client.base_url}/models answered"
        names = {str(item.get("id") or item.get("name") or "") for item in listed if isinstance(item, dict)}
        model = self.info.name
        among = any(name == model or name.endswith("/" + model) for name in names)
        found = f"; {model} among them" if among else ""
        return f"GET {client.base_url}/models answered with {len(listed)} model{'s' if len(listed) != 1 else ''}{found}"


class _Reading(Protocol[Item]):
    """What an answer's events are read as: decoded events, or the events themselves."""

    def event(self, event: ServerSentEvent) -> list[Item]: ...

    def whole(self, text: str) -> list[Item]: ...

    def end(self) -> list[Item]: ...

    def retry(self, error: ProviderError, attempt: int, wait: float) -> list[Item]: ...

    def waiting(self, ticket: Ticket) -> list[Item]: ...


class _Decoding:
    """Each event's JSON fed to a protocol's decoder, where the bytes are read; a shape the decoder does not
    expect is ``invalid_response`` (``wire.decoded``)."""

    __slots__ = ("_decoder", "_provider")

    def __init__(self, decoder: Decoder, provider: str) -> None:
        self._decoder, self._provider = decoder, provider

    def event(self, event: ServerSentEvent) -> list[LlmEvent]:
        return decoded(self._decoder.feed_json, event.data, self._provider)

    def whole(self, text: str) -> list[LlmEvent]:
        return decoded(self._decoder.feed_json, text, self._provider)

    def end(self) -> list[LlmEvent]:
        return decoded(_call, self._decoder.end, self._provider)

    def retry(self, error: ProviderError, attempt: int, wait: float) -> list[LlmEvent]:
        return [retry_event(error, attempt, wait)]

    def waiting(self, ticket: Ticket) -> list[LlmEvent]:
        return [RateLimitWait(ticket.delay, ticket.reason)]


class _Recording(_Decoding):
    """:class:`_Decoding` that also hands each event's data (or the whole body) to the call's recorder."""

    __slots__ = ("_record",)

    def __init__(self, decoder: Decoder, provider: str, record: ExchangeRecorder) -> None:
        super().__init__(decoder, provider)
        self._record = record

    def event(self, event: ServerSentEvent) -> list[LlmEvent]:
        self._record.event(event.data)
        return super().event(event)

    def whole(self, text: str) -> list[LlmEvent]:
        self._record.whole(text)
        return super().whole(text)


class _RawEvents:
    """The events as they came, an answer that is not a stream as one event of its body, and nothing at the end."""

    __slots__ = ()

    def event(self, event: ServerSentEvent) -> list[ServerSentEvent]:
        return [event]

    def whole(self, text: str) -> list[ServerSentEvent]:
        return [ServerSentEvent(text)]

    def end(self) -> list[ServerSentEvent]:
        return []

    def retry(self, error: ProviderError, attempt: int, wait: float) -> list[ServerSentEvent]:
        return []

    def waiting(self, ticket: Ticket) -> list[ServerSentEvent]:
        return []


class _Settling:
    """Another reading, whose answer's usage (its ``StreamEnd``) corrects the tokens its attempt was granted
    (``ratelimit.Spend``): only a client with a rate limit reads through it."""

    __slots__ = ("_on_wait", "_reading", "spend")

    def __init__(self, reading: _Reading[Any], on_wait: OnWait | None) -> None:
        self._reading, self._on_wait = reading, on_wait
        self.spend: Spend | None = None

    def event(self, event: ServerSentEvent) -> list[Any]:
        return self._settled(self._reading.event(event))

    def whole(self, text: str) -> list[Any]:
        return self._settled(self._reading.whole(text))

    def end(self) -> list[Any]:
        return self._settled(self._reading.end())

    def retry(self, error: ProviderError, attempt: int, wait: float) -> list[Any]:
        return self._reading.retry(error, attempt, wait)

    def waiting(self, ticket: Ticket) -> list[Any]:
        if self._on_wait is not None:
            self._on_wait(ticket.delay, ticket.reason)
        return self._reading.waiting(ticket)

    def _settled(self, items: list[Any]) -> list[Any]:
        settle(self.spend, items)
        return items


def settle(spend: Spend | None, items: list[Any]) -> None:
    """The usage of the ``StreamEnd`` among ``items``, if one is, is what ``spend`` used."""
    if spend is not None:
        for item in items:
            if type(item) is StreamEnd and item.usage.total_tokens:
                spend.settle(item.usage.total_tokens)


_RAW = _RawEvents()

_NONE_LEFT: Iterator[LlmEvent] = iter(())
"""An iterator with nothing left, shared (it stays exhausted): a :class:`WholeAnswer` with no events to hand out."""


class WholeAnswer:
    """A non-streamed answer as an async iterator of its events: the request is made when the first event is
    asked for (an iterator that is closed unread sends nothing), then the events of the whole body are handed
    out one by one. Lighter than an async generator, which asyncio also tracks in a weak set.

    It climbs the retry ladder itself (``retry.py``), an ask at a time: an attempt that fails and is to be made
    again is answered with its ``ProviderRetry``, and the next ask waits, then attempts again."""

    __slots__ = ("_body", "_client", "_decoder", "_events", "_path", "_request", "_ticket", "_tried", "_wait")

    def __init__(self, client: HttpClient, path: str, body: bytes, decoder: Decoder, request: Request) -> None:
        self._client, self._path, self._body, self._decoder, self._request = client, path, body, decoder, request
        self._events: Iterator[LlmEvent] | None = None
        self._tried = 0
        """Attempts that failed and were retried."""
        self._wait = 0.0
        """The wait before the next attempt, when the last one said it would retry."""
        self._ticket: Ticket | None = None
        """The rate limit's slot for the next attempt, when its wait has been said (``RateLimitWait``)."""

    def __aiter__(self) -> WholeAnswer:
        return self

    def __anext__(self) -> Coroutine[Any, Any, LlmEvent]:
        if self._events is not None:
            return self._next()
        self._events = _NONE_LEFT  # asked once: a failed request is not made again by the next ask
        return self._asked()

    async def _asked(self) -> LlmEvent:
        """An attempt, after the wait the last one said: the answer's first event, or the ``ProviderRetry`` of an
        attempt that failed and is to be made again (the next ask makes it); the error when none is left."""
        client, request = self._client, self._request
        if self._wait:
            await asyncio.sleep(self._wait)
            self._wait = 0.0
        if client._limiter is not None:
            held = await self._held(client._limiter)
            if held is not None:
                return held
        try:
            return await client._attempt(self._path, self._body, request.timeout, self._first, self._ticket)
        except ProviderError as error:
            tried = self._tried
            wait = next_wait(error, tried, client.retry, request.deadline, request.on_retry)
            self._tried, self._wait, self._events, self._ticket = tried + 1, wait, None, None
            return retry_event(error, tried, wait)

    async def _held(self, limiter: Limiter) -> RateLimitWait | None:
        """The rate limit's wait for this attempt: said first (the next ask waits it), then waited."""
        ticket = self._ticket
        if ticket is None:
            ticket = limiter.reserve(estimate_tokens(self._body))
            if ticket.delay > 0:
                self._ticket, self._events = ticket, None
                if self._request.on_wait is not None:
                    self._request.on_wait(ticket.delay, ticket.reason)
                return RateLimitWait(ticket.delay, ticket.reason)
        else:
            await limiter.ready(ticket)
        limiter.sent(ticket)
        self._ticket = ticket
        return None

    async def _first(self, response: aiohttp.ClientResponse, wait: Deadline) -> LlmEvent:
        """An attempt's reading: the body read whole and decoded (a shape the decoder does not expect is
        ``invalid_response`` at once: not retried), and the first of its events: the reading of the attempt
        itself, awaited by it."""
        client = self._client
        text = decode_text(await client._read(response, wait), client.provider)
        if self._request.record is not None:
            self._request.record.whole(text)
        events = decoded(self._decoder.whole_json, text, client.provider)
        if self._ticket is not None:
            settle(self._ticket.spend, events)
            self._ticket = None
        self._events = rest = iter(events)
        for event in rest:
            return event
        raise InvalidResponse(f"{client.provider} sent an answer without any event")

    async def _next(self) -> LlmEvent:
        for event in self._events or ():
            return event
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Nothing is held open between events (the body was read whole); no event is handed out after this."""
        self._events = _NONE_LEFT


def _call(function: Callable[[], list[LlmEvent]]) -> list[LlmEvent]:
    return function()


def _payload(body: dict[str, Any] | bytes) -> bytes:
    return body if isinstance(body, bytes) else msgspec.json.encode(body)
