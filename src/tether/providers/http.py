"""The HTTP layer of every wire provider: pooled connections, timeouts, retries, limits, error mapping.

The contract
------------
* **Connections.** One ``aiohttp.ClientSession`` per event loop and origin (scheme, host, port), shared by
  every provider and run on that loop, with a pool sized for thousands of concurrent runs. Sessions live as
  long as their loop: ``asyncio.run()`` (and any runner that shuts down async generators) closes them; a host
  managing its own loop calls :func:`close_sessions` before closing it.
* **Timeouts.** ``Request.timeout`` bounds connecting, the wait for the first byte and every wait between
  chunks; a stream that goes quiet that long fails with ``timeout``. The time the consumer spends between
  events does not count. The waits are kept on one lazily re-armed timer per client and event loop
  (:mod:`tether.providers.stall`), not on a loop timer per chunk.
* **Redirects are never followed.** A request carries the API key and the whole conversation; following a
  redirect would hand both to whatever origin the answer names (aiohttp drops only ``Authorization`` on the
  way, not ``x-api-key`` or ``x-goog-api-key``). A 3xx answer is ``bad_request`` with its status, naming the
  origin it pointed to (never its path or query), and asking for ``base_url`` to be set to the final address.
* **Limits.** An answer is read piece by piece within :class:`~tether.providers.body.ResponseLimits` (a
  whole body, one event, a whole stream); past a cap it is ``invalid_response`` naming the limit, and the
  connection is dropped. A whole body is decoded as strict UTF-8 (JSON's encoding, whatever ``charset`` the
  server claims); bytes that are not are ``invalid_response``.
* **Retries.** HTTP 429, 500, 502, 503, 504 and 529, connection failures and timeouts are retried with
  exponential backoff and full jitter (``RetryPolicy``), honouring ``Retry-After`` and ``retry-after-ms``
  (capped by ``RetryPolicy.max_delay``), never past the run's deadline. Nothing else is retried: not a
  redirect, not an answer past a limit or not UTF-8 or not JSON (the same server would send it again), not
  an exhausted quota. **A stream is never retried once an event has been delivered**: the consumer has
  acted on it, and a replay would duplicate output.
* **Errors.** Every failure is a :class:`~tether.errors.ProviderError` subclass with a stable code and the
  HTTP status, the provider's own message and its request id (see :mod:`tether.providers.http_errors` for
  the one mapping HTTP errors and in-stream errors share). A context-length error is ``context_overflow``.
* **Secrets.** API keys are held in :class:`Secret` and only ever written into request headers: no message,
  repr or log line contains one.
"""

from __future__ import annotations

import asyncio
import functools
import math
import random
import urllib.parse
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tether import jsoncodec
from tether.alarms import Alarm, shared_alarm
from tether.errors import BadRequest, InvalidResponse, ProviderError, RequestTimeout, TransportError
from tether.events import LlmEvent
from tether.providers.base import OnRetry, Request
from tether.providers.body import ResponseLimits, decode_text, parse_json, read_body, too_large
from tether.providers.http_errors import (
    RETRY_STATUSES,
    error_for_payload,
    error_for_response,
    is_retryable,
    provider_message,
    retry_after,
)
from tether.providers.sessions import MAX_CONNECTIONS, close_sessions, origin_of, session_for
from tether.providers.sse import ServerSentEvent, SSEDecoder
from tether.providers.stall import Stall
from tether.providers.wire import decoded

if TYPE_CHECKING:
    import aiohttp

    from tether.providers.decoding import Decoder

__all__ = [
    "MAX_CONNECTIONS",
    "RETRY_STATUSES",
    "HttpClient",
    "ResponseLimits",
    "RetryPolicy",
    "Secret",
    "close_sessions",
    "error_for_payload",
    "error_for_response",
    "is_retryable",
    "origin_of",
    "parse_event_json",
    "provider_message",
    "redirect_error",
    "retry_after",
    "session_for",
]

_Pooled = tuple["weakref.ref[asyncio.AbstractEventLoop]", "aiohttp.ClientSession", Alarm]

