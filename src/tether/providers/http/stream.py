"""An answer's server-sent events, read chunk by chunk from its response within the response limits.

:func:`open_events` is the part of an attempt that reads a stream up to its first event (``retry.py`` may make the
attempt again until then); an :class:`EventStream` reads the rest, a chunk per :meth:`EventStream.read`, and is
never retried: a failure of the connection from then on is final, a ``transport`` or ``timeout`` error that
says it came in the middle of the stream.

* An AWS event stream (``application/vnd.amazon.eventstream``, Bedrock's) is framed by
  :class:`~tether.providers.http.eventstream.EventStreamDecoder` instead, its messages handed on as events.
* A response that is not an event stream (a server that ignored ``stream: true``) is read whole (within
  ``max_body_bytes``) and handed on as one event, for the decoder to read as a complete answer.
* A whole stream may hold at most ``max_stream_bytes``, one event ``max_event_bytes`` (``sse.py``).
* An event whose data is the end marker (OpenAI's ``[DONE]``) ends the stream: the rest of the body is read
  (briefly, and only a little of it) so that the connection goes back to the pool.
* The response is released (its connection reused) when its body was read to its end, closed otherwise,
  however the consumer leaves (:meth:`EventStream.close`).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from tether.errors import ProviderError
from tether.providers.http.attempt import transport_error
from tether.providers.http.body import ResponseLimits, decode_text, read_body, too_large
from tether.providers.http.eventstream import CONTENT_TYPE as AWS_EVENT_STREAM
from tether.providers.http.eventstream import EventStreamDecoder
from tether.providers.http.sse import ServerSentEvent, SSEDecoder

if TYPE_CHECKING:
    import aiohttp

    from tether.alarms import Deadline

DRAIN_SECONDS = 1.0
"""How long to wait for the end of a body after its end marker before giving the connection up."""
DRAIN_BYTES = 64 * 1024
"""How much of a body after its end marker is read to keep the connection; more, and it is dropped instead."""


class EventStream:
    """The events of one answer, from its first (see the module docstring)."""

    __slots__ = ("_finished", "_received", "_response", "_reusable", "_sse", "first", "limits", "provider", "wait")

    def __init__(
        self,
        response: aiohttp.ClientResponse,
        wait: Deadline,
        limits: ResponseLimits,
        provider: str,
        *,
        aws: bool = False,
    ) -> None:
        self._response = response
        self.wait = wait
        """Bounds each wait for the next chunk (the request's timeout)."""
        self.limits = limits
        self.provider = provider
        framing = EventStreamDecoder if aws else SSEDecoder
        self._sse: SSEDecoder | EventStreamDecoder = framing(max_event_bytes=limits.max_event_bytes, provider=provider)
        self._received = 0
        self._finished = self._reusable = False
        self.first: list[ServerSentEvent] = []
        """The events read while the stream was opened (at least one, unless it ended first)."""

    async def read(self) -> list[ServerSentEvent] | None:
        """The events of the next chunk (maybe none yet), or ``None`` once the body is over."""
        if self._finished:
            return None
        wait = self.wait
        wait.start()
        try:
            chunk = await self._response.content.readany()
        finally:
            wait.stop()
        if not chunk:  # the end of the body: what the framer still holds
            self._finished = self._reusable = True
            return self._sse.close()
        self._received += len(chunk)
        if self._received > self.limits.max_stream_bytes:
            raise too_large(self.provider, "a stream", "max_stream_bytes", self.limits.max_stream_bytes)
        return self._sse.feed(chunk)

    async def read_on(self) -> list[ServerSentEvent] | None:
        """:meth:`read` in the middle of the stream: a failure of the connection is final, and says so."""
        try:
            return await self.read()
        except ProviderError:
            raise
        except asyncio.CancelledError:
            if not self.wait.expired():
                raise
            raise transport_error(self.provider, TimeoutError(), self.wait.seconds, mid_stream=True) from None
        except Exception as exc:
            raise transport_error(self.provider, exc, self.wait.seconds, mid_stream=True) from exc

    async def finish(self) -> None:
        """The end marker came: read what is left of the body, briefly, to keep the connection."""
        if not self._finished:
            self._finished = True
            self._reusable = await _drain(self._response, self.wait)

    def close(self) -> None:
        """Give the connection back to the pool when the body was read to its end, else drop it."""
        self._response.release() if self._reusable else self._response.close()


async def open_events(
    response: aiohttp.ClientResponse, wait: Deadline, limits: ResponseLimits, provider: str
) -> EventStream | str:
    """The answer's stream, read up to its first event; or, when the answer is not an event stream, its whole
    body as text. The response is closed if this fails."""
    content_type = response.headers.get("Content-Type", "")
    aws = AWS_EVENT_STREAM in content_type
    if not aws and "text/event-stream" not in content_type:
        data = await read_body(response, limits.max_body_bytes, provider=provider, setting="max_body_bytes", wait=wait)
        return decode_text(data, provider)
    stream = EventStream(response, wait, limits, provider, aws=aws)
    try:
        while not stream.first:
            events = await stream.read()
            if events is None:
                break
            stream.first = events
    except BaseException:
        stream.close()
        raise
    return stream


async def _drain(response: aiohttp.ClientResponse, wait: Deadline) -> bool:
    """Read what is left of a body whose answer is complete; whether the connection can be reused."""
    content = response.content
    if content.at_eof():  # the end of the body came with the end marker: nothing to wait for
        return True
    left = DRAIN_BYTES
    wait.start(DRAIN_SECONDS)
    try:
        while piece := await content.readany():
            left -= len(piece)
            if left < 0:
                return False
    except asyncio.CancelledError:
        if wait.expired():
            return False
        raise
    except Exception:  # noqa: BLE001 - the answer is complete; only the connection is lost
        return False
    finally:
        wait.stop()
    return True
