"""What a provider's decoder is: one response's wire JSON read into tether's ``LlmEvent``s.

Each wire protocol has one decoder, in ``<protocol>_stream.py`` next to the ``<protocol>.py`` that builds its
requests, and every decoder speaks the same three words:

* ``feed(data)``: the events of one streamed piece (a server-sent event's JSON). A piece that is a whole
  answer (a server that ignored ``stream: true``) is read as one.
* ``end()``: after the last piece, the turn's close (open tool calls ended, ``StreamEnd``). A stream that
  stopped before its answer's end raises (:func:`unfinished`).
* ``whole(data)``: the events of a whole (non-streamed) answer, its close included. A whole answer cannot have
  been cut on the way, so one without its finish is malformed (``invalid_response``), not a broken connection.

``feed`` and ``whole`` take parsed JSON; ``feed_json`` and ``whole_json`` take its text, as the HTTP layer has
it, and are what it calls. A decoder serves one response: the HTTP client (``providers/http/client.py``)
feeds it each event where the bytes are read, or hands it a whole body.
"""

from __future__ import annotations

from typing import Any, Protocol

import msgspec

from tether.errors import InvalidResponse, ProviderError, TransportError
from tether.events import LlmEvent

__all__ = ["Decoder", "parse_json_text", "unfinished"]


class Decoder(Protocol):
    """One response's wire JSON to ``LlmEvent``s (see the module docstring)."""

    def feed(self, data: Any) -> list[LlmEvent]:
        """The events of one streamed piece."""
        ...

    def feed_json(self, text: str | bytes) -> list[LlmEvent]:
        """The events of one streamed piece, from its JSON text."""
        ...

    def whole_json(self, body: str | bytes) -> list[LlmEvent]:
        """The events of a whole answer, from its body's text."""
        ...

    def end(self) -> list[LlmEvent]:
        """The events that close the turn, after the last piece; raises if the answer was cut short."""
        ...

    def whole(self, data: Any) -> list[LlmEvent]:
        """The events of a whole (non-streamed) answer, the close included."""
        ...


def unfinished(provider: str, *, started: bool, whole: bool = False, missing: str = "") -> ProviderError:
    """The error of an answer that ended without its finish (the field ``missing`` names it): nothing at all
    is ``invalid_response``, so is a whole answer (it cannot have been cut); a stream that stopped part way
    was cut, a ``transport`` error the loop may retry."""
    if not started:
        return InvalidResponse(f"{provider} ended the stream without sending anything")
    if whole:
        return InvalidResponse(f"{provider} sent a malformed answer: it has no {missing}", details={"field": missing})
    return TransportError(f"{provider} ended the stream before finishing its answer")


def parse_json_text(text: str | bytes, provider: str, what: str = "an event") -> Any:
    """The JSON value of ``text`` (one event's data, or a whole body); ``InvalidResponse`` when it is not JSON."""
    try:
        return msgspec.json.decode(text)
    except ValueError:
        shown = text if isinstance(text, str) else text.decode(errors="replace")
        raise InvalidResponse(f"{provider} sent {what} that is not JSON: {shown[:200]!r}") from None
