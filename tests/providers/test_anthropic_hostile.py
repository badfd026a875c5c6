"""Anthropic answers with fields of the wrong JSON type: a typed ``invalid_response``, never a crash.

Real recorded answers (``tests/fixtures/wire/anthropic/``) are changed at one random path (see
:mod:`tests.providers.hostile`) and fed to :class:`AnthropicDecoder` directly, without the net
(``wire.decoded``) the provider puts under it: the decoder itself must either produce events whose fields
have the right Python types, or raise ``InvalidResponse``. What it lets through must also fold into a turn,
store in a session and go back out in the next request without an exception.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.providers.hostile import check_events, history_with, mutated, recorded_bodies, recorded_streams
from tether.errors import InvalidResponse
from tether.events import LlmEvent, StreamEnd, TextDelta, ToolCallStart
from tether.providers.anthropic import encode_messages
from tether.providers.anthropic_stream import AnthropicDecoder

STREAMS = recorded_streams("anthropic")
BODIES = recorded_bodies("anthropic")
HOSTILE = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def a_stream_with_one_bad_field(draw: st.DrawFn) -> tuple[list[Any], str]:
    events = list(draw(st.sampled_from(STREAMS)))
    position = draw(st.integers(min_value=0, max_value=len(events) - 1))
    events[position], change = draw(mutated(events[position]))
    return events, f"event {position}: {change}"


def decode_stream(events: list[Any]) -> list[LlmEvent]:
    decoder = AnthropicDecoder()
    out: list[LlmEvent] = []
    for event in events:
        out += decoder.feed(event)
    return out + decoder.end()


def test_the_recordings_hold_streams_and_whole_bodies() -> None:
    assert len(STREAMS) >= 3
    assert len(BODIES) >= 3
    for events in STREAMS:
        check_events(decode_stream(events))
    for body in BODIES:
        check_events(AnthropicDecoder().whole(body))


@HOSTILE
@given(a_stream_with_one_bad_field())
def test_a_stream_with_a_field_of_the_wrong_type_gives_typed_events_or_invalid_response(
    case: tuple[list[Any], str],
) -> None:
    events, _change = case
    try:
        decoded = decode_stream(events)
    except InvalidResponse:
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
        decoded = AnthropicDecoder().whole(body)
    except InvalidResponse:
        return
    turn = check_events(decoded)
    encode_messages(history_with(turn))


# --- each field the decoder reads, named in the error ------------------------------------------------------

START: dict[str, Any] = {
    "type": "message_start",
    "message": {"id": "msg_1", "model": "claude-x", "content": [], "usage": {}},
}


@pytest.mark.parametrize(
    ("event", "field"),
    [
        ({"type": 5}, "event.type"),
        ({"type": "message_start", "message": "hello"}, "message_start.message"),
        ({"type": "message_start", "message": {"model": 4}}, "message_start.message.model"),
        ({"type": "message_start", "message": {"usage": [1]}}, "message_start.message.usage"),
        ({"type": "message_start", "message": {"content": {"type": "text"}}}, "message_start.message.content"),
        ({"type": "message_start", "message": {"content": ["text"]}}, "message_start.message.content[0]"),
        ({"type": "message_start", "message": {"stop_reason": 1}}, "message_start.message.stop_reason"),
        ({"type": "content_block_start", "index": "0", "content_block": {}}, "content_block_start.index"),
        ({"type": "content_block_start", "index": 0, "content_block": "text"}, "content_block_start.content_block"),
        (
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": {"a": 1}}},
            "content_block_start.content_block.text",
        ),
        (
            {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": 7}},
            "content_block_start.content_block.name",
        ),
        (
            {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": ["t"]}},
            "content_block_start.content_block.id",
        ),
        (
            {"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "input": [1, 2]}},
            "content_block_start.content_block.input",
        ),
        (
            {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "signature": {}}},
            "content_block_start.content_block.signature",
        ),
        (
            {"type": "content_block_start", "index": 0, "content_block": {"type": "redacted_thinking", "data": 3}},
            "content_block_start.content_block.data",
        ),
        (
            {"type": "content_block_start", "index": 0, "content_block": {"type": "compaction", "content": 3}},
            "content_block_start.content_block.content",
        ),
        ({"type": "message_delta", "delta": "end_turn"}, "message_delta.delta"),
        ({"type": "message_delta", "delta": {"stop_reason": ["end_turn"]}}, "message_delta.delta.stop_reason"),
        ({"type": "message_delta", "usage": 12}, "message_delta.usage"),
        ({"type": "content_block_delta", "index": None, "delta": {}}, "content_block_delta.index"),
        ({"type": "content_block_delta", "index": 0, "delta": "x"}, "content_block_delta.delta"),
    ],
)
def test_a_field_of_the_wrong_type_is_an_invalid_response_naming_it(event: dict[str, Any], field: str) -> None:
    decoder = AnthropicDecoder()
    if event["type"] != "message_start":
        decoder.feed(START)
    with pytest.raises(InvalidResponse) as raised:
        decoder.feed(event)
    assert raised.value.details["field"] == field
    assert field in raised.value.message


@pytest.mark.parametrize(
    ("block", "delta", "field"),
    [
        ({"type": "text", "text": ""}, {"type": "text_delta", "text": 5}, "text"),
        ({"type": "text", "text": ""}, {"type": "text_delta", "text": None}, None),
        ({"type": "thinking", "thinking": ""}, {"type": "thinking_delta", "thinking": ["a"]}, "thinking"),
        ({"type": "thinking", "thinking": ""}, {"type": "signature_delta", "signature": {"s": 1}}, "signature"),
        (
            {"type": "tool_use", "id": "t", "name": "f", "input": {}},
            {"type": "input_json_delta", "partial_json": 1},
            "partial_json",
        ),
        ({"type": "compaction", "content": None}, {"type": "compaction_delta", "content": 1.5}, "content"),
        (
            {"type": "compaction", "content": None},
            {"type": "compaction_delta", "encrypted_content": []},
            "encrypted_content",
        ),
        ({"type": "text", "text": ""}, {"type": True}, "type"),
    ],
)
def test_a_delta_field_of_the_wrong_type_is_an_invalid_response_naming_it(
    block: dict[str, Any], delta: dict[str, Any], field: str | None
) -> None:
    decoder = AnthropicDecoder()
    decoder.feed(START)
    decoder.feed({"type": "content_block_start", "index": 0, "content_block": block})
    event = {"type": "content_block_delta", "index": 0, "delta": delta}
    if field is None:  # null where text belongs reads as no text
        assert decoder.feed(event) == []
        return
    with pytest.raises(InvalidResponse) as raised:
        decoder.feed(event)
    assert raised.value.details["field"] == f"content_block_delta.delta.{field}"


@pytest.mark.parametrize(
    ("count", "read"),
    [(-5, 0), (2.9, 2), ("17", 17), ("many", 0), (True, 0), ([3], 0), ({"n": 3}, 0), (float("1e400"), 0)],
)
def test_a_usage_count_that_is_not_a_count_never_reaches_usage(count: Any, read: int) -> None:
    decoder = AnthropicDecoder()
    decoder.feed({**START, "message": {**START["message"], "usage": {"input_tokens": 10, "output_tokens": 1}}})
    decoder.feed({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": count}})
    usage = decoder.end()[-1]
    assert isinstance(usage, StreamEnd)
    assert (usage.usage.input_tokens, usage.usage.output_tokens) == (10, read)
    assert type(usage.usage.output_tokens) is int


def test_a_null_count_in_message_delta_keeps_the_one_message_start_sent() -> None:
    decoder = AnthropicDecoder()
    decoder.feed({**START, "message": {**START["message"], "usage": {"input_tokens": 10}}})
    decoder.feed({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"input_tokens": None}})
    end = decoder.end()[-1]
    assert isinstance(end, StreamEnd)
    assert end.usage.input_tokens == 10


def test_an_answer_that_ends_properly_without_a_stop_reason_is_invalid_not_a_cut_stream() -> None:
    decoder = AnthropicDecoder()
    decoder.feed(START)
    decoder.feed({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "hi"}})
    decoder.feed({"type": "message_stop"})
    with pytest.raises(InvalidResponse, match="no stop_reason"):
        decoder.end()
    with pytest.raises(InvalidResponse, match="no stop_reason"):
        AnthropicDecoder().whole({"type": "message", "content": [{"type": "text", "text": "hi"}]})


def test_nothing_wrongly_typed_gets_into_the_events_of_a_whole_answer() -> None:
    body: dict[str, Any] = {
        "type": "message",
        "model": "claude-x",
        "content": [{"type": "text", "text": "ok"}, {"type": "tool_use", "id": "t1", "name": 42, "input": {}}],
        "stop_reason": "tool_use",
    }
    with pytest.raises(InvalidResponse, match=r"content\[1\]\.name"):
        AnthropicDecoder().whole(body)
    body["content"][1]["name"] = "lookup"
    events = AnthropicDecoder().whole(body)
    assert [e.name for e in events if isinstance(e, ToolCallStart)] == ["lookup"]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["ok"]
