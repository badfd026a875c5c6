"""The HTTP layer of every wire provider: pooled connections, timeouts, retries, error mapping.

The contract
------------
* **Connections.** One ``aiohttp.ClientSession`` per event loop and origin (scheme, host, port), shared by
  every provider and run on that loop, with a pool sized for thousands of concurrent runs. Sessions live as
  long as their loop: ``asyncio.run()`` (and any runner that shuts down async generators) closes them; a host
  managing its own loop calls :func:`close_sessions` before closing it.
* **Timeouts.** ``Request.timeout`` bounds connecting, the wait for the first byte and every wait between
  chunks; a stream that goes quiet that long fails with ``timeout``.
* **Retries.** HTTP 429, 500, 502, 503, 504 and 529, connection failures and timeouts are retried with
  exponential backoff and full jitter (``RetryPolicy``), honouring ``Retry-After`` and ``retry-after-ms``
  (capped by ``RetryPolicy.max_delay``), never past the run's deadline. **A stream is never retried once an
  event has been delivered**: the consumer has acted on it, and a replay would duplicate output.
* **Errors.** Every failure is a :class:`~tether.errors.ProviderError` subclass with a stable code and the
  HTTP status, the provider's own message and its request id. A context-length error is ``context_overflow``.
* **Secrets.** API keys are held in :class:`Secret` and only ever written into request headers: no message,
  repr or log line contains one.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import math
import random
import re
import time
import urllib.parse
import weakref
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tether.errors import (
    AuthFailed,
    BadRequest,
    ContextOverflow,
    InvalidResponse,
    ProviderError,
    ProviderUnavailable,
    RateLimited,
    RequestTimeout,
    TransportError,
)
from tether.events import LlmEvent
from tether.providers.sse import ServerSentEvent, SSEDecoder
from tether.providers.wire import decoded

if TYPE_CHECKING:
    import aiohttp

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504, 529})
MAX_CONNECTIONS = 4096
"""Connections per origin and loop: enough for thousands of concurrent runs without queueing."""
MAX_ERROR_BODY = 64 * 1024
"""Bytes of an error response read for its message."""

_CONTEXT_OVERFLOW = re.compile(
    r"context[ _-]?(length|window)|maximum context|prompt is too long|too many (input )?tokens|"
    r"exceeds? the (model'?s? )?(maximum )?context|exceeds? the maximum number of tokens|input (is )?too long",
    re.IGNORECASE,
)


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
    """JSON requests to one API, answered with JSON or a stream of server-sent events."""

    __slots__ = ("_api_key", "_auth_header", "_auth_prefix", "_headers", "base_url", "provider", "retry")

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
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.provider = provider
        self.retry = retry or RetryPolicy()
        self._api_key = api_key
        self._auth_header = auth_header
        self._auth_prefix = auth_prefix
        self._headers = {"Content-Type": "application/json", **(headers or {})}

    def __repr__(self) -> str:
        return f"HttpClient({self.base_url!r}, provider={self.provider!r})"

    async def post_json(
        self, path: str, body: dict[str, Any] | bytes, *, timeout: float | None, deadline: float | None
    ) -> Any:
        """POST ``body`` (a dict, or JSON already encoded); the response's JSON. Retried as the module
        docstring says."""
        payload = body if isinstance(body, bytes) else _encode(body)
        for attempt in range(self.retry.max_retries + 1):
            try:
                response = await self._post(path, payload, timeout)
                try:
                    text = await response.text()
                finally:
                    response.release()
            except ProviderError as error:
                await self._back_off(error, attempt, deadline)
                continue
            except Exception as exc:  # noqa: BLE001 - every transport failure gets a code
                await self._back_off(self._transport_error(exc, timeout), attempt, deadline)
                continue
            try:
                return json.loads(text)
            except ValueError:
                raise InvalidResponse(f"{self.provider} sent a body that is not JSON: {text[:200]!r}") from None
        raise AssertionError("unreachable: _back_off raises on the last attempt")

    async def stream_events(
        self,
        path: str,
        body: dict[str, Any] | bytes,
        *,
        timeout: float | None,
        deadline: float | None,
        end_marker: str | None = None,
    ) -> AsyncGenerator[ServerSentEvent, None]:
        """POST ``body`` and yield the response's server-sent events as they arrive.

        An event whose data is ``end_marker`` (OpenAI's ``[DONE]``) ends the stream: it is not yielded, and the
        rest of the body is read so that the connection goes back to the pool. A response that is not an
        event stream (a server that ignored ``stream: true``) is yielded whole, as one event, for the provider
        to read as a complete answer. ``body`` may be JSON already encoded.
        """
        payload = body if isinstance(body, bytes) else _encode(body)
        for attempt in range(self.retry.max_retries + 1):
            delivered = False
            try:
                response = await self._post(path, payload, timeout)
                reusable = False
                try:
                    if "text/event-stream" not in response.headers.get("Content-Type", ""):
                        whole = await response.text()
                        reusable = delivered = True
                        yield ServerSentEvent(whole)
                        return
                    decoder = SSEDecoder()
                    async for chunk in response.content.iter_any():
                        for event in decoder.feed(chunk):
                            if event.data == end_marker:
                                reusable = await _drain(response)
                                return
                            delivered = True
                            yield event
                    for event in decoder.close():
                        if event.data == end_marker:
                            break
                        delivered = True
                        yield event
                    reusable = True
                finally:
                    response.release() if reusable else response.close()
                return
            except ProviderError as error:
                if delivered:
                    raise
                await self._back_off(error, attempt, deadline)
            except Exception as exc:  # every transport failure gets a code
                failure = self._transport_error(exc, timeout, mid_stream=delivered)
                if delivered:
                    raise failure from exc
                await self._back_off(failure, attempt, deadline)

    async def _post(self, path: str, payload: bytes, timeout: float | None) -> aiohttp.ClientResponse:
        """One attempt; a response with status < 400, or the mapped ``ProviderError``."""
        import aiohttp

        session = await session_for(self.base_url)
        headers = self._headers
        if self._api_key is not None:
            headers = {**headers, self._auth_header: self._auth_prefix + self._api_key.reveal()}
        response = await session.post(
            self.base_url + path,
            data=payload,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=timeout, sock_read=timeout),
        )
        if response.status < 400:
            return response
        try:
            text = await _read_capped(response, MAX_ERROR_BODY)
        finally:
            response.release()
        if self._api_key is not None:  # a proxy that quotes the request back must not leak the key
            text = text.replace(self._api_key.reveal(), "***")
        raise error_for_response(self.provider, response.status, text, response.headers)

    async def _back_off(self, error: ProviderError, attempt: int, deadline: float | None) -> None:
        """Wait before the next attempt, or raise ``error`` when no attempt is left or worth making."""
        if not is_retryable(error) or attempt >= self.retry.max_retries:
            raise error
        wait = self.retry.delay(attempt, getattr(error, "retry_after", None))
        loop = asyncio.get_running_loop()
        if deadline is not None and loop.time() + wait >= deadline:
            raise error
        await asyncio.sleep(wait)

    def _transport_error(self, exc: Exception, timeout: float | None, *, mid_stream: bool = False) -> ProviderError:
        where = "in the middle of the stream" if mid_stream else "before an answer"
        if isinstance(exc, TimeoutError):
            waited = f"{timeout:g} s" if timeout is not None else "too long"
            return RequestTimeout(f"{self.provider} sent nothing for {waited} {where}", details={"timeout": timeout})
        return TransportError(f"the connection to {self.provider} failed {where}: {type(exc).__name__}: {exc}")


DRAIN_SECONDS = 1.0
"""How long to wait for the end of a body after its end marker before giving the connection up."""


async def _drain(response: aiohttp.ClientResponse) -> bool:
    """Read what is left of a body whose answer is complete; whether the connection can be reused."""
    try:
        async with asyncio.timeout(DRAIN_SECONDS):
            await response.content.read()
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


def is_retryable(error: ProviderError) -> bool:
    """Whether another attempt may succeed: rate limits, overload (the HTTP statuses of ``RETRY_STATUSES``),
    broken connections and timeouts; never an exhausted quota."""
    if error.details.get("insufficient_quota"):
        return False
    if error.status is not None and not isinstance(error, TransportError | RequestTimeout):
        return error.status in RETRY_STATUSES
    return isinstance(error, RateLimited | ProviderUnavailable | TransportError | RequestTimeout)


def error_for_response(provider: str, status: int, body: str, headers: Any) -> ProviderError:
    """The ``ProviderError`` for an HTTP error response, with the provider's message and request id."""
    message, code = provider_message(body)
    details: dict[str, Any] = {"provider_code": code} if code else {}
    if status == 429 and code == "insufficient_quota":
        details["insufficient_quota"] = True
    kind = _kind_for_status(status, message, code)
    return kind(
        f"{provider} returned HTTP {status}: {message}",
        status=status,
        provider_message=message,
        request_id=_first_header(headers, "x-request-id", "request-id", "x-goog-request-id", "cf-ray")
        or _body_request_id(body),
        retry_after=retry_after(headers),
        details=details,
    )


def _body_request_id(body: str) -> str | None:
    """The request id some providers (Anthropic) also write into an error body."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    request_id = data.get("request_id") if isinstance(data, dict) else None
    return request_id if isinstance(request_id, str) else None


def _kind_for_status(status: int, message: str, code: str | None) -> type[ProviderError]:
    if status in (400, 413, 422) and (code == "context_length_exceeded" or _CONTEXT_OVERFLOW.search(message)):
        return ContextOverflow
    if status in (401, 403):
        return AuthFailed
    if status == 408:
        return RequestTimeout
    if status == 429:
        return RateLimited
    if status >= 500:
        return ProviderUnavailable
    return BadRequest


def error_for_payload(provider: str, payload: Any) -> ProviderError:
    """The ``ProviderError`` for an error object sent inside a stream, read from every field that names it
    (``type``, ``code``, ``status``); a numeric code is read as the HTTP status it stands for."""
    error = payload.get("error", payload) if isinstance(payload, dict) else payload
    message, _ = provider_message(json.dumps(payload))
    fields = error if isinstance(error, dict) else {}
    names = {str(fields[key]).lower() for key in ("type", "code", "status") if fields.get(key) is not None}
    details: dict[str, Any] = {"provider_code": ",".join(sorted(names))} if names else {}

    def named(*words: str) -> bool:
        return any(word in name for name in names for word in words)

    status = next((int(name) for name in names if name.isdigit() and int(name) >= 400), None)
    kind: type[ProviderError]
    if named("context_length") or _CONTEXT_OVERFLOW.search(message):
        kind = ContextOverflow
    elif status is not None:
        kind = _kind_for_status(status, message, None)
    elif named("rate_limit", "resource_exhausted"):
        kind = RateLimited
    elif named("auth", "permission", "unauthenticated"):
        kind = AuthFailed
    elif named("invalid_request", "invalid_argument", "not_found"):
        kind = BadRequest
    else:
        kind = ProviderUnavailable  # overloaded, server_error, unavailable, or unknown: the provider's side
    return kind(f"{provider} reported an error in the stream: {message}", provider_message=message, details=details)


def provider_message(body: str) -> tuple[str, str | None]:
    """The human message and the machine code in an error body, whichever of the usual shapes it has."""
    try:
        data = json.loads(body)
    except ValueError:
        return (body.strip()[:500] or "(empty body)"), None
    if isinstance(data, list) and data and isinstance(data[0], dict):  # Gemini streams errors as [ {...} ]
        data = data[0]
    error = data.get("error", data) if isinstance(data, dict) else data
    if isinstance(error, str):
        return error[:500], None
    if not isinstance(error, dict):
        return str(error)[:500], None
    message = error.get("message") or error.get("detail") or data.get("message") or json.dumps(error)[:500]
    upstream = (error.get("metadata") or {}).get("raw") if isinstance(error.get("metadata"), dict) else None
    if isinstance(upstream, str) and upstream not in str(message):  # a gateway's wrapper around the real reason
        message = f"{message}: {upstream}"
    code = error.get("code") or error.get("type") or error.get("status")
    return str(message)[:1000], (str(code) if code is not None else None)


def retry_after(headers: Any) -> float | None:
    """Seconds to wait, from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    milliseconds = _first_header(headers, "retry-after-ms")
    if milliseconds is not None:
        try:
            wait = float(milliseconds) / 1000
        except ValueError:
            pass
        else:
            if math.isfinite(wait):
                return wait
    value = _first_header(headers, "retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return seconds if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _first_header(headers: Any, *names: str) -> str | None:
    for name in names:
        value = headers.get(name)
        if value is not None:
            return str(value)
    return None


def _encode(body: dict[str, Any]) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def parse_event_json(data: str, provider: str) -> Any:
    """The JSON an event of a stream carries; ``InvalidResponse`` when it is not JSON."""
    try:
        return json.loads(data)
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
