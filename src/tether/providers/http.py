"""The HTTP layer of every wire provider: pooled connections, timeouts, retries, limits, error mapping.

The contract
------------
* **Connections.** One ``aiohttp.ClientSession`` per event loop and origin (scheme, host, port), shared by
  every provider and run on that loop, with a pool sized for thousands of concurrent runs. Sessions live as
  long as their loop: ``asyncio.run()`` (and any runner that shuts down async generators) closes them; a host
  managing its own loop calls :func:`close_sessions` before closing it.
* **Timeouts.** ``Request.timeout`` bounds connecting, the wait for the first byte and every wait between
  chunks; a stream that goes quiet that long fails with ``timeout``.
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
import math
import random
import urllib.parse
import weakref
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tether import jsoncodec
from tether.errors import BadRequest, InvalidResponse, ProviderError, RequestTimeout, TransportError
from tether.events import LlmEvent
from tether.providers.base import OnRetry
from tether.providers.body import ResponseLimits, decode_text, parse_json, read_body, too_large
from tether.providers.http_errors import (
    RETRY_STATUSES,
    error_for_payload,
    error_for_response,
    is_retryable,
    provider_message,
    retry_after,
)
from tether.providers.sse import ServerSentEvent, SSEDecoder
from tether.providers.wire import decoded

if TYPE_CHECKING:
    import aiohttp

__all__ = [
    "RETRY_STATUSES",
    "HttpClient",
    "ResponseLimits",
    "RetryPolicy",
    "Secret",
    "close_sessions",
    "decode_events",
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

MAX_CONNECTIONS = 4096
"""Connections per origin and loop: enough for thousands of concurrent runs without queueing."""
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


# --- sessions -----------------------------------------------------------------------------------------------

_sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, aiohttp.ClientSession]] = (
    weakref.WeakKeyDictionary()
)
_closers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncGenerator[None, None]] = weakref.WeakKeyDictionary()


def origin_of(url: str) -> str:
    """``scheme://host:port`` of a URL: what one pooled session serves."""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


async def session_for(base_url: str) -> aiohttp.ClientSession:
    """The running loop's session for ``base_url``'s origin, created on first use."""
    import aiohttp

    loop = asyncio.get_running_loop()
    sessions = _sessions.get(loop)
    if sessions is None:
        sessions = _sessions[loop] = {}
        # An async generator that closes the sessions when it is closed: the loop's runner closes every live
        # async generator at shutdown (loop.shutdown_asyncgens), so the sessions end with their loop.
        closer = _close_on_shutdown(sessions)
        await closer.__anext__()
        _closers[loop] = closer
    origin = origin_of(base_url)
    session = sessions.get(origin)
    if session is None or session.closed:
        connector = aiohttp.TCPConnector(limit=MAX_CONNECTIONS, limit_per_host=MAX_CONNECTIONS)
        session = aiohttp.ClientSession(connector=connector, raise_for_status=False)
        sessions[origin] = session
    return session


async def _close_on_shutdown(sessions: dict[str, aiohttp.ClientSession]) -> AsyncGenerator[None, None]:
    try:
        yield
    finally:
        await _close_all(sessions)


async def _close_all(sessions: dict[str, aiohttp.ClientSession]) -> None:
    for session in list(sessions.values()):
        await session.close()
    sessions.clear()


async def close_sessions() -> None:
    """Close the running loop's sessions (new requests open new ones)."""
    sessions = _sessions.get(asyncio.get_running_loop())
    if sessions:
        await _close_all(sessions)


# --- the client ---------------------------------------------------------------------------------------------


