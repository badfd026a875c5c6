"""Gemini answers (``GenerateContentResponse``), streamed or whole, read into tether's ``LlmEvent``s.

Parts: a ``functionCall`` part arrives whole, so it becomes ``ToolCallStart``, one ``ToolCallDelta`` with the
arguments as JSON and ``ToolCallEnd`` (a call without an ``id`` gets one of tether's, which begins with
:data:`NO_ID_PREFIX`: it pairs the call with its result inside tether and is never sent back to Gemini,
``gemini.py``); ``thought: true`` parts are
thinking; ``text`` parts are text. A ``thoughtSignature`` on a thought part is its thinking block's
``signature``; on a text or ``functionCall`` part it rides in the part's ``provider_data`` as
``{"origin": "gemini", "thoughtSignature": ...}`` (a signature on a part with nothing else in it, on an
empty text). Parts of the other kinds (``executableCode``, ``codeExecutionResult``, ``inlineData``,
``fileData``, and kinds added later) are not tether parts: they are never shown, and are kept whole (their
signature with them) in ``StreamEnd.provider_data["parts"]`` with their place among the turn's parts
(:class:`KeptPart`), so that the provider sends them back where they were on the next turn.

Candidates: the API may answer with several candidates, some of them blocked. The answer is the first
candidate, in index order, with usable content (text or a call) and a finish reason that is not a block
(``SAFETY``, ``RECITATION``, ``BLOCKLIST``, ``PROHIBITED_CONTENT``, ``SPII``, image blocks) or a failure
(``MALFORMED_FUNCTION_CALL``, ``UNEXPECTED_TOOL_CALL``, ``TOO_MANY_TOOL_CALLS``, ``MISSING_THOUGHT_SIGNATURE``,
``MALFORMED_RESPONSE``). When none is usable, or the prompt itself was blocked (``promptFeedback.blockReason``),
the turn ends without output (``content_filter`` when every candidate was blocked, ``error`` for a failure),
which the loop rejects, retries once with a correction and then stops degraded. A stream that asks for one
candidate (the default) is passed on as it arrives; if that candidate is blocked after part of it was
streamed, the stream fails with ``invalid_response`` (what was streamed cannot be taken back), which the loop
handles the same way. A request for several candidates is read whole first.

Finish reasons: ``STOP`` -> ``stop`` (``tool_calls`` when the answer calls tools), ``MAX_TOKENS`` ->
``length``, blocks -> ``content_filter``, failures -> ``error``, the rest (``LANGUAGE``, ``OTHER``,
``NO_IMAGE``, ``IMAGE_OTHER``, ``FINISH_REASON_UNSPECIFIED``, anything new) -> ``other``. Usage
(``usageMetadata``, the last chunk's running totals): cached prompt tokens apart, tool-use prompt tokens as
input, thoughts as output and as reasoning, each count through :func:`~tether.providers.wire.as_count`.

Every field read is type-checked with :mod:`tether.providers.wire`: a field of the wrong JSON type is
``invalid_response`` naming it, so nothing wrongly typed reaches an event.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

import msgspec

from tether.errors import InvalidResponse
from tether.events import (
    FinishReason,
    LlmEvent,
    StreamEnd,
    StreamStart,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from tether.providers.decoding import parse_json_text, unfinished
from tether.providers.http.errors import error_for_payload
from tether.providers.wire import Shape, anchored_entries, as_count, malformed
from tether.usage import NO_USAGE, Usage

__all__ = ["PROVIDER", "GeminiDecoder", "KeptPart", "finish_reason", "kept_parts_of", "parse_usage"]

PROVIDER = "gemini"
NO_ID_PREFIX = "gemini_noid_"
"""Begins the id tether gives a call that Gemini sent without one (:func:`sent_without_id` tells it apart)."""
FILTERED = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
    }
)
"""Finish reasons of a candidate the provider's filters blocked: ``content_filter``."""
FAILED = frozenset(
    {
        "MALFORMED_FUNCTION_CALL",
        "UNEXPECTED_TOOL_CALL",
        "TOO_MANY_TOOL_CALLS",
        "MISSING_THOUGHT_SIGNATURE",
        "MALFORMED_RESPONSE",
    }
)
"""Finish reasons of a candidate the model failed to write (a broken or unwanted call, a broken answer):
``error``."""
UNUSABLE = FILTERED | FAILED
"""Finish reasons whose candidate is never the answer, whatever it holds."""
FINISH_REASONS: dict[str, FinishReason] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    **dict.fromkeys(FILTERED, "content_filter"),
    **dict.fromkeys(FAILED, "error"),
}
"""``finishReason`` -> tether's; the others (``LANGUAGE``, ``OTHER``, ``NO_IMAGE``, ``IMAGE_OTHER``,
``FINISH_REASON_UNSPECIFIED``, anything new) are ``other``."""
READ_KEYS = frozenset({"text", "thought", "thoughtSignature", "functionCall"})
"""The part fields tether reads; a part with any other field that carries data is kept whole."""
META_KEYS = frozenset({"partMetadata", "videoMetadata", "mediaResolution"})
"""Part fields that describe a part's data rather than being data: alone, they make nothing to keep."""


