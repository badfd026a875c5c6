"""One attempt of a request (``HttpClient._attempt``): posted once, its answer's head read, and a status that is
not a success turned into a ``ProviderError`` here.

* **Redirects are never followed.** A request carries the API key and the whole conversation; following a
  redirect would hand both to whatever origin the answer names (aiohttp drops only ``Authorization`` on the
  way, not ``x-api-key`` or ``x-goog-api-key``). A 3xx answer is ``bad_request`` with its status, naming the
  origin it pointed to (never its path or query), and asking for ``base_url`` to be set to the final address.
* **An error answer** (4xx, 5xx) is read for its message, at most :data:`MAX_ERROR_BODY` bytes, with the key
  masked (a proxy may quote the request back), and mapped by ``errors.error_for_response``.
* **Failures of the connection** are ``transport`` errors, and a wait that passed its bound a ``timeout``
  (:func:`transport_error`); each says whether it came before an answer or in the middle of a stream.
* **Time.** ``wait`` (a :class:`~tether.alarms.Deadline`) bounds the wait for the answer's head and, for an
  error, its body; aiohttp itself keeps only the connect timeout, one ``ClientTimeout`` object per value.
"""

from __future__ import annotations

import functools
import os
import urllib.parse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tether.errors import BadRequest, ProviderError, RequestTimeout, TransportError
from tether.providers.http.errors import error_for_response
from tether.providers.http.pool import origin_of

if TYPE_CHECKING:
    import aiohttp

    from tether.alarms import Deadline

Signer = Callable[[str, bytes, dict[str, str]], tuple[Any, dict[str, str]]]
"""Signs one attempt (AWS SigV4: ``providers/bedrock_auth.py``): given its URL, body and headers, the URL to
request (as aiohttp takes it) and the headers to send. Called before every attempt, so a retry is signed anew."""
MAX_ERROR_BODY = 64 * 1024
"""Bytes of an error response read for its message."""


async def refused(
    response: aiohttp.ClientResponse, url: str, wait: Deadline, *, provider: str, secret: str | None
) -> ProviderError:
    """The ``ProviderError`` an answer that is not a 2xx stands for (a redirect included); its body, read for the
    provider's message, is released or closed. ``secret`` (the API key) is masked in a body that quotes it."""
    if response.status < 400:
        response.close()
        return redirect_error(provider, url, response.status, response.headers.get("Location"))
    try:
        text = await read_capped(response, MAX_ERROR_BODY, wait)
    finally:
        response.release()
    if secret is not None:
        text = text.replace(secret, "***")
    return error_for_response(provider, response.status, text, response.headers)


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


def transport_error(provider: str, exc: BaseException, timeout: float | None, *, mid_stream: bool) -> ProviderError:
    """What a failure of the connection (or a wait past ``timeout``: ``exc`` a ``TimeoutError``) is."""
    where = "in the middle of the stream" if mid_stream else "before an answer"
    if isinstance(exc, TimeoutError):
        waited = f"{timeout:g} s" if timeout is not None else "too long"
        return RequestTimeout(f"{provider} sent nothing for {waited} {where}", details={"timeout": timeout})
    return TransportError(f"the connection to {provider} failed {where}: {_transport_text(exc)}")


def _transport_text(exc: BaseException) -> str:
    """What went wrong, once: aiohttp's text of a refused connection names the server twice (``Cannot connect
    to host localhost:11434 ssl:default [Connect call failed ('127.0.0.1', 11434)]``); the host, the port and
    the system's reason say it."""
    import aiohttp  # loaded already: the exception came from it

    if isinstance(exc, aiohttp.ClientConnectorError):
        cause = exc.os_error
        reason = os.strerror(cause.errno) if cause.errno else (cause.strerror or str(cause) or type(cause).__name__)
        return f"cannot connect to {exc.host}:{exc.port}: {reason}"
    return f"{type(exc).__name__}: {exc}"


async def read_capped(response: aiohttp.ClientResponse, limit: int, wait: Deadline) -> str:
    """The body (up to ``limit`` bytes), however many pieces it arrives in."""
    content = response.content
    data = bytearray()
    while len(data) < limit:
        wait.start()
        try:
            piece = await content.readany()
        finally:
            wait.stop()
        if not piece:
            break
        data += piece
    return bytes(data[:limit]).decode(errors="replace")


@functools.lru_cache(maxsize=64)
def client_timeout(timeout: float | None) -> aiohttp.ClientTimeout:
    """aiohttp's timeouts for a request: connecting only (the waits for the answer are the caller's
    :class:`~tether.alarms.Deadline`); one object per value, not one per request."""
    import aiohttp

    return aiohttp.ClientTimeout(total=None, sock_connect=timeout)
