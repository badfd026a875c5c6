"""Bedrock's decoder against answers with one field of the wrong JSON type (``hostile.py``'s contract): typed
events or ``invalid_response``, never another exception; and whatever it lets through folds into a turn that
goes back on the wire."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.providers.hostile import check_events, history_with, mutated
from tether.errors import InvalidResponse, TransportError
from tether.events import LlmEvent, StreamEnd
from tether.providers.bedrock_stream import BedrockDecoder
from tether.providers.bedrock_wire import encode_messages
from tether.usage import Usage

FIXTURES = Path(__file__).parents[1] / "fixtures/wire/bedrock"
STREAMS = [json.loads(path.read_text()) for path in sorted(FIXTURES.glob("converse_stream_*.json"))]
BODIES = [json.loads(path.read_text()) for path in sorted(FIXTURES.glob("converse_[!s]*.json"))]
HOSTILE = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def decode_stream(events: list[Any]) -> list[LlmEvent]:
    decoder = BedrockDecoder()
    out: list[LlmEvent] = []
    for event in events:
        out += decoder.feed(event)
    return out + decoder.end()


def test_the_fixtures_decode_whole_and_streamed() -> None:
    assert len(STREAMS) >= 2
    assert len(BODIES) >= 2
    for events in STREAMS:
        check_events(decode_stream(events))
    for body in BODIES:
        check_events(BedrockDecoder().whole(body))
    cut = decode_stream(STREAMS[0])
    assert cut[-1] == StreamEnd("length", Usage(input_tokens=12, output_tokens=8, cache_write_tokens=2048))
    redacted = BedrockDecoder().whole(BODIES[0])
    assert redacted[1].provider_data == {"origin": "bedrock", "redacted": True}  # type: ignore[union-attr]


@st.composite
def a_stream_with_one_bad_field(draw: st.DrawFn) -> tuple[list[Any], str]:
    events = list(draw(st.sampled_from(STREAMS)))
    position = draw(st.integers(min_value=0, max_value=len(events) - 1))
    events[position], change = draw(mutated(events[position]))
    return events, f"event {position}: {change}"


@HOSTILE
@given(a_stream_with_one_bad_field())
def test_a_stream_with_a_field_of_the_wrong_type_gives_typed_events_or_invalid_response(
    case: tuple[list[Any], str],
) -> None:
    events, _change = case
    cut: TransportError | None = None
    try:
        decoded = decode_stream(events)
    except InvalidResponse:
        return
    except TransportError as error:  # the stop event itself was broken away: a stream cut short
        cut = error
    if cut is not None:
        assert "before finishing" in cut.message
        return
    turn = check_events(decoded)
    encode_messages(history_with(turn))


@HOSTILE
@given(st.sampled_from(BODIES).flatmap(mutated))
def test_a_whole_answer_with_a_field_of_the_wrong_type_gives_typed_events_or_invalid_response(
    case: tuple[Any, str],
) -> None:
    body, _change = case
    try:
        decoded = BedrockDecoder().whole(body)
    except InvalidResponse:
        return
    turn = check_events(decoded)
    encode_messages(history_with(turn))