# --- the wire shapes ------------------------------------------------------------------------------------------


class _FunctionCall(msgspec.Struct, gc=False):
    id: str | None = None
    name: str | None = None
    args: dict[str, Any] | None = None


class _Part(msgspec.Struct, gc=False):
    """The fields of a part tether reads (a part is kept whole as well when it has others: see ``READ_KEYS``)."""

    text: str | None = None
    thought: bool | None = None
    thoughtSignature: str | None = None  # noqa: N815 - the wire's name
    functionCall: _FunctionCall | None = None  # noqa: N815


class _Content(msgspec.Struct, gc=False):
    parts: list[dict[str, Any] | None] | None = None


class _CandidateShape(msgspec.Struct, gc=False):
    index: int | msgspec.UnsetType = msgspec.UNSET
    content: _Content | None = None
    finishReason: str | None = None  # noqa: N815
    finishMessage: str | None = None  # noqa: N815


class _Feedback(msgspec.Struct, gc=False):
    blockReason: str | None = None  # noqa: N815


class _Chunk(msgspec.Struct, gc=False):
    """A ``GenerateContentResponse``: a streamed chunk, or a whole response."""

    candidates: list[_CandidateShape] | None = None
    modelVersion: str | None = None  # noqa: N815
    responseId: str | None = None  # noqa: N815
    usageMetadata: dict[str, Any] | msgspec.UnsetType | None = msgspec.UNSET  # noqa: N815
    promptFeedback: _Feedback | None = None  # noqa: N815
    error: Any = None


_CHUNK = Shape(_Chunk, "the chunk")
_PART = Shape(_Part, "the part")
_NO_CALL = _FunctionCall()


@dataclass(frozen=True, slots=True)
class KeptPart:
    """A part tether does not read, and where it sat in its turn: after ``parts`` thinking and call parts (as
    ``StreamAccumulator`` builds them) and ``chars`` characters of text. Text around such a part is merged
    into one ``Text``; the character count says where to cut it again."""

    parts: int
    chars: int
    part: dict[str, Any]


