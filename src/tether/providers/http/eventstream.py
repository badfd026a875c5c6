"""AWS event-stream messages (``application/vnd.amazon.eventstream``), framed from the bytes of a response.

Bedrock's ConverseStream answers in binary frames, not server-sent events. Each message is a 12-byte prelude
(its total length, its headers' length, the prelude's CRC32), its headers (a name, a type byte and a value
each), its payload, and the CRC32 of everything before it. Both checksums are verified: a frame that fails
either, or that claims lengths that cannot be, is ``invalid_response``.

A message becomes one :class:`~tether.providers.http.sse.ServerSentEvent` whose data is JSON in the form the
AWS SDKs hand out, ``{"<event type>": <payload>}``, so that the HTTP layer's readers (decoding, recording
exchanges) treat both framings alike:

* an event (``:message-type`` ``event``): ``{"contentBlockDelta": {...}}``, named by ``:event-type``;
* an exception (``:message-type`` ``exception``): ``{"throttlingException": {"message": ...}}``, named by
  ``:exception-type``;
* an error (``:message-type`` ``error``): ``{"error": {"code": ..., "message": ...}}`` from ``:error-code``
  and ``:error-message``.

Like :class:`~tether.providers.http.sse.SSEDecoder` it is fed chunks however the connection cuts them (a frame
may span many chunks, a chunk hold many frames), and holds at most one message: one larger than
``max_event_bytes`` is refused from its prelude, before its bytes are read.
"""

from __future__ import annotations

import json
import struct
import zlib

from tether.errors import InvalidResponse
from tether.providers.http.sse import DEFAULT_MAX_EVENT_BYTES, ServerSentEvent

__all__ = ["CONTENT_TYPE", "EventStreamDecoder"]

CONTENT_TYPE = "application/vnd.amazon.eventstream"
PRELUDE = 12
"""Bytes of a message's prelude: total length, headers length, the prelude's CRC32 (big-endian uint32s)."""
MINIMUM = PRELUDE + 4
"""The smallest message: a prelude and the message's CRC32, no headers and no payload."""
_FIXED = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}
"""Header value types of a fixed size (booleans carry none); 6 (bytes) and 7 (string) have a 2-byte length."""


class EventStreamDecoder:
    """Feed body chunks with :meth:`feed`; call :meth:`close` at the end of the body."""

    __slots__ = ("_buffer", "max_event_bytes", "provider")

    def __init__(self, *, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES, provider: str = "the server") -> None:
        self.max_event_bytes = max_event_bytes
        self.provider = provider
        self._buffer = bytearray()

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """The messages completed by ``chunk``."""
        buffer = self._buffer
        buffer += chunk
        events: list[ServerSentEvent] = []
        start = 0
        while len(buffer) - start >= PRELUDE:
            total, headers_length, prelude_crc = struct.unpack_from(">III", buffer, start)
            if zlib.crc32(buffer[start : start + 8]) != prelude_crc:
                raise self._broken("a frame whose prelude fails its checksum")
            if total < MINIMUM or headers_length > total - MINIMUM:
                raise self._broken(f"a frame of impossible lengths (total {total}, headers {headers_length})")
            if total > self.max_event_bytes:
                raise InvalidResponse(
                    f"{self.provider} sent an event-stream message of {total} bytes, more than {self.max_event_bytes} "
                    "(ResponseLimits.max_event_bytes)",
                    details={"limit": "max_event_bytes", "max_event_bytes": self.max_event_bytes},
                )
            if len(buffer) - start < total:
                break
            message = bytes(buffer[start : start + total])
            start += total
            if zlib.crc32(message[:-4]) != struct.unpack_from(">I", message, total - 4)[0]:
                raise self._broken("a frame that fails its checksum")
            headers = self._headers(message[PRELUDE : PRELUDE + headers_length])
            events.append(self._event(headers, message[PRELUDE + headers_length : -4]))
        del buffer[:start]
        return events

    def close(self) -> list[ServerSentEvent]:
        """The end of the body: a frame left unfinished is dropped (the decoder sees a stream cut short)."""
        self._buffer.clear()
        return []

    def _headers(self, data: bytes) -> dict[str, str]:
        """The message's headers; string values kept, the others (never read here) skipped."""
        headers: dict[str, str] = {}
        at, end = 0, len(data)
        try:
            while at < end:
                size = data[at]
                name = data[at + 1 : at + 1 + size].decode()
                at += 1 + size
                kind = data[at]
                at += 1
                if kind in (6, 7):
                    (length,) = struct.unpack_from(">H", data, at)
                    value = data[at + 2 : at + 2 + length]
                    at += 2 + length
                    if kind == 7:
                        headers[name] = value.decode()
                elif kind in _FIXED:
                    at += _FIXED[kind]
                else:
                    raise self._broken(f"a header of unknown type {kind}")
        except (IndexError, struct.error, UnicodeDecodeError):
            raise self._broken("malformed headers") from None
        if at != end:
            raise self._broken("malformed headers")
        return headers

    def _event(self, headers: dict[str, str], payload: bytes) -> ServerSentEvent:
        kind = headers.get(":message-type", "event")
        if kind == "error":
            error = {"code": headers.get(":error-code", "error"), "message": headers.get(":error-message", "")}
            return ServerSentEvent(json.dumps({"error": error}), "error")
        name = headers.get(":exception-type" if kind == "exception" else ":event-type", "")
        text = payload.decode(errors="replace").strip() or "{}"
        return ServerSentEvent(f"{{{json.dumps(name)}:{text}}}", name)

    def _broken(self, what: str) -> InvalidResponse:
        return InvalidResponse(f"{self.provider} sent {what} in its event stream")