MAX_ERROR_BODY = 64 * 1024
"""Bytes of an error response read for its message."""


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


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How failed requests are retried (see the module docstring)."""

    max_retries: int = 3
    """Retries after the first attempt."""
    base_delay: float = 0.5
    """Seconds; the n-th retry waits a random time up to ``base_delay * 2**n``."""
    max_delay: float = 30.0
    """The longest single wait, ``Retry-After`` included."""

    def delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None and math.isfinite(retry_after):
            return min(max(retry_after, 0.0), self.max_delay)
        return random.uniform(0.0, min(self.max_delay, self.base_delay * 2**attempt))


# --- the client ---------------------------------------------------------------------------------------------


class HttpClient:
    """JSON requests to one API, answered with JSON or a stream of server-sent events, read within ``limits``."""

    __slots__ = (
        "_api_key",
        "_auth_header",
        "_auth_prefix",
        "_headers",
        "_pooled",
        "_urls",
        "base_url",
        "limits",
        "provider",
        "retry",
    )

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
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.provider = provider
        self.retry = retry or RetryPolicy()
        self.limits = limits or ResponseLimits()
        self._api_key = api_key
        self._auth_header = auth_header
        self._auth_prefix = auth_prefix
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        self._urls: dict[str, str] = {}
        self._pooled: _Pooled | None = None
        """The running loop, the session ``session_for`` gave for it, and that loop's alarm, which keeps this
        client's request timeouts (see :mod:`tether.providers.stall`)."""

    def __repr__(self) -> str:
        return f"HttpClient({self.base_url!r}, provider={self.provider!r})"

    def post_json(
        self,
        path: str,
        body: dict[str, Any] | bytes,
        *,
        timeout: float | None,
        deadline: float | None,
        on_retry: OnRetry | None = None,
    ) -> Coroutine[Any, Any, Any]:
        """POST ``body`` (a dict, or JSON already encoded); the response's JSON. Retried as the module
        docstring says."""
        return self._post_whole(path, body, timeout, deadline, on_retry, None, None)

    def stream_events(
        self,
        path: str,
        body: dict[str, Any] | bytes,
        *,
        timeout: float | None,
        deadline: float | None,
        end_marker: str | None = None,
        on_retry: OnRetry | None = None,
    ) -> AsyncGenerator[ServerSentEvent, None]:
        """POST ``body`` and yield the response's server-sent events as they arrive.

        An event whose data is ``end_marker`` (OpenAI's ``[DONE]``) ends the stream: it is not yielded, and the
        rest of the body is read so that the connection goes back to the pool. A response that is not an
        event stream (a server that ignored ``stream: true``) is read whole (within ``max_body_bytes``) and
        yielded as one event, for the provider to read as a complete answer. ``body`` may be JSON already
        encoded.
        """
        return self._stream(path, body, timeout, deadline, end_marker, on_retry, None)

    async def _post_whole(
        self,
        path: str,
        body: dict[str, Any] | bytes,
        timeout: float | None,
        deadline: float | None,
        on_retry: OnRetry | None,
        decoder: Decoder | None,
        answer: WholeAnswer | None,
    ) -> Any:
        """The contract of :meth:`post_json`; given ``decoder``, the events ``decoder.whole`` reads in the JSON
        (not retried: a shape the decoder does not expect is ``invalid_response`` at once); given ``answer`` too,
        its first event (:class:`WholeAnswer` keeps the rest)."""
        payload = body if isinstance(body, bytes) else _encode(body)
        provider, max_body = self.provider, self.limits.max_body_bytes
        for attempt in range(self.retry.max_retries + 1):
            pooled = self._ready_pool() or await self._pool()
            stall = Stall(pooled[2], timeout)
            try:
                response = await self._post(pooled[1], path, payload, stall)
                data = await read_body(response, max_body, provider=provider, setting="max_body_bytes", stall=stall)
            except ProviderError as error:
                await self._back_off(error, attempt, deadline, on_retry)
                continue
            except asyncio.CancelledError:
                if not stall.expired():
                    raise
                await self._back_off(self._transport_error(TimeoutError(), timeout), attempt, deadline, on_retry)
                continue
            except Exception as exc:  # noqa: BLE001 - every transport failure gets a code
                await self._back_off(self._transport_error(exc, timeout), attempt, deadline, on_retry)
                continue
            parsed = parse_json(data, provider)
            if decoder is None:
                return parsed
            events = decoded(decoder.whole, parsed, provider)
            return events if answer is None else answer.begin(events)
        raise AssertionError("unreachable: _back_off raises on the last attempt")

    def answer(
        self,
        path: str,
        body: dict[str, Any] | bytes,
        decoder: Decoder,
        request: Request,
        *,
        streaming: bool,
        end_marker: str | None = None,
    ) -> AsyncIterator[LlmEvent]:
        """``request``'s events, streamed (:meth:`stream_decoded`) or read whole (:class:`WholeAnswer`): what a
        provider's ``stream()`` returns as it is, with no generator of its own around it (a layer a run's
        events would pass through, and that a run waiting for its answer would keep alive). Nothing is sent
        before the first event is asked for."""
        if streaming:
            return self.stream_decoded(path, body, decoder, request, end_marker=end_marker)
        return WholeAnswer(self, path, body, decoder, request)

    def stream_decoded(
        self,
        path: str,
        body: dict[str, Any] | bytes,
        decoder: Decoder,
        request: Request,
        *,
        end_marker: str | None = None,
    ) -> AsyncGenerator[LlmEvent, None]:
        """:meth:`stream_events` for ``request``, each event's JSON fed to ``decoder`` and its ``end()`` once
        the stream is over: a provider's ``LlmEvent``s, decoded where the bytes are read rather than in
        generators stacked on each other (each layer would cost a switch of frames per event). A shape the
        decoder does not expect is ``invalid_response``; the response is released or closed however the
        consumer leaves."""
        return self._stream(path, body, request.timeout, request.deadline, end_marker, request.on_retry, decoder)

    async def _stream(
        self,
        path: str,
        body: dict[str, Any] | bytes,
        timeout: float | None,
        deadline: float | None,
        end_marker: str | None,
        on_retry: OnRetry | None,
        decoder: Decoder | None,
    ) -> AsyncGenerator[Any, None]:
        """The events, or (given a ``decoder``) what they decode to; the contract of the module docstring."""
        feed = None if decoder is None else decoder.feed
        payload = body if isinstance(body, bytes) else _encode(body)
        provider = self.provider
        for attempt in range(self.retry.max_retries + 1):
            pooled = self._ready_pool() or await self._pool()
            stall = Stall(pooled[2], timeout)
            delivered = decoding = False
            try:
                response = await self._post(pooled[1], path, payload, stall)
                if "text/event-stream" not in response.headers.get("Content-Type", ""):
                    data = await read_body(
                        response, self.limits.max_body_bytes, provider=provider, setting="max_body_bytes", stall=stall
                    )
                    whole = decode_text(data, provider)
                    delivered = decoding = True
                    if feed is None:
                        yield ServerSentEvent(whole)
                        return
                    for item in decoded(feed, parse_event_json(whole, provider), provider):
                        yield item
                    break
                limits = self.limits
                max_stream = limits.max_stream_bytes
                sse = SSEDecoder(max_event_bytes=limits.max_event_bytes, provider=provider)
                content = response.content
                received = 0
                finished = reusable = False
                try:
                    while not finished:
                        stall.start()
                        try:
                            chunk = await content.readany()
                        finally:
                            stall.stop()
                        if chunk:
                            received += len(chunk)
                            if received > max_stream:
                                raise too_large(provider, "a stream", "max_stream_bytes", max_stream)
                            events = sse.feed(chunk)
                        else:  # the end of the body: what the decoder still holds
                            events = sse.close()
                            finished = reusable = True
                        for event in events:
                            if event.data == end_marker:
                                if not finished:
                                    reusable = await _drain(response, stall)
                                    finished = True
                                break
                            delivered = True
                            if feed is None:
                                yield event
                                continue
                            decoding = True
                            items = decoded(feed, parse_event_json(event.data, provider), provider)
                            decoding = False
                            for item in items:
                                yield item
                finally:
                    response.release() if reusable else response.close()
                break
            except ProviderError as error:
                if delivered:
                    raise
                await self._back_off(error, attempt, deadline, on_retry)
            except asyncio.CancelledError:
                if not stall.expired():
                    raise
                failure = self._transport_error(TimeoutError(), timeout, mid_stream=delivered)
                if delivered:
                    raise failure from None
                await self._back_off(failure, attempt, deadline, on_retry)
            except Exception as exc:  # every transport failure gets a code
                if decoding:  # a decoder's own bug, not the connection's
                    raise
                failure = self._transport_error(exc, timeout, mid_stream=delivered)
                if delivered:
                    raise failure from exc
                await self._back_off(failure, attempt, deadline, on_retry)
        if decoder is not None:
            for item in decoded(_call, decoder.end, provider):
                yield item

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

    async def _post(
        self, session: aiohttp.ClientSession, path: str, payload: bytes, stall: Stall
    ) -> aiohttp.ClientResponse:
        """One attempt; a response with a 2xx status, or the mapped ``ProviderError`` (redirects included).
        ``stall`` bounds the wait for the answer's head (and, for an error, its body)."""
        headers = self._headers
        if self._api_key is not None:
            headers = {**headers, self._auth_header: self._auth_prefix + self._api_key.reveal()}
        url = self._urls.get(path) or self._urls.setdefault(path, self.base_url + path)  # one string per path
        stall.start()
        try:
            response = await session.post(
                url,
                data=payload,
                headers=headers,
                allow_redirects=False,
                timeout=_client_timeout(stall.timeout),
            )
        finally:
            stall.stop()
        if response.status < 300:
            return response
        if response.status < 400:
            response.close()
            raise redirect_error(self.provider, url, response.status, response.headers.get("Location"))
        try:
            text = await _read_capped(response, MAX_ERROR_BODY, stall)
        finally:
            response.release()
        if self._api_key is not None:  # a proxy that quotes the request back must not leak the key
            text = text.replace(self._api_key.reveal(), "***")
        raise error_for_response(self.provider, response.status, text, response.headers)

    async def _back_off(
        self, error: ProviderError, attempt: int, deadline: float | None, on_retry: OnRetry | None = None
    ) -> None:
        """Wait before the next attempt, or raise ``error`` when no attempt is left or worth making; ``on_retry``
        is told of the retry before the wait."""
        if not is_retryable(error) or attempt >= self.retry.max_retries:
            raise error
        wait = self.retry.delay(attempt, getattr(error, "retry_after", None))
        loop = asyncio.get_running_loop()
        if deadline is not None and loop.time() + wait >= deadline:
            raise error
        if on_retry is not None:
            on_retry(error, attempt + 1, wait)
        await asyncio.sleep(wait)

    def _transport_error(self, exc: Exception, timeout: float | None, *, mid_stream: bool = False) -> ProviderError:
        where = "in the middle of the stream" if mid_stream else "before an answer"
        if isinstance(exc, TimeoutError):
            waited = f"{timeout:g} s" if timeout is not None else "too long"
            return RequestTimeout(f"{self.provider} sent nothing for {waited} {where}", details={"timeout": timeout})
        return TransportError(f"the connection to {self.provider} failed {where}: {type(exc).__name__}: {exc}")


