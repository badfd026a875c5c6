"""StreamAccumulator: provider events folded into one assistant turn (parts, calls, cut-offs, usage, errors)."""

from __future__ import annotations

import pytest

from tether.errors import InvalidResponse
from tether.events import (
    FinishReason,
    LlmEvent,
    ProviderRetry,
    StreamEnd,
    StreamStart,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from tether.loop.accumulator import AccumulatedTurn, StreamAccumulator
from tether.loop.arguments import parse_arguments
from tether.messages import Text, Thinking, ToolCall
from tether.usage import Usage

USAGE = Usage(input_tokens=12, output_tokens=34, requests=1)


def accumulate(*events: LlmEvent) -> AccumulatedTurn:
    accumulator = StreamAccumulator()
    for event in events:
        accumulator.add(event)
    return accumulator.finish()


def end(finish: FinishReason = "stop") -> StreamEnd:
    return StreamEnd(finish, USAGE)


def whole_call(call_id: str, name: str, arguments: str) -> list[LlmEvent]:
    return [ToolCallStart(call_id, name, 0), ToolCallDelta(call_id, arguments), ToolCallEnd(call_id)]


# --- text and thinking --------------------------------------------------------------------------------------


def test_consecutive_text_deltas_make_one_text_part() -> None:
    turn = accumulate(TextDelta("Hel"), TextDelta("lo, "), TextDelta("world"), end())
    assert turn.message.parts == (Text("Hello, world"),)
    assert turn.text == "Hello, world"
    assert turn.message.role == "assistant"


def test_empty_text_deltas_add_no_part() -> None:
    turn = accumulate(TextDelta(""), end())
    assert turn.message.parts == ()


def test_thinking_is_kept_apart_from_text() -> None:
    turn = accumulate(ThinkingDelta("let me "), ThinkingDelta("think"), TextDelta("answer"), end())
    assert turn.message.parts == (Thinking("let me think"), Text("answer"))
    assert turn.text == "answer"


def test_a_signature_closes_a_thinking_block_so_the_next_thinking_opens_a_new_part() -> None:
    turn = accumulate(
        ThinkingDelta("first "),
        ThinkingDelta("block"),
        ThinkingDelta("", signature="sig-1"),
        ThinkingDelta("second block", signature="sig-2"),
        end(),
    )
    assert turn.message.parts == (Thinking("first block", "sig-1"), Thinking("second block", "sig-2"))


def test_text_thinking_and_calls_keep_their_arrival_order() -> None:
    turn = accumulate(
        ThinkingDelta("plan"),
        TextDelta("Looking"),
        *whole_call("c1", "read", '{"path": "a"}'),
        TextDelta("then"),
        ThinkingDelta("again"),
        end("tool_calls"),
    )
    assert [type(p) for p in turn.message.parts] == [Thinking, Text, ToolCall, Text, Thinking]
    assert [getattr(p, "text", None) for p in turn.message.parts] == ["plan", "Looking", None, "then", "again"]


def test_text_after_a_call_starts_a_new_text_part() -> None:
    turn = accumulate(TextDelta("a"), *whole_call("c1", "f", "{}"), TextDelta("b"), end("tool_calls"))
    assert [p for p in turn.message.parts if type(p) is Text] == [Text("a"), Text("b")]


def test_provider_data_of_text_and_thinking_deltas_is_merged_into_their_part() -> None:
    turn = accumulate(
        ThinkingDelta("t1", provider_data={"id": "r1", "n": 1}),
        ThinkingDelta("t2", provider_data={"n": 2, "enc": "x"}),
        TextDelta("a", provider_data={"annotations": []}),
        TextDelta("", provider_data={"citation": "c"}),
        end(),
    )
    assert turn.message.parts == (
        Thinking("t1t2", provider_data={"id": "r1", "n": 2, "enc": "x"}),
        Text("a", provider_data={"annotations": [], "citation": "c"}),
    )


def test_a_tool_calls_provider_data_comes_from_its_start() -> None:
    turn = accumulate(
        ToolCallStart("c1", "f", 0, provider_data={"thought_signature": "abc"}),
        ToolCallEnd("c1"),
        end("tool_calls"),
    )
    assert turn.tool_calls[0].provider_data == {"thought_signature": "abc"}


def test_stream_end_provider_data_is_kept_on_the_message() -> None:
    turn = accumulate(TextDelta("hi"), StreamEnd("stop", USAGE, provider_data={"response_id": "resp_1"}))
    assert turn.message.provider_data == {"response_id": "resp_1"}


# --- tool calls ---------------------------------------------------------------------------------------------


def test_interleaved_tool_calls_are_assembled_by_id() -> None:
    turn = accumulate(
        ToolCallStart("a", "read", 0),
        ToolCallStart("b", "grep", 1),
        ToolCallDelta("a", '{"pa'),
        ToolCallDelta("b", '{"pattern"'),
        ToolCallDelta("a", 'th": "x.py"}'),
        ToolCallDelta("b", ': "def"}'),
        ToolCallEnd("b"),
        ToolCallEnd("a"),
        end("tool_calls"),
    )
    assert turn.tool_calls == (
        ToolCall("a", "read", {"path": "x.py"}, '{"path": "x.py"}'),
        ToolCall("b", "grep", {"pattern": "def"}, '{"pattern": "def"}'),
    )
    assert turn.message.tool_calls == turn.tool_calls
    assert turn.incomplete_calls == ()


@pytest.mark.parametrize("raw", ['{"a": 1', "not json", "{'a': 1}"])
def test_arguments_that_are_not_json_stay_raw_with_arguments_none(raw: str) -> None:
    turn = accumulate(*whole_call("c1", "f", raw), end("tool_calls"))
    (call,) = turn.tool_calls
    assert call.arguments is None
    assert call.raw_arguments == raw


@pytest.mark.parametrize("raw", ["[1, 2]", '"text"', "3", "null", "true"])
def test_json_that_is_not_an_object_stays_raw_with_arguments_none(raw: str) -> None:
    (call,) = accumulate(*whole_call("c1", "f", raw), end("tool_calls")).tool_calls
    assert call.arguments is None
    assert call.raw_arguments == raw


@pytest.mark.parametrize("raw", ["", "  \n"])
def test_empty_arguments_mean_no_arguments(raw: str) -> None:
    (call,) = accumulate(*whole_call("c1", "f", raw), end("tool_calls")).tool_calls
    assert call.arguments == {}


def test_a_call_without_deltas_has_empty_arguments() -> None:
    turn = accumulate(ToolCallStart("c1", "now", 0), ToolCallEnd("c1"), end("tool_calls"))
    assert turn.tool_calls == (ToolCall("c1", "now", {}, ""),)


def test_parse_arguments_keeps_nested_values() -> None:
    assert parse_arguments('{"a": {"b": [1, 2.5, null]}, "c": "ü"}') == {"a": {"b": [1, 2.5, None]}, "c": "ü"}


# --- cut off at the output limit ----------------------------------------------------------------------------


def test_a_call_not_ended_under_length_is_incomplete_and_not_in_the_message() -> None:
    turn = accumulate(
        TextDelta("Writing"),
        *whole_call("done", "f", '{"x": 1}'),
        ToolCallStart("cut", "g", 1),
        ToolCallDelta("cut", '{"content": "half'),
        end("length"),
    )
    assert [c.id for c in turn.incomplete_calls] == ["cut"]
    assert [c.id for c in turn.tool_calls] == ["done"]
    assert [c.id for c in turn.message.tool_calls] == ["done"]
    assert turn.message.text == "Writing"
    assert turn.finish_reason == "length"


def test_a_call_ended_with_unparseable_arguments_under_length_is_incomplete() -> None:
    turn = accumulate(*whole_call("c1", "f", '{"x": '), end("length"))
    assert [c.id for c in turn.incomplete_calls] == ["c1"]
    assert turn.tool_calls == ()
    assert turn.message.parts == ()


def test_a_completed_call_under_length_stays() -> None:
    turn = accumulate(*whole_call("c1", "f", '{"x": 1}'), end("length"))
    assert turn.tool_calls == (ToolCall("c1", "f", {"x": 1}, '{"x": 1}'),)
    assert turn.incomplete_calls == ()


def test_unparseable_arguments_are_not_incomplete_when_the_model_stopped_normally() -> None:
    turn = accumulate(*whole_call("c1", "f", "{oops"), end("tool_calls"))
    assert turn.incomplete_calls == ()
    assert turn.tool_calls[0].arguments is None


# --- end of stream ------------------------------------------------------------------------------------------


def test_usage_and_finish_reason_come_from_stream_end() -> None:
    turn = accumulate(StreamStart(model="gpt-x"), TextDelta("hi"), StreamEnd("content_filter", USAGE))
    assert turn.ended is True
    assert turn.usage == USAGE
    assert turn.finish_reason == "content_filter"
    assert turn.model == "gpt-x"


def test_a_stream_without_stream_end_is_not_ended() -> None:
    turn = accumulate(StreamStart(), TextDelta("partial"))
    assert turn.ended is False
    assert turn.usage == Usage()
    assert turn.finish_reason != "stop"
    assert turn.text == "partial"


# --- broken streams -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("event", [ToolCallDelta("ghost", "{}"), ToolCallEnd("ghost")])
def test_an_event_for_an_unknown_call_id_raises_invalid_response(event: LlmEvent) -> None:
    accumulator = StreamAccumulator()
    accumulator.add(ToolCallStart("real", "f", 0))
    with pytest.raises(InvalidResponse) as caught:
        accumulator.add(event)
    assert caught.value.code == "invalid_response"
    assert "ghost" in str(caught.value)


def test_a_call_id_started_twice_raises_invalid_response() -> None:
    accumulator = StreamAccumulator()
    accumulator.add(ToolCallStart("c1", "f", 0))
    with pytest.raises(InvalidResponse, match="c1"):
        accumulator.add(ToolCallStart("c1", "g", 1))


# --- what a host is shown as it comes: deltas, thinking marks, retries --------------------------------------


def shown(*events: LlmEvent) -> list[str]:
    """What the accumulator shows of ``events``, in order (what it holds after each event included), as kinds
    (a delta with its text)."""
    accumulator = StreamAccumulator()
    out: list[str] = []
    for event in events:
        first = accumulator.add(event)
        items = [] if first is None else [first]
        while accumulator.held is not None:
            items.append(accumulator.release())
        out += [
            f"{item.kind}:{item.text}" if isinstance(item, TextDelta | ThinkingDelta) else item.kind for item in items
        ]
    return out


def test_a_thinking_block_is_shown_between_its_start_and_its_end_where_the_text_begins() -> None:
    assert shown(StreamStart(), ThinkingDelta("a"), ThinkingDelta("b"), TextDelta("c"), TextDelta("d"), end()) == [
        "thinking_started",
        "thinking_delta:a",
        "thinking_delta:b",
        "thinking_ended",
        "text_delta:c",
        "text_delta:d",
    ]


def test_a_signature_ends_its_block_and_the_next_thinking_starts_another() -> None:
    assert shown(ThinkingDelta("a"), ThinkingDelta("", signature="s1"), ThinkingDelta("b", signature="s2")) == [
        "thinking_started",
        "thinking_delta:a",
        "thinking_ended",
        "thinking_started",
        "thinking_delta:b",
        "thinking_ended",
    ]


def test_a_signature_with_text_shows_the_text_then_the_end() -> None:
    assert shown(ThinkingDelta("a"), ThinkingDelta("b", signature="s")) == [
        "thinking_started",
        "thinking_delta:a",
        "thinking_delta:b",
        "thinking_ended",
    ]


def test_a_tool_call_or_the_end_of_the_answer_ends_an_open_block_once() -> None:
    assert shown(ThinkingDelta("a"), *whole_call("c1", "f", "{}"), end("tool_calls")) == [
        "thinking_started",
        "thinking_delta:a",
        "thinking_ended",
    ]
    assert shown(ThinkingDelta("a"), end()) == ["thinking_started", "thinking_delta:a", "thinking_ended"]


def test_a_block_without_text_is_marked_all_the_same() -> None:
    assert shown(ThinkingDelta("", signature="redacted"), TextDelta("x")) == [
        "thinking_started",
        "thinking_ended",
        "text_delta:x",
    ]


def test_an_answer_without_thinking_shows_no_marks_and_holds_nothing() -> None:
    accumulator = StreamAccumulator()
    for event in (StreamStart(), TextDelta("a"), *whole_call("c1", "f", "{}"), TextDelta("b"), end()):
        accumulator.add(event)
        assert accumulator.held is None
    assert shown(TextDelta("a"), *whole_call("c1", "f", "{}"), TextDelta("b"), end()) == [
        "text_delta:a",
        "text_delta:b",
    ]


def test_a_retry_is_shown_as_it_is_and_is_not_the_first_event_of_the_answer() -> None:
    accumulator = StreamAccumulator()
    retry = ProviderRetry(2, 1.5, "rate_limited", "slow down", 429)
    assert accumulator.add(retry) is retry
    assert accumulator.first_event == 0.0  # time to first token counts from the answer, not from a retry
    accumulator.add(TextDelta("a"))
    assert accumulator.first_event > 0.0
    assert accumulator.finish().message.parts == (Text("a"),)


def test_marks_do_not_change_the_parts() -> None:
    turn = accumulate(ThinkingDelta("a"), ThinkingDelta("", signature="s"), ThinkingDelta("b"), TextDelta("c"), end())
    assert turn.message.parts == (Thinking("a", "s"), Thinking("b"), Text("c"))
