"""Gemini answers with fields of the wrong JSON type: a typed ``invalid_response``, never a crash.

Real recorded answers (``tests/fixtures/wire/google/``) are changed at one random path (see
:mod:`tests.providers.hostile`) and fed to :class:`ResponseDecoder` directly, without the net
(``wire.decoded``) the provider puts under it: the decoder itself must either produce events whose fields
have the right Python types, or raise ``InvalidResponse``. A stream may also end as a ``transport`` error when
the change removed every finish reason: Gemini's streams have no closing event, so such a stream cannot be
told from one that was cut. What the decoder lets through must also fold into a turn, store in a session and
go back out in the next request without an exception.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.providers.hostile import check_events, history_with, mutated, recorded_bodies, recorded_streams
from tether.errors import InvalidResponse, TransportError
from tether.events import LlmEvent, StreamEnd
from tether.providers.gemini import ResponseDecoder, encode_contents, parse_usage

STREAMS = recorded_streams("google")
BODIES = recorded_bodies("google")
HOSTILE = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def a_stream_with_one_bad_field(draw: st.DrawFn) -> tuple[list[Any], str]:
    chunks = list(draw(st.sampled_from(STREAMS)))
    position = draw(st.integers(min_value=0, max_value=len(chunks) - 1))
    chunks[position], change = draw(mutated(chunks[position]))
    return chunks, f"chunk {position}: {change}"


def decode_stream(chunks: list[Any], *, live: bool = True) -> list[LlmEvent]:
    decoder = ResponseDecoder(live=live)
    out: list[LlmEvent] = []
    for chunk in chunks:
        out += decoder.chunk(chunk)
    return out + decoder.end()


def test_the_recordings_hold_streams_and_whole_bodies() -> None:
    assert len(STREAMS) >= 3
    assert len(BODIES) >= 3
    for chunks in STREAMS:
        check_events(decode_stream(chunks))
    for body in BODIES:
        check_events(ResponseDecoder(live=False).whole(body))


@HOSTILE
@given(a_stream_with_one_bad_field(), st.booleans())
def test_a_stream_with_a_field_of_the_wrong_type_gives_typed_events_or_invalid_response(
    case: tuple[list[Any], str], live: bool
) -> None:
    chunks, _change = case
    cut: TransportError | None = None
    try:
        decoded = decode_stream(chunks, live=live)
    except InvalidResponse:
        return
    except TransportError as error:
        cut = error
    if cut is not None:
        assert "before finishing" in cut.message
        return
    turn = check_events(decoded)
    encode_contents(history_with(turn))


@HOSTILE
@given(st.sampled_from(BODIES).flatmap(mutated))
def test_a_whole_answer_with_a_field_of_the_wrong_type_gives_typed_events_or_invalid_response(
    case: tuple[Any, str],
) -> None:
    body, _change = case
    try:
        decoded = ResponseDecoder(live=False).whole(body)
    except InvalidResponse:
        return
    turn = check_events(decoded)
    encode_contents(history_with(turn))


# --- each field the decoder reads, named in the error ------------------------------------------------------


def answer(*parts: Any, **fields: Any) -> dict[str, Any]:
    candidate = {"content": {"role": "model", "parts": list(parts)}, "finishReason": "STOP", "index": 0}
    return {"candidates": [candidate], "modelVersion": "gemini-2.5-flash", **fields}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"candidates": {"content": {}}}, "candidates"),
        ({"candidates": ["text"]}, "candidates[0]"),
        ({"candidates": [{"index": "0"}]}, "candidates[0].index"),
        ({"candidates": [{"content": "hello"}]}, "candidates[0].content"),
        ({"candidates": [{"content": {"parts": {"text": "a"}}}]}, "candidates[0].content.parts"),
        ({"candidates": [{"content": {"parts": [None, 5]}}]}, "candidates[0].content.parts[1]"),
        ({"candidates": [{"finishReason": 1}]}, "candidates[0].finishReason"),
        ({"candidates": [{"finishReason": "SAFETY", "finishMessage": ["x"]}]}, "candidates[0].finishMessage"),
        (answer({"text": 42}), "candidates[0].content.parts[0].text"),
        (answer({"text": "a", "thought": "yes"}), "candidates[0].content.parts[0].thought"),
        (answer({"text": "a", "thoughtSignature": {"s": 1}}), "candidates[0].content.parts[0].thoughtSignature"),
        (answer({"functionCall": "weather(Paris)"}), "candidates[0].content.parts[0].functionCall"),
        (answer({"functionCall": {"name": ["weather"]}}), "candidates[0].content.parts[0].functionCall.name"),
        (answer({"functionCall": {"name": "w", "id": 7}}), "candidates[0].content.parts[0].functionCall.id"),
        (answer({"functionCall": {"name": "w", "args": [1]}}), "candidates[0].content.parts[0].functionCall.args"),
        (answer({"text": "a"}, modelVersion=2.5), "modelVersion"),
        (answer({"text": "a"}, responseId={"id": 1}), "responseId"),
        (answer({"text": "a"}, usageMetadata=[3]), "usageMetadata"),
        (answer({"text": "a"}, promptFeedback="SAFETY"), "promptFeedback"),
        (answer({"text": "a"}, promptFeedback={"blockReason": 1}), "promptFeedback.blockReason"),
    ],
)
def test_a_field_of_the_wrong_type_is_an_invalid_response_naming_it(body: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidResponse) as raised:
        ResponseDecoder(live=False).whole(body)
    assert raised.value.details["field"] == field
    assert field in raised.value.message


@pytest.mark.parametrize(
    ("count", "read"),
    [(-5, 0), (2.9, 2), ("17", 17), ("many", 0), (True, 0), ([3], 0), ({"n": 3}, 0), (None, 0)],
)
def test_a_usage_count_that_is_not_a_count_never_reaches_usage(count: Any, read: int) -> None:
    usage = parse_usage({"promptTokenCount": count, "candidatesTokenCount": count, "thoughtsTokenCount": 1})
    assert (usage.input_tokens, usage.output_tokens, usage.reasoning_tokens) == (read, read + 1, 1)
    end = ResponseDecoder().whole(answer({"text": "a"}, usageMetadata={"candidatesTokenCount": count}))[-1]
    assert isinstance(end, StreamEnd)
    assert type(end.usage.output_tokens) is int
    assert end.usage.output_tokens == read


def test_a_whole_answer_without_any_finish_reason_is_invalid_not_a_cut_stream() -> None:
    body = {"candidates": [{"content": {"parts": [{"text": "hi"}]}}]}
    with pytest.raises(InvalidResponse, match="finishReason"):
        ResponseDecoder(live=False).whole(body)
    decoder = ResponseDecoder()
    decoder.chunk(body)
    with pytest.raises(TransportError, match="before finishing"):
        decoder.end()
