"""StreamAccumulator: a provider's ``LlmEvent``s folded into one assistant turn.

Every provider adapter emits the same small set of events, so this is the one place that knows how parts
are built from deltas: consecutive text deltas make one ``Text``; thinking is kept apart in ``Thinking``
parts (a signature closes a block); tool calls are assembled by id, so several calls may stream interleaved;
parts keep their arrival order. What cannot be used is reported, not guessed at:

* arguments that are not a JSON object after ``ToolCallEnd`` stay raw (``arguments=None``); the executor
  answers them with an ``invalid_arguments`` error result (:func:`arguments_problem` says why);
* arguments nested deeper than :data:`MAX_ARGUMENT_DEPTH` levels are treated the same way, and only the
  start of their raw text is kept (:func:`read_arguments`): this is where arguments come in, so no later step
  (validation, the session's encoding, a provider's encoding of the next request) meets a deeper one;
* a call still open when the provider stops with ``finish_reason="length"`` was cut off: it is returned in
  ``incomplete_calls`` and never executed;
* a stream without ``StreamEnd`` gives ``ended=False``.

What a host is shown as it comes is what :meth:`StreamAccumulator.add` returns: the text and thinking deltas
themselves, a provider's ``ProviderRetry`` and ``RateLimitWait``, and the marks of a thinking block
(``ThinkingStarted`` when one begins, ``ThinkingEnded`` when it is closed or the answer goes on with something
else). Where one event shows two things (a block's first delta is its start and its text), the first is returned and
the rest is :attr:`held`, for the watch to hand on before it waits for the next event (``interrupts.Watched``). Only
thinking makes more than one: the marks are made where a part begins or a call starts, never for a delta within a
part.
"""

from __future__ import annotations

from time import perf_counter

import msgspec
from msgspec.structs import replace

