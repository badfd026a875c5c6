"""Server-sent events, decoded incrementally from the bytes of an HTTP response body.

Follows the WHATWG event-stream rules that real providers lean on: lines end in CRLF, LF or a lone CR (also
split across chunks); ``:`` starts a comment (keep-alive pings); ``data:`` lines of one event are joined with
newlines; one space after the colon is dropped; an event is dispatched at a blank line, or at the end of the
stream when the last blank line is missing. Multi-byte UTF-8 characters split across chunks are kept whole.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class ServerSentEvent:
    data: str
    event: str = ""
    id: str | None = None


class SSEDecoder:
    """Feed body chunks with :meth:`feed`; call :meth:`close` at the end of the body."""

    __slots__ = ("_data", "_decoder", "_event", "_id", "_skip_lf", "_tail")

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._tail = ""
        self._skip_lf = False
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        text = self._decoder.decode(chunk)
        if self._skip_lf and text:
            self._skip_lf = False
            if text[0] == "\n":  # the LF of a CRLF whose CR ended the previous chunk
                text = text[1:]
        if not text:
            return []
        self._skip_lf = text.endswith("\r")
        lines = _LINE_BREAK.split(self._tail + text)
        self._tail = lines.pop()
        events: list[ServerSentEvent] = []
        for line in lines:
            self._line(line, events)
        return events

    def close(self) -> list[ServerSentEvent]:
        """Dispatch what is left: a last line without its line break, an event without its blank line."""
        events: list[ServerSentEvent] = []
        rest = self._tail + self._decoder.decode(b"", final=True)
        self._tail = ""
        if rest:
            self._line(rest, events)
        self._line("", events)
        return events

    def _line(self, line: str, events: list[ServerSentEvent]) -> None:
        if not line:
            if self._data:
                events.append(ServerSentEvent("\n".join(self._data), self._event, self._id))
            self._data = []
            self._event = ""
            return
        if line[0] == ":":
            return
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id" and "\0" not in value:
            self._id = value
