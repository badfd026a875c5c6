"""Exchanges: what went over the wire for each provider call of a run, kept when a host asks for it.

The contract
------------
* **Opt-in, and free when off.** ``Agent(record_exchanges=True)`` (``[session] record_exchanges``, ``tether run
  --record-exchanges``) keeps, in the run's session, each provider call's request body and its answer as it
  came: the data of each server-sent event (its JSON), or the whole body of an answer that was not streamed.
  When it is off, a request carries no recorder (``Request.record`` is ``None``) and nothing is copied, masked
  or stored.
* **Masked like telemetry.** What is kept passes through the run's :class:`~tether.redaction.Redaction` when the
  call is over: the provider's key and every other known key, bearer tokens, URL passwords and secret-named
  members (``"api_key": "..."``) are ``***``. The texts are kept as text, not parsed again: a masked value may
  leave them JSON no longer, and what was sent is what is shown.
* **What a call is.** One :class:`Exchange` per provider call the run made (a turn's call, a corrective retry,
  the summary call after a step limit, a compaction's summary), in the order made: its run, turn and attempt,
  the model, when it started, the body sent (once, however many times the HTTP layer retried it) and the
  answer that was read (a failed attempt's error body is the call's error, not an answer). A call interrupted
  midway keeps what had come. Providers that speak HTTP record; one that sends no body (the embedded model, a
  scripted one) records nothing.
* **Where they go.** A run in a session hands its exchanges to the session's store after each turn, with the
  transcript (``session_run.py``); stores that keep them are :class:`~tether.sessions.ExchangeStore`\\s (every
  store tether has) and read them back with ``load_exchanges(session_id)``. A run without a session keeps none.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from tether.redaction import Redaction


class Exchange(msgspec.Struct, frozen=True, gc=False):
    """One provider call as it went over the wire, masked (see the module docstring)."""

    run_id: str
    turn: int
    attempt: int
    model: str
    """The ``provider:model`` string."""
    started_at: datetime
    request: str
    """The body sent, as the JSON text it was."""
    response: tuple[str, ...]
    """The data of each server-sent event, in order; an answer that was not streamed: its whole body."""
    streamed: bool
    """Whether the answer came as events (``False``: one whole body)."""


_EXCHANGE_JSON = msgspec.json.Encoder()
_EXCHANGE_READER = msgspec.json.Decoder(Exchange)


def exchange_json(exchange: Exchange) -> bytes:
    """An exchange as the stores keep it: one JSON object."""
    return _EXCHANGE_JSON.encode(exchange)


def exchange_from_json(data: bytes | str) -> Exchange:
    """An exchange read back from a store; ``msgspec.ValidationError`` or ``msgspec.DecodeError`` when it is not
    one (the store names where it was)."""
    return _EXCHANGE_READER.decode(data)


class ExchangeRecorder:
    """What one provider call sends and reads, as the HTTP layer hands it over (``Request.record``)."""

    __slots__ = ("body", "events", "started_at", "streamed")

    def __init__(self) -> None:
        self.started_at = datetime.now(UTC)
        self.body: bytes | None = None
        self.events: list[str] = []
        self.streamed = True

    def sent(self, body: bytes) -> None:
        """The request body, as it is posted."""
        self.body = body

    def event(self, data: str) -> None:
        """One server-sent event's data, as it is read."""
        self.events.append(data)

    def whole(self, text: str) -> None:
        """An answer that came as one body."""
        self.events.append(text)
        self.streamed = False


class ExchangeLog:
    """A run's exchanges not yet handed to its store, masked as each call ends."""

    __slots__ = ("_pending", "model", "redaction", "run_id")

    def __init__(self, run_id: str, model: str, redaction: Redaction) -> None:
        self.run_id, self.model, self.redaction = run_id, model, redaction
        self._pending: list[Exchange] = []

    def ended(self, recorder: ExchangeRecorder, turn: int, attempt: int) -> None:
        """A call is over: what it sent and read is kept, masked; a call that sent nothing keeps nothing."""
        if recorder.body is None:
            return
        text = self.redaction.text
        request = text(recorder.body.decode("utf-8", errors="replace"))
        response = tuple(text(data) for data in recorder.events)
        self._pending.append(
            Exchange(self.run_id, turn, attempt, self.model, recorder.started_at, request, response, recorder.streamed)
        )

    def take(self) -> list[Exchange]:
        """The exchanges kept since the last take, in the order the calls were made."""
        taken, self._pending = self._pending, []
        return taken