from tether.errors import InvalidResponse
from tether.events import (
    THINKING_ENDED,
    THINKING_STARTED,
    FallbackTaken,
    FinishReason,
    LlmEvent,
    ProviderRetry,
    RateLimitWait,
    StreamEnd,
    StreamStart,
    TextDelta,
    ThinkingDelta,
    ThinkingEnded,
    ThinkingStarted,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from tether.loop.arguments import read_arguments
from tether.messages import JsonObject, Message, Part, Text, Thinking, ToolCall
from tether.usage import NO_USAGE, Usage


class AccumulatedTurn(msgspec.Struct, frozen=True, gc=False):
    """One assistant turn as the provider produced it: what a provider call's stream folds into (and what a
    durable run keeps of the call, ``loop/steps.py``)."""

    message: Message
    """The assistant message: text, thinking and the complete tool calls, in arrival order."""
    tool_calls: tuple[ToolCall, ...]
    incomplete_calls: tuple[ToolCall, ...]
    """Calls cut off by the output limit; not in ``message`` and never executed."""
    finish_reason: FinishReason
    usage: Usage
    ended: bool
    """Whether the provider sent ``StreamEnd``."""
    model: str | None = None
    response_id: str | None = None
    """The provider's id of the response (``StreamStart.response_id``), when it sent one."""
    cached: bool = False
    """The answer was replayed from a response cache (``StreamStart.cached``): no request was made."""

    @property
    def text(self) -> str:
        return self.message.text


class _TextBuilder:
    __slots__ = ("chunks", "provider_data")

    def __init__(self) -> None:
        self.chunks: list[str] = []
        self.provider_data: JsonObject | None = None

    def build(self) -> Text:
        return Text("".join(self.chunks), self.provider_data)


class _ThinkingBuilder:
    __slots__ = ("chunks", "provider_data", "signature")

    def __init__(self) -> None:
        self.chunks: list[str] = []
        self.signature: str | None = None
        self.provider_data: JsonObject | None = None

    def build(self) -> Thinking:
        return Thinking("".join(self.chunks), self.signature, self.provider_data)


class _CallBuilder:
    __slots__ = ("chunks", "ended", "id", "index", "name", "provider_data")

    def __init__(self, start: ToolCallStart) -> None:
        self.id = start.id
        self.name = start.name
        self.index = start.index
        self.chunks: list[str] = []
        self.ended = False
        self.provider_data = start.provider_data

    def build(self) -> ToolCall:
        arguments, raw = read_arguments("".join(self.chunks))
        return ToolCall(self.id, self.name, arguments, raw, self.provider_data)


Shown = TextDelta | ThinkingDelta | ThinkingStarted | ThinkingEnded | ProviderRetry | RateLimitWait | FallbackTaken
"""What of a stream a host is shown as it comes (:meth:`StreamAccumulator.add`)."""


def _merge(old: JsonObject | None, new: JsonObject) -> JsonObject:
    return new if old is None else {**old, **new}


class StreamAccumulator:
    """Feed it every event of one provider call with :meth:`add`, then take the turn with :meth:`finish`."""

    __slots__ = (
        "_cached", "_calls", "_current", "_ended", "_finish", "_model", "_parts", "_provider_data", "_response_id",
        "_usage", "first_event", "held",
    )  # fmt: skip

    def __init__(self) -> None:
        self._parts: list[_TextBuilder | _ThinkingBuilder | _CallBuilder] = []
        self._current: _TextBuilder | _ThinkingBuilder | _CallBuilder | None = None
        self._calls: dict[str, _CallBuilder] | None = None
        """The turn's tool calls by id, made with the first (a call in flight waiting for a text answer keeps
        no dict for it)."""
        self._finish: FinishReason = "other"
        self._usage = NO_USAGE
        self._ended = False
        self._model: str | None = None
        self._response_id: str | None = None
        self._cached = False
        self._provider_data: JsonObject | None = None
        self.first_event = 0.0
        """When the first event after ``StreamStart`` came (``time.perf_counter()``); 0: none yet. A call's time to
        its first token (``TurnRecord.ttft_ms``)."""
        self.held: list[Shown] | None = None
        """What the last event showed after what :meth:`add` returned (see the module docstring), in order."""

    def add(self, event: LlmEvent) -> Shown | None:
        """Fold one event in; returns what a host is shown of it as it comes (a text or thinking delta with
        text, a retry, a thinking block's mark; the rest in :attr:`held`), else ``None``. Raises
        ``InvalidResponse`` for a stream that breaks the provider contract.

        ``type(event) is`` tests, most frequent first: exact, narrowed by the type checker, and cheaper than a
        ``match`` or ``isinstance`` on the hottest path of a stream (``bench/instructions.py``)."""
        if not self.first_event and type(event) is not StreamStart and type(event) is not ProviderRetry:
            if type(event) is RateLimitWait or type(event) is FallbackTaken:
                return event
            self.first_event = perf_counter()
        if type(event) is TextDelta:
            return self._text(event)
        if type(event) is ToolCallDelta:
            self._call(event.id).chunks.append(event.arguments_delta)
        elif type(event) is ThinkingDelta:
            return self._thinking(event)
        elif type(event) is ToolCallStart:
            return self._start_call(event)
        elif type(event) is ToolCallEnd:
            self._call(event.id).ended = True
        elif type(event) is StreamEnd:
            return self._end(event)
        elif type(event) is StreamStart:
            self._model = event.model
            self._response_id = event.response_id
            self._cached = event.cached
        elif type(event) is ProviderRetry or type(event) is RateLimitWait or type(event) is FallbackTaken:
            return event
        else:
            raise InvalidResponse(f"unknown stream event {event!r}")
        return None

    pick = add
    """:meth:`add` under the name a watch calls (``interrupts.Picker``): a call whose text is shown as it comes
    hands its accumulator to the watch itself, and the watch keeps no bound method for it."""

    def _end(self, event: StreamEnd) -> ThinkingEnded | None:
        self._finish, self._usage, self._ended = event.finish_reason, event.usage, True
        if event.provider_data:
            self._provider_data = _merge(self._provider_data, event.provider_data)
        return self._thought()

    def _thought(self) -> ThinkingEnded | None:
        """The end of the thinking block under way, if one is (a block a signature closed has had its end)."""
        current = self._current
        return THINKING_ENDED if type(current) is _ThinkingBuilder and current.signature is None else None

    def _text(self, event: TextDelta) -> Shown | None:
        if not event.text and event.provider_data is None:
            return None
        current = self._current
        if type(current) is not _TextBuilder:
            return self._text_part(event)
        current.chunks.append(event.text)
        if event.provider_data:
            current.provider_data = _merge(current.provider_data, event.provider_data)
        return event if event.text else None

    def _text_part(self, event: TextDelta) -> Shown | None:
        """A text part begins with ``event``: after the end of the thinking block it closes, if one was open."""
        ended = self._thought()
        current = self._current = _TextBuilder()
        self._parts.append(current)
        current.chunks.append(event.text)
        current.provider_data = event.provider_data or None
        if ended is None:
            return event if event.text else None
        if event.text:
            self.held = [event]
        return ended

    def _thinking(self, event: ThinkingDelta) -> Shown | None:
        current = self._current
        if type(current) is not _ThinkingBuilder or current.signature is not None:
            return self._thinking_part(event)
        current.chunks.append(event.text)
        if event.provider_data:
            current.provider_data = _merge(current.provider_data, event.provider_data)
        if event.signature is None:
            return event if event.text else None
        current.signature = event.signature  # the block is closed
        if not event.text:
            return THINKING_ENDED
        self.held = [THINKING_ENDED]
        return event

    def _thinking_part(self, event: ThinkingDelta) -> ThinkingStarted:
        """A thinking block begins with ``event`` (its start, its text, and its end when it is signed at once)."""
        current = self._current = _ThinkingBuilder()
        self._parts.append(current)
        current.chunks.append(event.text)
        current.signature = event.signature
        current.provider_data = event.provider_data or None
        held: list[Shown] = [event] if event.text else []
        if event.signature is not None:
            held.append(THINKING_ENDED)
        self.held = held or None
        return THINKING_STARTED

    def release(self) -> Shown:
        """The first of what is :attr:`held` (the watch asks while there is any)."""
        held = self.held
        assert held, "released only while something is held"
        shown = held.pop(0)
        if not held:
            self.held = None
        return shown

    def _start_call(self, event: ToolCallStart) -> ThinkingEnded | None:
        calls = self._calls
        if calls is None:
            calls = self._calls = {}
        elif event.id in calls:
            raise InvalidResponse(f"tool call id {event.id!r} started twice in one turn")
        ended = self._thought()
        builder = _CallBuilder(event)
        calls[event.id] = builder
        self._parts.append(builder)
        self._current = builder
        return ended

    def _call(self, call_id: str) -> _CallBuilder:
        builder = self._calls.get(call_id) if self._calls is not None else None
        if builder is None:
            raise InvalidResponse(f"tool call id {call_id!r} continued before it started")
        return builder

    def finish(self) -> AccumulatedTurn:
        """The turn so far; call once, after the last event."""
        parts: list[Part] = []
        calls: list[ToolCall] = []
        incomplete: list[ToolCall] = []
        for builder in self._parts:
            if type(builder) is not _CallBuilder:
                parts.append(builder.build())
                continue
            call = builder.build()
            if self._finish == "length" and (not builder.ended or call.arguments is None):
                incomplete.append(call)
            else:
                parts.append(call)
                calls.append(call)
        return AccumulatedTurn(
            message=Message("assistant", tuple(parts), self._provider_data),
            tool_calls=tuple(calls),
            incomplete_calls=tuple(incomplete),
            finish_reason=self._finish,
            usage=self._usage,
            ended=self._ended,
            model=self._model,
            response_id=self._response_id,
            cached=self._cached,
        )


def rejection(turn: AccumulatedTurn) -> str | None:
    """Why an answer cannot be used, or ``None`` when it can."""
    if not turn.ended:
        return "the stream ended before the model finished its turn"
    if turn.incomplete_calls:
        names = ", ".join(call.name for call in turn.incomplete_calls)
        return f"the tool call to {names} was cut off at the output limit"
    if turn.tool_calls or turn.text.strip():
        return None
    if turn.finish_reason == "content_filter":
        return "the answer was blocked by the provider's content filter"
    return "the answer was empty"


def without_calls(turn: AccumulatedTurn) -> AccumulatedTurn:
    """``turn`` without its tool calls, complete or cut off: what is left of it as an answer."""
    if not turn.tool_calls and not turn.incomplete_calls:
        return turn
    message = Message("assistant", tuple(part for part in turn.message.parts if type(part) is not ToolCall))
    return replace(turn, message=message, tool_calls=(), incomplete_calls=())