_NONE_LEFT: Iterator[LlmEvent] = iter(())
"""An iterator with nothing left, shared (it stays exhausted): a :class:`WholeAnswer` with no events to hand out."""


class WholeAnswer:
    """A non-streamed answer as an async iterator of its events: the request is made when the first event is
    asked for (an iterator that is closed unread sends nothing), then the events of the whole body are handed
    out one by one. Lighter than an async generator, which asyncio also tracks in a weak set; the first
    ``__anext__`` is the client's request coroutine itself, so a run waiting for the answer holds no frame of
    this iterator's."""

    __slots__ = ("_body", "_client", "_decoder", "_events", "_path", "_request")

    def __init__(
        self, client: HttpClient, path: str, body: dict[str, Any] | bytes, decoder: Decoder, request: Request
    ) -> None:
        self._client, self._path, self._body, self._decoder, self._request = client, path, body, decoder, request
        self._events: Iterator[LlmEvent] | None = None

    def __aiter__(self) -> WholeAnswer:
        return self

    def __anext__(self) -> Coroutine[Any, Any, LlmEvent]:
        if self._events is not None:
            return self._next()
        self._events = _NONE_LEFT  # asked once: a failed request is not made again by the next ask
        request = self._request
        return self._client._post_whole(
            self._path, self._body, request.timeout, request.deadline, request.on_retry, self._decoder, self
        )

    def begin(self, events: list[LlmEvent]) -> LlmEvent:
        """The request's events arrived: keep them, hand out the first."""
        self._events = rest = iter(events)
        for event in rest:
            return event
        raise StopAsyncIteration

    async def _next(self) -> LlmEvent:
        for event in self._events or ():
            return event
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Nothing is held open between events (the body was read whole); no event is handed out after this."""
        self._events = _NONE_LEFT


def redirect_error(provider: str, url: str, status: int, location: str | None) -> BadRequest:
    """The error for a redirect that is not followed: it names the origin pointed to, never its path or query
    (they may carry tokens), and says what to change."""
    target = origin_of(urllib.parse.urljoin(url, location)) if location else None
    where = f"to {target}" if target else "without saying where (no Location)"
    return BadRequest(
        f"{provider} answered HTTP {status}, a redirect {where}; redirects are not followed, since the request "
        "carries the API key and the conversation. Set base_url to the address the requests should go to.",
        status=status,
        details={"redirect": target},
    )


DRAIN_SECONDS = 1.0
"""How long to wait for the end of a body after its end marker before giving the connection up."""
DRAIN_BYTES = 64 * 1024
"""How much of a body after its end marker is read to keep the connection; more, and it is dropped instead."""


async def _drain(response: aiohttp.ClientResponse, stall: Stall) -> bool:
    """Read what is left of a body whose answer is complete; whether the connection can be reused."""
    content = response.content
    if content.at_eof():  # the end of the body came with the end marker: nothing to wait for
        return True
    left = DRAIN_BYTES
    stall.start_for(DRAIN_SECONDS)
    try:
        while piece := await content.readany():
            left -= len(piece)
            if left < 0:
                return False
    except asyncio.CancelledError:
        if stall.expired():
            return False
        raise
    except Exception:  # noqa: BLE001 - the answer is complete; only the connection is lost
        return False
    finally:
        stall.stop()
    return True


async def _read_capped(response: aiohttp.ClientResponse, limit: int, stall: Stall) -> str:
    """The body (up to ``limit`` bytes), however many pieces it arrives in."""
    content = response.content
    data = bytearray()
    while len(data) < limit:
        stall.start()
        try:
            piece = await content.readany()
        finally:
            stall.stop()
        if not piece:
            break
        data += piece
    return bytes(data[:limit]).decode(errors="replace")


@functools.lru_cache(maxsize=64)
def _client_timeout(timeout: float | None) -> aiohttp.ClientTimeout:
    """aiohttp's timeouts for a request: connecting only (see :mod:`tether.providers.stall` for the rest); one
    object per value, not one per request."""
    import aiohttp

    return aiohttp.ClientTimeout(total=None, sock_connect=timeout)


def _call(function: Callable[[], list[LlmEvent]]) -> list[LlmEvent]:
    return function()


def _encode(body: dict[str, Any]) -> bytes:
    return jsoncodec.dumps_bytes(body)


def parse_event_json(data: str, provider: str) -> Any:
    """The JSON an event of a stream carries; ``InvalidResponse`` when it is not JSON."""
    try:
        return jsoncodec.loads(data)
    except ValueError:
        raise InvalidResponse(f"{provider} sent an event that is not JSON: {data[:200]!r}") from None