class _Candidate:
    """One candidate's events so far, and what decides whether it can be the answer."""

    __slots__ = (
        "calls",
        "chars",
        "events",
        "finish",
        "kept",
        "message",
        "output",
        "parts",
        "sent",
        "shown",
        "thinking",
    )

    def __init__(self) -> None:
        self.events: list[LlmEvent] = []
        self.kept: list[KeptPart] = []
        self.sent = 0
        self.calls = 0
        self.output = False  # it holds text or a call
        self.shown = False  # some of that output was handed out already
        self.finish: str | None = None
        self.message: str | None = None
        self.parts = self.chars = 0  # where the next part lands (see KeptPart)
        self.thinking = False  # the last part is thinking the accumulator still extends (unsigned)

    def take(self) -> list[LlmEvent]:
        """The events not handed out yet."""
        fresh = self.events[self.sent :]
        self.sent = len(self.events)
        self.shown = self.output
        return fresh

    def read(self, part: dict[str, Any], what: str) -> None:
        """One part as events: thought, call or text, a signature on the part it came with; a part of any
        other kind is kept whole (see the module docstring)."""
        read = _PART.of(part, PROVIDER, what)
        signature, text, thought = read.thoughtSignature or None, read.text or "", read.thought
        if thought:
            self.parts += 0 if self.thinking else 1
            self.thinking = signature is None
            self.events.append(ThinkingDelta(text, signature, {"origin": PROVIDER}))
            return
        owned = {"origin": PROVIDER, "thoughtSignature": signature} if signature else None
        if "functionCall" in part:
            self._call(read.functionCall or _NO_CALL, owned)
        elif any(key not in READ_KEYS and key not in META_KEYS for key in part):
            self.kept.append(KeptPart(self.parts, self.chars, part))
        elif text or owned:  # a signature on a part with nothing else in it: kept on an empty text
            self.thinking = False
            self.chars += len(text)
            self.events.append(TextDelta(text, owned))
            self.output = self.output or bool(text.strip())

    def _call(self, call: _FunctionCall, owned: dict[str, Any] | None) -> None:
        call_id = call.id or f"{NO_ID_PREFIX}{uuid.uuid4().hex[:24]}"
        self.events += [
            ToolCallStart(call_id, call.name or "", self.calls, owned),
            ToolCallDelta(call_id, json.dumps(call.args or {}, ensure_ascii=False)),
            ToolCallEnd(call_id),
        ]
        self.calls += 1
        self.parts += 1
        self.thinking = False
        self.output = True

    def provider_data(self) -> dict[str, Any] | None:
        """``StreamEnd.provider_data``: the kept parts, with their places."""
        if not self.kept:
            return None
        parts = [{"anchor": [kept.parts, kept.chars], "part": kept.part} for kept in self.kept]
        return {"origin": PROVIDER, "parts": parts}


def sent_without_id(call_id: str) -> bool:
    """Whether ``call_id`` is one tether gave a call Gemini sent without an id (the call and its result then go
    back without one, as the model wrote them)."""
    return call_id.startswith(NO_ID_PREFIX)