class HttpClient:
    """JSON requests to one API, answered with JSON or a stream of server-sent events, read within ``limits``."""

    __slots__ = (
        "_api_key",
        "_auth_header",
        "_auth_prefix",
        "_headers",
        "_pooled",
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
        self._pooled: tuple[weakref.ref[asyncio.AbstractEventLoop], aiohttp.ClientSession] | None = None
        """The session ``session_for`` gave for the running loop, kept so a request does not look it up again."""

    def __repr__(self) -> str:
        return f"HttpClient({self.base_url!r}, provider={self.provider!r})"

    async def post_json(
        self,
        path: str,
        body: dict[str, Any] | bytes,
        *,
        timeout: float | None,
        deadline: float | None,
        on_retry: OnRetry | None = None,
    ) -> Any:
        """POST ``body`` (a dict, or JSON already encoded); the response's JSON. Retried as the module
        docstring says."""
        payload = body if isinstance(body, bytes) else _encode(body)
        for attempt in range(self.retry.max_retries + 1):
            try:
                data = await self._whole(await self._post(path, payload, timeout))
            except ProviderError as error:
                await self._back_off(error, attempt, deadline, on_retry)
                continue
            except Exception as exc:  # noqa: BLE001 - every transport failure gets a code
                await self._back_off(self._transport_error(exc, timeout), attempt, deadline, on_retry)
                continue
            return parse_json(data, self.provider)
        raise AssertionError("unreachable: _back_off raises on the last attempt")

    async def stream_events(
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
        payload = body if isinstance(body, bytes) else _encode(body)
        for attempt in range(self.retry.max_retries + 1):
            delivered = False
            try:
                response = await self._post(path, payload, timeout)
                if "text/event-stream" not in response.headers.get("Content-Type", ""):
                    whole = decode_text(await self._whole(response), self.provider)
                    delivered = True
                    yield ServerSentEvent(whole)
                    return
                async with aclosing(self._events(response, end_marker)) as events:
                    async for event in events:
                        delivered = True
                        yield event
                return
            except ProviderError as error:
                if delivered:
                    raise
                await self._back_off(error, attempt, deadline, on_retry)
            except Exception as exc:  # every transport failure gets a code
                failure = self._transport_error(exc, timeout, mid_stream=delivered)
                if delivered:
                    raise failure from exc
                await self._back_off(failure, attempt, deadline, on_retry)

    async def _whole(self, response: aiohttp.ClientResponse) -> bytearray:
        """A whole body within ``max_body_bytes``; the connection is reused only when it was read to its end."""
        reusable = False
        try:
            limit = self.limits.max_body_bytes
            data = await read_body(response, limit, provider=self.provider, setting="max_body_bytes")
            reusable = True
            return data
        finally:
            response.release() if reusable else response.close()

    async def _events(
        self, response: aiohttp.ClientResponse, end_marker: str | None
    ) -> AsyncGenerator[ServerSentEvent, None]:
        """The events of an event-stream body, within ``max_event_bytes`` each and ``max_stream_bytes`` in all."""
        limits = self.limits
        decoder = SSEDecoder(max_event_bytes=limits.max_event_bytes, provider=self.provider)
        received = 0
        reusable = False
        try:
            async for chunk in response.content.iter_any():
                received += len(chunk)
                if received > limits.max_stream_bytes:
                    raise too_large(self.provider, "a stream", "max_stream_bytes", limits.max_stream_bytes)
                for event in decoder.feed(chunk):
                    if event.data == end_marker:
                        reusable = await _drain(response)
                        return
                    yield event
            for event in decoder.close():
                if event.data == end_marker:
                    break
                yield event
            reusable = True
        finally:
            response.release() if reusable else response.close()

    async def _post(self, path: str, payload: bytes, timeout: float | None) -> aiohttp.ClientResponse:
        """One attempt; a response with a 2xx status, or the mapped ``ProviderError`` (redirects included)."""
        import aiohttp

        loop = asyncio.get_running_loop()
        pooled = self._pooled
        if pooled is not None and pooled[0]() is loop and not pooled[1].closed:
            session = pooled[1]
        else:  # the first request on this event loop, or after its session was closed
            session = await session_for(self.base_url)
            self._pooled = (weakref.ref(loop), session)
        headers = self._headers
        if self._api_key is not None:
            headers = {**headers, self._auth_header: self._auth_prefix + self._api_key.reveal()}
        url = self.base_url + path
        response = await session.post(
            url,
            data=payload,
            headers=headers,
            allow_redirects=False,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=timeout, sock_read=timeout),
        )
        if response.status < 300:
            return response
        if response.status < 400:
            response.close()
            raise redirect_error(self.provider, url, response.status, response.headers.get("Location"))
        try:
            text = await _read_capped(response, MAX_ERROR_BODY)
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


async def _drain(response: aiohttp.ClientResponse) -> bool:
    """Read what is left of a body whose answer is complete; whether the connection can be reused."""
    left = DRAIN_BYTES
    try:
        async with asyncio.timeout(DRAIN_SECONDS):
            async for piece in response.content.iter_any():
                left -= len(piece)
                if left < 0:
                    return False
    except Exception:  # noqa: BLE001 - the answer is complete; only the connection is lost
        return False
    return True


async def _read_capped(response: aiohttp.ClientResponse, limit: int) -> str:
    """The body (up to ``limit`` bytes), however many pieces it arrives in."""
    data = bytearray()
    async for chunk in response.content.iter_chunked(16 * 1024):
        data += chunk
        if len(data) >= limit:
            break
    return bytes(data[:limit]).decode(errors="replace")


def _encode(body: dict[str, Any]) -> bytes:
    return jsoncodec.dumps_bytes(body)


def parse_event_json(data: str, provider: str) -> Any:
    """The JSON an event of a stream carries; ``InvalidResponse`` when it is not JSON."""
    try:
        return jsoncodec.loads(data)
    except ValueError:
        raise InvalidResponse(f"{provider} sent an event that is not JSON: {data[:200]!r}") from None


async def decode_events(
    events: AsyncGenerator[ServerSentEvent, None],
    decode: Callable[[Any], list[LlmEvent]],
    end: Callable[[], list[LlmEvent]],
    provider: str,
) -> AsyncGenerator[LlmEvent, None]:
    """A provider's ``LlmEvent``s from a stream of JSON events: each event's JSON through ``decode``, then
    ``end()`` once the stream is over. The stream is closed however the consumer leaves."""
    async with aclosing(events):
        async for event in events:
            for item in decoded(decode, parse_event_json(event.data, provider), provider):
                yield item
    for item in decoded(lambda _: end(), None, provider):
        yield item
