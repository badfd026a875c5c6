"""Server-sent events, decoded incrementally from the bytes of an HTTP response body.

Follows the WHATWG event-stream rules that real providers lean on: one leading byte-order mark is dropped;
lines end in CRLF, LF or a lone CR (also split across chunks); ``:`` starts a comment (keep-alive pings);
``data:`` lines of one event are joined with newlines; one space after the colon is dropped; an event is
dispatched at a blank line, or at the end of the stream when the last blank line is missing. Text is UTF-8;
bytes that are not valid UTF-8 read as U+FFFD, as the standard says.

Two promises about cost, whatever the server sends and however its bytes are cut into chunks:

* **Linear.** Lines are split on bytes (a line break is ASCII, never part of a multi-byte character), and
  the unfinished line at the end of a chunk is kept as a list of pieces, joined once, when its line break
  arrives. Feeding a chunk costs time and memory in proportion to that chunk, not to the line it extends.
* **Bounded.** An event (its ``data`` lines together, plus the line being read) may hold at most
  ``max_event_bytes``; the decoder refuses a longer one with ``InvalidResponse`` as soon as the bytes it has
  been fed pass that size, without waiting for the line or the event to end.
"""

from __future__ import annotations

from dataclasses import dataclass

from tether.errors import InvalidResponse

BOM = b"\xef\xbb\xbf"
"""The UTF-8 byte-order mark; one at the very start of a stream is not part of it."""
DEFAULT_MAX_EVENT_BYTES = 32 * 1024 * 1024
"""The default cap of one event (see ``ResponseLimits.max_event_bytes`` for why this size)."""


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    data: str
    event: str = ""
    id: str | None = None


class SSEDecoder:
    """Feed body chunks with :meth:`feed`; call :meth:`close` at the end of the body.

    ``max_event_bytes`` caps one event (see the module docstring); ``provider`` names the sender in the error.
    """

    __slots__ = (
        "_data",
        "_data_bytes",
        "_event",
        "_head",
        "_id",
        "_pending",
        "_pending_bytes",
        "_skip_lf",
        "max_event_bytes",
        "provider",
    )

    def __init__(self, *, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES, provider: str = "the server") -> None:
        self.max_event_bytes = max_event_bytes
        self.provider = provider
        self._head: bytes | None = b""  # the first bytes, until it is known whether they start with a BOM
        self._pending: list[bytes] = []  # the line being read, in the pieces it arrived in
        self._pending_bytes = 0
        self._skip_lf = False
        self._data: list[str] = []
        self._data_bytes = 0
        self._event = ""
        self._id: str | None = None

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        if (
            chunk[:6] == b"data: "
            and chunk.find(b"\n") == len(chunk) - 2
            and chunk[-1] == 0x0A
            and self._head is None
            and not self._pending
            and not self._data
            and not self._skip_lf
            and b"\r" not in chunk
            and len(chunk) - 2 <= self.max_event_bytes
        ):
            # What servers send nearly always, one chunk per event: ``data: ...`` and a blank line, read
            # as the rules below would read it (one data line, then the dispatch), without splitting lines.
            event = ServerSentEvent(chunk[6:-2].decode(errors="replace"), self._event, self._id)
            self._event = ""
            return [event]
        if self._head is not None:
            chunk = self._head + chunk
            if len(chunk) < len(BOM) and BOM.startswith(chunk):
                self._head = chunk
                return []
            self._head = None
            if chunk.startswith(BOM):
                chunk = chunk[len(BOM) :]
        if self._skip_lf and chunk:
            self._skip_lf = False
            if chunk[0] == 0x0A:  # the LF of a CRLF whose CR ended the previous chunk
                chunk = chunk[1:]
        if not chunk:
            return []
        events: list[ServerSentEvent] = []
        for piece in chunk.splitlines(keepends=True):
            last = piece[-1]
            if last != 0x0A and last != 0x0D:  # the unfinished line at the end of the chunk
                self._pending.append(piece)
                self._pending_bytes += len(piece)
                self._check_size()
                break
            end = -2 if piece.endswith(b"\r\n") else -1
            if self._pending:
                self._pending.append(piece[:end])
                line = b"".join(self._pending)
                self._pending.clear()
                self._pending_bytes = 0
            else:
                line = piece[:end]
            self._line(line, events)
        self._skip_lf = chunk[-1] == 0x0D
        return events

    def close(self) -> list[ServerSentEvent]:
        """Dispatch what is left: a last line without its line break, an event without its blank line."""
        events: list[ServerSentEvent] = []
        rest = b"".join(self._pending) if self._head is None else self._head
        self._head = None
        self._pending.clear()
        self._pending_bytes = 0
        if rest:
            self._line(rest, events)
        self._line(b"", events)
        return events

    def _check_size(self) -> None:
        size = self._data_bytes + self._pending_bytes
        if size > self.max_event_bytes:
            raise InvalidResponse(
                f"{self.provider} sent a server-sent event larger than {self.max_event_bytes} bytes "
                "(ResponseLimits.max_event_bytes); pass the provider a larger "
                "response_limits=ResponseLimits(max_event_bytes=...) if such events are expected",
                details={"limit": "max_event_bytes", "max_event_bytes": self.max_event_bytes},
            )

    def _line(self, raw: bytes, events: list[ServerSentEvent]) -> None:
        if not raw:
            if self._data:
                events.append(ServerSentEvent("\n".join(self._data), self._event, self._id))
            self._data = []
            self._data_bytes = 0
            self._event = ""
            return
        if raw[0] == 0x3A:  # ":" a comment
            return
        field, colon, value = raw.decode(errors="replace").partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
            self._data_bytes += len(raw)
            self._check_size()
        elif field == "event":
            self._event = value
        elif field == "id" and "\0" not in value:
            self._id = value