class GeminiDecoder:
    """``GenerateContentResponse`` chunks (or one whole response) to ``LlmEvent``s, for one answer: a
    :class:`~tether.providers.decoding.Decoder`.

    ``live``: one candidate is expected, and its events are handed out as they arrive; otherwise every
    candidate is kept until the end, when the answer is chosen among them (see the module docstring). Every
    chunk is read into the wire shapes above: a wrong JSON type is ``invalid_response`` naming the field.
    """

    __slots__ = ("_blocked", "_candidates", "_complete", "_live", "_live_index", "_started", "_usage")
    provider = PROVIDER

    def __init__(self, *, live: bool = True) -> None:
        self._live = live
        self._live_index: int | None = None
        self._started = False
        self._complete = False  # the answer came whole: it cannot have been cut on the way
        self._candidates: dict[int, _Candidate] = {}
        self._blocked: str | None = None
        self._usage = NO_USAGE

    def whole(self, data: Any) -> list[LlmEvent]:
        """The events of a whole (non-streamed) response, its close included."""
        self._complete = True
        return self.feed(data) + self.end()

    def whole_json(self, body: str | bytes) -> list[LlmEvent]:
        self._complete = True
        return self.feed_json(body) + self.end()

    def feed_json(self, text: str | bytes) -> list[LlmEvent]:
        """The events of one streamed chunk's JSON (a JSON array of chunks is read in order)."""
        if text.lstrip()[:1] in ("[", b"["):
            return self.feed(parse_json_text(text, PROVIDER))
        return self._chunk(_CHUNK.of_text(text, PROVIDER))

    def feed(self, data: Any) -> list[LlmEvent]:
        """The events of one streamed chunk, parsed (a JSON array of chunks is read in order)."""
        if type(data) is list:  # one level only: a list inside it is no chunk
            return [event for item in data if self._is_chunk(item) for event in self.feed(item)]
        if type(data) is not dict:
            raise InvalidResponse(f"gemini sent a chunk that is not a JSON object: {str(data)[:200]}")
        return self._chunk(_CHUNK.of(data, PROVIDER))

    def _chunk(self, chunk: _Chunk) -> list[LlmEvent]:
        if chunk.error:
            raise error_for_payload(PROVIDER, {"error": chunk.error})
        out: list[LlmEvent] = []
        if not self._started:
            self._started = True
            out.append(StreamStart(model=chunk.modelVersion or None, response_id=chunk.responseId or None))
        if chunk.usageMetadata is not msgspec.UNSET:  # each chunk repeats the running totals: the last one counts
            self._usage = parse_usage(chunk.usageMetadata or {})
        if chunk.promptFeedback is not None and chunk.promptFeedback.blockReason:
            self._blocked = chunk.promptFeedback.blockReason
        for position, candidate in enumerate(chunk.candidates or ()):
            out += self._candidate(candidate, position)
        return out

    def _is_chunk(self, item: Any) -> bool:
        if type(item) is not dict:  # named by its type: the repr of a deeply nested list is itself a hazard
            raise InvalidResponse(f"gemini sent a chunk that is not a JSON object but a {type(item).__name__}")
        return True

    def _candidate(self, raw: _CandidateShape, position: int) -> list[LlmEvent]:
        what = f"candidates[{position}]"
        index = position if raw.index is msgspec.UNSET else raw.index
        if index < 0:
            raise malformed(PROVIDER, f"{what}.index", index)
        candidate = self._candidates.setdefault(index, _Candidate())
        for number, part in enumerate(raw.content.parts or () if raw.content is not None else ()):
            candidate.read(part or {}, f"{what}.content.parts[{number}]")
        if finish := raw.finishReason:
            candidate.finish = finish
            candidate.message = raw.finishMessage or None
        if not self._live:
            return []
        self._live_index = index if self._live_index is None else self._live_index
        if index == self._live_index and candidate.finish not in UNUSABLE:
            return candidate.take()
        return []

    def end(self) -> list[LlmEvent]:
        """Choose the answer and close the turn. With no finish reason and no blocked prompt, a whole
        response is malformed (``invalid_response``); a stream was cut (``transport``), as Gemini's streams
        have no closing event to tell the two apart."""
        finished = [c for _, c in sorted(self._candidates.items()) if c.finish is not None]
        if not self._started or (not finished and self._blocked is None):
            raise unfinished(PROVIDER, started=self._started, whole=self._complete, missing="finishReason")
        chosen = next((c for c in finished if c.output and c.finish not in UNUSABLE), None)
        live = self._candidates.get(self._live_index) if self._live_index is not None else None
        if live is not None and live.shown and live is not chosen:
            why = live.finish or "no finish reason"
            detail = f": {live.message}" if live.message else ""
            raise InvalidResponse(f"gemini stopped the answer it was streaming ({why}{detail})")
        if chosen is None:
            return [StreamEnd(self._unusable_finish(finished), self._usage)]
        finish = "tool_calls" if chosen.calls else finish_reason(chosen.finish or "")
        return [*chosen.take(), StreamEnd(finish, self._usage, chosen.provider_data())]

    def _unusable_finish(self, finished: list[_Candidate]) -> FinishReason:
        """``content_filter`` when the prompt (no candidate then) or every candidate was blocked, else the first
        other reason."""
        unfiltered = [c.finish for c in finished if c.finish not in FILTERED]
        if not unfiltered:
            return "content_filter"
        return finish_reason(unfiltered[0] or "")


def finish_reason(reason: str) -> FinishReason:
    """A ``finishReason`` as tether's: see :data:`FINISH_REASONS`; a value added after this was written is
    ``other``."""
    return FINISH_REASONS.get(reason, "other")


def parse_usage(usage: dict[str, Any]) -> Usage:
    """``usageMetadata``: cached prompt tokens counted apart, thoughts counted as output and as reasoning; each
    count through :func:`~tether.providers.wire.as_count`."""
    prompt = as_count(usage.get("promptTokenCount"))
    cached = as_count(usage.get("cachedContentTokenCount"))
    thoughts = as_count(usage.get("thoughtsTokenCount"))
    return Usage(
        input_tokens=max(prompt - cached, 0) + as_count(usage.get("toolUsePromptTokenCount")),
        output_tokens=as_count(usage.get("candidatesTokenCount")) + thoughts,
        cache_read_tokens=cached,
        reasoning_tokens=thoughts,
    )


def kept_parts_of(provider_data: dict[str, Any] | None) -> list[KeptPart]:
    """The parts kept on a model message of ours, with their places, in order. An entry that is not of the
    shape :class:`GeminiDecoder` writes (a hand-edited session) is left out rather than sent."""
    entries = anchored_entries(provider_data, PROVIDER, "parts", "part")
    return [KeptPart(parts, chars, part) for parts, chars, part in entries]
