"""Anthropic Messages without a server: the request body we build and the decoding of stream events."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from tether import Agent, Message, tool
from tether.errors import ConfigInvalid, InvalidResponse, ProviderError, TransportError
from tether.events import (
    LlmEvent,
    StreamEnd,
    StreamStart,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from tether.loop.accumulator import AccumulatedTurn, StreamAccumulator
from tether.messages import Text, Thinking, ToolCall, ToolResult
from tether.providers.anthropic import AnthropicProvider, encode_messages
from tether.providers.anthropic_stream import AnthropicDecoder, as_stream_events
from tether.providers.base import ForceTool, ModelSettings, Request, ToolDefinition
from tether.providers.registry import resolve
from tether.usage import Price, Usage, cost_of

WEATHER = ToolDefinition(
    "weather", "Weather in a city.", {"type": "object", "properties": {"city": {"type": "string"}}}
)
OURS = {"origin": "anthropic"}


def provider(**options: Any) -> AnthropicProvider:
    options.setdefault("api_key", "sk-ant-test")
    options.setdefault("base_url", "http://127.0.0.1:9/v1")
    options.setdefault("prompt_cache", "off")  # the bodies below are the mapping alone; breakpoints: test_prompt_cache
    return AnthropicProvider("claude-sonnet-4-5", **options)


def body_for(*messages: Message, **request: Any) -> dict[str, Any]:
    return provider().request_body(Request(messages, **request))


# Stream events as the API sends them (the JSON of each server-sent event's data).


def message_start(**usage: Any) -> dict[str, Any]:
    message = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5-20250929"}
    return {"type": "message_start", "message": {**message, "content": [], "usage": usage or {"input_tokens": 10}}}


def block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def block_delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


def block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_delta(stop_reason: str, **usage: int) -> dict[str, Any]:
    return {"type": "message_delta", "delta": {"stop_reason": stop_reason}, "usage": usage or {"output_tokens": 5}}


MESSAGE_STOP = {"type": "message_stop"}
PING = {"type": "ping"}


def text_block(index: int, *pieces: str) -> list[dict[str, Any]]:
    deltas = [block_delta(index, {"type": "text_delta", "text": piece}) for piece in pieces]
    return [block_start(index, {"type": "text", "text": ""}), *deltas, block_stop(index)]


def tool_block(index: int, call_id: str, name: str, *pieces: str) -> list[dict[str, Any]]:
    deltas = [block_delta(index, {"type": "input_json_delta", "partial_json": piece}) for piece in pieces]
    start = block_start(index, {"type": "tool_use", "id": call_id, "name": name, "input": {}})
    return [start, *deltas, block_stop(index)]


def thinking_block(index: int, text: str, signature: str) -> list[dict[str, Any]]:
    return [
        block_start(index, {"type": "thinking", "thinking": "", "signature": ""}),
        block_delta(index, {"type": "thinking_delta", "thinking": text}),
        block_delta(index, {"type": "signature_delta", "signature": signature}),
        block_stop(index),
    ]


def decode(*events: dict[str, Any]) -> list[LlmEvent]:
    decoder = AnthropicDecoder()
    out: list[LlmEvent] = []
    for event in events:
        out += decoder.feed(event)
    return out + decoder.end()


def accumulate(events: list[LlmEvent]) -> AccumulatedTurn:
    accumulator = StreamAccumulator()
    for event in events:
        accumulator.add(event)
    return accumulator.finish()


# --- the request body ---------------------------------------------------------------------------------------


def test_the_system_prompt_is_the_top_level_field_and_messages_are_blocks() -> None:
    body = body_for(Message.user("Weather in Paris?"), system="Be brief.", tools=(WEATHER,))
    assert body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]}],
        "system": "Be brief.",
        "stream": True,
        "tools": [{"name": "weather", "description": "Weather in a city.", "input_schema": WEATHER.parameters}],
        "tool_choice": {"type": "auto"},
    }


def test_system_messages_in_the_conversation_join_the_system_field() -> None:
    body = body_for(Message.system("Be kind."), Message.user("hi"), system="Be brief.")
    assert body["system"] == "Be brief.\n\nBe kind."
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert "system" not in body_for(Message.user("hi"))


def test_tool_results_become_one_user_message_of_results_in_order_with_is_error() -> None:
    history = (
        Message.user("Weather in Paris and Rome?"),
        Message(
            "assistant",
            (
                Text("Checking."),
                ToolCall("c1", "weather", {"city": "Paris"}, '{"city":"Paris"}'),
                ToolCall("c2", "weather", {"city": "Rome"}),
            ),
        ),
        Message("tool", (ToolResult("c1", "weather", "sunny"), ToolResult("c2", "weather", "no data", is_error=True))),
    )
    messages, _ = encode_messages(history)
    assert messages == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris and Rome?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "c1", "name": "weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "c2", "name": "weather", "input": {"city": "Rome"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "sunny", "is_error": False},
                {"type": "tool_result", "tool_use_id": "c2", "content": "no data", "is_error": True},
            ],
        },
    ]


def test_consecutive_user_content_is_merged_so_that_roles_alternate() -> None:
    history = (
        Message.user("Hi"),
        Message("assistant", (ToolCall("c1", "f", {}),)),
        Message("tool", (ToolResult("c1", "f", "done"),)),
        Message.user("Your answer was empty; answer in words."),
        Message.user("Please."),
    )
    messages, _ = encode_messages(history)
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[2]["content"] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": "done", "is_error": False},
        {"type": "text", "text": "Your answer was empty; answer in words."},
        {"type": "text", "text": "Please."},
    ]


def test_empty_text_and_empty_messages_are_left_out_and_an_empty_result_has_no_content() -> None:
    history = (
        Message.user("Hi"),
        Message.assistant(""),
        Message("user", (Text(""), Text("Again?"))),
        Message("assistant", (ToolCall("c1", "f", {}),)),
        Message("tool", (ToolResult("c1", "f", ""),)),
    )
    messages, _ = encode_messages(history)
    assert messages == [
        {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "Again?"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "is_error": False}]},
    ]


def test_arguments_that_are_not_an_object_go_back_as_an_empty_object() -> None:
    messages, _ = encode_messages([Message("assistant", (ToolCall("c1", "f", None, '{"x": '),))])
    assert messages[0]["content"] == [{"type": "tool_use", "id": "c1", "name": "f", "input": {}}]


def test_our_thinking_goes_back_unchanged_with_its_signature_and_foreign_or_unsigned_thinking_is_dropped() -> None:
    answer = Message(
        "assistant",
        (
            Thinking("I should check the weather.", "sig/abc+==", OURS),
            Thinking("OpenAI reasoning", "enc-123", {"origin": "openai-responses"}),
            Thinking("DeepSeek reasoning"),
            Thinking("cut off before its signature", None, OURS),
            Text("It is sunny."),
        ),
    )
    messages, _ = encode_messages([Message.user("Weather?"), answer])
    assert messages[1]["content"] == [
        {"type": "thinking", "thinking": "I should check the weather.", "signature": "sig/abc+=="},
        {"type": "text", "text": "It is sunny."},
    ]


def test_redacted_thinking_round_trips_as_a_closed_thinking_part_and_goes_back_as_redacted_thinking() -> None:
    events = decode(
        message_start(),
        block_start(0, {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"}),
        block_stop(0),
        *thinking_block(1, "Visible reasoning.", "sig-1"),
        *text_block(2, "Done."),
        message_delta("end_turn"),
        MESSAGE_STOP,
    )
    redacted = ThinkingDelta(
        "", signature="EmwKAhgBEgy3va3pzix/LafPsn4a", provider_data={"origin": "anthropic", "redacted": True}
    )
    assert events[1] == redacted
    turn = accumulate(events)
    assert turn.message.parts == (
        Thinking("", "EmwKAhgBEgy3va3pzix/LafPsn4a", {"origin": "anthropic", "redacted": True}),
        Thinking("Visible reasoning.", "sig-1", OURS),
        Text("Done."),
    )
    messages, _ = encode_messages([Message.user("Hi"), turn.message])
    assert messages[1]["content"] == [
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4a"},
        {"type": "thinking", "thinking": "Visible reasoning.", "signature": "sig-1"},
        {"type": "text", "text": "Done."},
    ]


def test_max_tokens_is_always_sent_from_the_settings_or_the_default() -> None:
    request = Request((Message.user("hi"),))
    assert provider().request_body(request)["max_tokens"] == 4096
    assert provider(max_tokens_default=1000).request_body(request)["max_tokens"] == 1000
    limited = Request((Message.user("hi"),), settings=ModelSettings(max_tokens=64))
    assert provider().request_body(limited)["max_tokens"] == 64


def test_a_default_max_tokens_is_raised_above_a_thinking_budget_but_a_given_one_is_kept() -> None:
    thinking = {"thinking": {"type": "enabled", "budget_tokens": 8000}}
    body = provider().request_body(Request((Message.user("hi"),), settings=ModelSettings(extra=thinking)))
    assert (body["max_tokens"], body["thinking"]) == (8000 + 4096, thinking["thinking"])
    small = {"thinking": {"type": "enabled", "budget_tokens": 1024}}
    assert (
        provider().request_body(Request((Message.user("hi"),), settings=ModelSettings(extra=small)))["max_tokens"]
        == 4096
    )
    given = ModelSettings(max_tokens=2000, extra=thinking)
    assert provider().request_body(Request((Message.user("hi"),), settings=given))["max_tokens"] == 2000


def test_sampling_settings_and_extra_fields_are_sent() -> None:
    settings = ModelSettings(
        temperature=0.2, top_p=0.9, extra={"stop_sequences": ["END"], "metadata": {"user_id": "u"}}
    )
    body = provider().request_body(Request((Message.user("hi"),), settings=settings))
    assert (body["temperature"], body["top_p"], body["stop_sequences"], body["metadata"]) == (
        0.2,
        0.9,
        ["END"],
        {"user_id": "u"},
    )
    assert "temperature" not in body_for(Message.user("hi"))


@pytest.mark.parametrize(
    ("choice", "parallel", "sent"),
    [
        ("auto", None, {"type": "auto"}),
        ("none", None, {"type": "none"}),
        ("required", None, {"type": "any"}),
        (ForceTool("weather"), None, {"type": "tool", "name": "weather"}),
        ("auto", False, {"type": "auto", "disable_parallel_tool_use": True}),
        ("required", False, {"type": "any", "disable_parallel_tool_use": True}),
        ("none", False, {"type": "none"}),
        ("auto", True, {"type": "auto"}),
    ],
)
def test_tool_choice_is_sent_as_the_api_names_it(choice: Any, parallel: bool | None, sent: Any) -> None:
    body = body_for(Message.user("hi"), tools=(WEATHER,), tool_choice=choice, parallel_tool_calls=parallel)
    assert body["tool_choice"] == sent


def test_no_tools_means_no_tool_fields() -> None:
    body = body_for(Message.user("hi"), tool_choice="required")
    assert "tools" not in body
    assert "tool_choice" not in body


def test_the_tools_off_summary_call_keeps_tool_choice_none_over_an_extra_default() -> None:
    settings = ModelSettings(extra={"tool_choice": {"type": "any"}})
    normal = body_for(Message.user("hi"), tools=(WEATHER,), settings=settings)
    final = body_for(Message.user("hi"), tools=(WEATHER,), tool_choice="none", settings=settings)
    assert normal["tool_choice"] == {"type": "any"}
    assert final["tool_choice"] == {"type": "none"}


def test_not_streaming_says_so_in_the_body() -> None:
    assert provider(stream=False).request_body(Request((Message.user("hi"),)))["stream"] is False


# --- decoding -----------------------------------------------------------------------------------------------


def test_a_text_answer_gives_its_model_id_text_and_usage() -> None:
    events = decode(
        message_start(input_tokens=20, output_tokens=1),
        *text_block(0, "The capital", " is Paris."),
        message_delta("end_turn", output_tokens=10),
        MESSAGE_STOP,
    )
    assert events == [
        StreamStart("claude-sonnet-4-5-20250929", "msg_1"),
        TextDelta("The capital"),
        TextDelta(" is Paris."),
        StreamEnd("stop", Usage(input_tokens=20, output_tokens=10)),
    ]


def test_pings_are_ignored() -> None:
    plain = [message_start(), *text_block(0, "Hi"), message_delta("end_turn"), MESSAGE_STOP]
    with_pings = [PING, message_start(), PING, *text_block(0, "Hi"), PING, message_delta("end_turn"), MESSAGE_STOP]
    assert decode(*with_pings) == decode(*plain)


@pytest.mark.parametrize(
    ("stop_reason", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("tool_use", "tool_calls"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("refusal", "content_filter"),
        ("pause_turn", "other"),
        ("a_reason_from_the_future", "other"),
    ],
)
def test_stop_reasons_are_normalized(stop_reason: str, finish: str) -> None:
    events = decode(message_start(), *text_block(0, "x"), message_delta(stop_reason), MESSAGE_STOP)
    end = events[-1]
    assert isinstance(end, StreamEnd)
    assert end.finish_reason == finish


def test_usage_counts_cache_reads_and_writes_apart_and_the_final_counts_win() -> None:
    start = message_start(input_tokens=12, cache_read_input_tokens=300, cache_creation_input_tokens=40, output_tokens=1)
    final = message_delta("end_turn", output_tokens=57, cache_read_input_tokens=310)
    events = decode(start, *text_block(0, "ok"), final, MESSAGE_STOP)
    assert events[-1] == StreamEnd(
        "stop", Usage(input_tokens=12, output_tokens=57, cache_read_tokens=310, cache_write_tokens=40)
    )


def test_usage_counts_the_one_hour_cache_writes_apart_and_prices_them_at_twice_the_input() -> None:
    """A usage block of the shape the Messages API sends with 1-hour cache writes (``usage.cache_creation`` by
    TTL): the 1-hour writes are counted apart, part of the writes, and cost 2x the input price, the 5-minute
    ones the table's ``cache_write`` (1.25x)."""
    usage = {
        "input_tokens": 10,
        "cache_creation_input_tokens": 3_000,
        "cache_read_input_tokens": 0,
        "cache_creation": {"ephemeral_5m_input_tokens": 1_000, "ephemeral_1h_input_tokens": 2_000},
        "output_tokens": 1,
        "service_tier": "standard",
    }
    events = decode(message_start(**usage), *text_block(0, "ok"), message_delta("end_turn", output_tokens=5),
                    MESSAGE_STOP)  # fmt: skip
    end = events[-1]
    assert isinstance(end, StreamEnd)
    assert end.usage == Usage(input_tokens=10, output_tokens=5, cache_write_tokens=3_000, cache_write_1h_tokens=2_000)
    price = Price(input=3.00, output=15.00, cache_read=0.30, cache_write=3.75)
    cost = cost_of(end.usage, price)
    assert cost.input_usd == pytest.approx((10 * 3.00 + 1_000 * 3.75 + 2_000 * 6.00) / 1_000_000)
    with_hour_price = cost_of(end.usage, msgspec.structs.replace(price, cache_write_1h=5.0))
    assert with_hour_price.input_usd == pytest.approx((10 * 3.00 + 1_000 * 3.75 + 2_000 * 5.0) / 1_000_000)


@pytest.mark.parametrize(
    ("error_type", "code"),
    [
        ("overloaded_error", "provider_unavailable"),
        ("api_error", "provider_unavailable"),
        ("rate_limit_error", "rate_limited"),
        ("invalid_request_error", "bad_request"),
        ("authentication_error", "auth_failed"),
    ],
)
def test_an_error_event_in_the_stream_is_raised_with_the_code_its_type_names(error_type: str, code: str) -> None:
    decoder = AnthropicDecoder()
    decoder.feed(message_start())
    decoder.feed(block_start(0, {"type": "text", "text": ""}))
    error = {"type": "error", "error": {"type": error_type, "message": "Overloaded"}}
    with pytest.raises(ProviderError) as caught:
        decoder.feed(error)
    assert (caught.value.code, caught.value.provider_message) == (code, "Overloaded")


def test_interleaved_text_and_tool_use_blocks_keep_their_order() -> None:
    events = decode(
        message_start(),
        *text_block(0, "First Paris."),
        *tool_block(1, "toolu_a", "weather", '{"city":', ' "Paris"}'),
        *text_block(2, "Then Rome."),
        *tool_block(3, "toolu_b", "weather", '{"city": "Rome"}'),
        message_delta("tool_use"),
        MESSAGE_STOP,
    )
    assert events[1:-1] == [
        TextDelta("First Paris."),
        ToolCallStart("toolu_a", "weather", 0),
        ToolCallDelta("toolu_a", '{"city":'),
        ToolCallDelta("toolu_a", ' "Paris"}'),
        ToolCallEnd("toolu_a"),
        TextDelta("Then Rome."),
        ToolCallStart("toolu_b", "weather", 1),
        ToolCallDelta("toolu_b", '{"city": "Rome"}'),
        ToolCallEnd("toolu_b"),
    ]
    assert accumulate(events).message.parts == (
        Text("First Paris."),
        ToolCall("toolu_a", "weather", {"city": "Paris"}, '{"city": "Paris"}'),
        Text("Then Rome."),
        ToolCall("toolu_b", "weather", {"city": "Rome"}, '{"city": "Rome"}'),
    )


def test_several_parallel_tool_use_blocks_are_numbered_in_order_and_a_call_without_arguments_gets_an_object() -> None:
    events = decode(
        message_start(),
        *tool_block(0, "toolu_1", "get_time"),
        *tool_block(1, "toolu_2", "weather", "", '{"city": "Oslo"}'),
        *tool_block(2, "toolu_3", "weather", '{"city": "Lima"}'),
        message_delta("tool_use"),
        MESSAGE_STOP,
    )
    assert [(e.id, e.name, e.index) for e in events if isinstance(e, ToolCallStart)] == [
        ("toolu_1", "get_time", 0),
        ("toolu_2", "weather", 1),
        ("toolu_3", "weather", 2),
    ]
    turn = accumulate(events)
    assert [(c.id, c.arguments, c.raw_arguments) for c in turn.tool_calls] == [
        ("toolu_1", {}, "{}"),
        ("toolu_2", {"city": "Oslo"}, '{"city": "Oslo"}'),
        ("toolu_3", {"city": "Lima"}, '{"city": "Lima"}'),
    ]
    assert turn.finish_reason == "tool_calls"


def test_thinking_deltas_then_the_signature_close_one_thinking_block_per_signature() -> None:
    events = decode(
        message_start(),
        *thinking_block(0, "First thought.", "sig-A"),
        *thinking_block(1, "Second thought.", "sig-B"),
        *text_block(2, "Answer."),
        message_delta("end_turn"),
        MESSAGE_STOP,
    )
    assert events[1:3] == [ThinkingDelta("First thought."), ThinkingDelta("", signature="sig-A", provider_data=OURS)]
    assert accumulate(events).message.parts == (
        Thinking("First thought.", "sig-A", OURS),
        Thinking("Second thought.", "sig-B", OURS),
        Text("Answer."),
    )


def test_server_blocks_are_not_tool_calls_and_go_back_where_they_were() -> None:
    search = {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
    results = {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [{"type": "x"}]}
    events = decode(
        message_start(),
        *text_block(0, "Let me search."),
        block_start(1, search),
        block_delta(1, {"type": "input_json_delta", "partial_json": '{"query": '}),
        block_delta(1, {"type": "input_json_delta", "partial_json": '"weather"}'}),
        block_stop(1),
        block_start(2, results),
        block_stop(2),
        *text_block(3, "Found it."),
        *tool_block(4, "toolu_1", "weather", '{"city": "Oslo"}'),
        message_delta("tool_use"),
        MESSAGE_STOP,
    )
    assert [e.id for e in events if isinstance(e, ToolCallStart)] == ["toolu_1"]
    turn = accumulate(events)
    assert [type(p).__name__ for p in turn.message.parts] == ["Text", "ToolCall"]
    assert turn.text == "Let me search.Found it."
    messages, _ = encode_messages([Message.user("Weather?"), turn.message])
    assert messages[1]["content"] == [
        {"type": "text", "text": "Let me search."},
        {**search, "input": {"query": "weather"}},
        results,
        {"type": "text", "text": "Found it."},
        {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}},
    ]


def test_a_turn_paused_after_a_server_tool_use_sends_it_back_last_to_resume() -> None:
    search = {"type": "server_tool_use", "id": "srvtoolu_9", "name": "web_search", "input": {"query": "news"}}
    events = decode(
        message_start(),
        *text_block(0, "Searching."),
        block_start(1, search),
        block_stop(1),
        message_delta("pause_turn"),
        MESSAGE_STOP,
    )
    turn = accumulate(events)
    assert (turn.finish_reason, turn.text, turn.tool_calls) == ("other", "Searching.", ())
    messages, _ = encode_messages([Message.user("News?"), turn.message])
    assert messages[1]["content"] == [{"type": "text", "text": "Searching."}, search]


def test_server_blocks_of_another_provider_are_not_sent() -> None:
    block = {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}}
    message = Message(
        "assistant", (Text("Hi"),), {"origin": "gemini", "server_blocks": [{"anchor": [0, 0], "block": block}]}
    )
    messages, _ = encode_messages([Message.user("x"), message])
    assert messages[1]["content"] == [{"type": "text", "text": "Hi"}]


def test_a_whole_message_decodes_to_the_same_turn_as_its_stream() -> None:
    content = [
        {"type": "thinking", "thinking": "Plan.", "signature": "sig-W"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
        {"type": "tool_use", "id": "toolu_2", "name": "g", "input": {"x": "é"}},
    ]
    usage = {"input_tokens": 5, "output_tokens": 6, "cache_read_input_tokens": 2, "cache_creation_input_tokens": 0}
    whole = {
        "id": "msg_w",
        "type": "message",
        "role": "assistant",
        "model": "claude-haiku-4-5",
        "content": content,
        "stop_reason": "tool_use",
        "usage": usage,
    }
    events = AnthropicDecoder().whole(whole)
    assert events == [
        StreamStart("claude-haiku-4-5", "msg_w"),
        ThinkingDelta("Plan."),
        ThinkingDelta("", signature="sig-W", provider_data=OURS),
        ThinkingDelta("", signature="opaque", provider_data={"origin": "anthropic", "redacted": True}),
        TextDelta("Let me look."),
        ToolCallStart("toolu_1", "f", 0),
        ToolCallDelta("toolu_1", "{}"),
        ToolCallEnd("toolu_1"),
        ToolCallStart("toolu_2", "g", 1),
        ToolCallDelta("toolu_2", '{"x": "é"}'),
        ToolCallEnd("toolu_2"),
        StreamEnd("tool_calls", Usage(input_tokens=5, output_tokens=6, cache_read_tokens=2)),
    ]
    # The same message written as the stream events that would have delivered it gives the same events.
    assert decode(*as_stream_events(whole)) == events


def test_a_whole_message_sent_to_a_streamed_request_is_read_whole() -> None:
    whole = {"type": "message", "id": "m", "model": "c", "content": [{"type": "text", "text": "hi"}]}
    events = decode({**whole, "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}})
    assert events == [StreamStart("c", "m"), TextDelta("hi"), StreamEnd("stop", Usage(1, 1))]


def test_a_call_cut_off_by_max_tokens_stays_open_and_is_never_run() -> None:
    events = decode(
        message_start(),
        *text_block(0, "Writing the file."),
        block_start(1, {"type": "tool_use", "id": "toolu_1", "name": "write", "input": {}}),
        block_delta(1, {"type": "input_json_delta", "partial_json": '{"text": "very lo'}),
        message_delta("max_tokens"),
        MESSAGE_STOP,
    )
    assert not any(isinstance(e, ToolCallEnd) for e in events)
    turn = accumulate(events)
    assert (turn.finish_reason, turn.tool_calls, [c.name for c in turn.incomplete_calls]) == ("length", (), ["write"])


def test_a_stream_that_stops_before_its_stop_reason_is_a_transport_error() -> None:
    decoder = AnthropicDecoder()
    decoder.feed(message_start())
    decoder.feed(block_start(0, {"type": "text", "text": ""}))
    with pytest.raises(TransportError, match="before finishing"):
        decoder.end()
    with pytest.raises(InvalidResponse, match="without sending anything"):
        AnthropicDecoder().end()


@pytest.mark.parametrize(
    "event",
    [
        block_delta(7, {"type": "text_delta", "text": "x"}),
        block_stop(7),
        {"type": "content_block_start", "content_block": {"type": "text", "text": ""}},
        [1, 2],
    ],
)
def test_events_that_break_the_protocol_are_an_invalid_response(event: Any) -> None:
    decoder = AnthropicDecoder()
    decoder.feed(message_start())
    with pytest.raises(InvalidResponse):
        decoder.feed(event)


# --- configuration and model strings --------------------------------------------------------------------------


def test_without_a_key_the_provider_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigInvalid, match="ANTHROPIC_API_KEY"):
        Agent("anthropic:claude-sonnet-4-5")


def test_the_key_is_read_from_the_environment_and_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    model = resolve("anthropic:claude-haiku-4-5")
    assert isinstance(model, AnthropicProvider)
    assert model.info.model_string == "anthropic:claude-haiku-4-5"
    assert "sk-ant-from-env" not in repr(model)
    assert "api.anthropic.com/v1" in repr(model)


def test_a_model_string_takes_a_base_url_and_a_key_and_none_means_not_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    model = resolve("anthropic:claude-opus-4-5", base_url="http://127.0.0.1:9/v1", api_key="k")
    assert "http://127.0.0.1:9/v1" in repr(model)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    assert "https://api.anthropic.com/v1" in repr(resolve("anthropic:claude-opus-4-5", base_url=None, api_key=None))


def test_max_tokens_default_must_be_a_positive_integer() -> None:
    with pytest.raises(ConfigInvalid, match="max_tokens_default"):
        provider(max_tokens_default=0)


def test_capabilities_are_honest_about_tools_and_thinking() -> None:
    assert provider().info.supports_tools
    assert provider().info.supports_thinking
    legacy = AnthropicProvider("claude-2.1", api_key="k")
    assert not legacy.info.supports_tools
    assert not AnthropicProvider("claude-3-5-haiku-latest", api_key="k").info.supports_thinking


def test_a_model_that_cannot_call_tools_is_refused_by_the_agent_when_given_tools() -> None:
    @tool
    def noop() -> str:
        """Nothing."""
        return ""

    with pytest.raises(ConfigInvalid, match="cannot call tools"):
        Agent("anthropic:claude-2.1", api_key="sk-ant-test", tools=[noop], tool_mode="native")
    with pytest.raises(ConfigInvalid, match="cannot call tools"):
        Agent(AnthropicProvider("claude-instant-1.2", api_key="k"), tools=[noop], tool_mode="native")
    assert Agent("anthropic:claude-2.1", api_key="sk-ant-test").provider.info.name == "claude-2.1"
    assert Agent("anthropic:claude-sonnet-4-5", api_key="sk-ant-test", tools=[noop]).provider.info.supports_tools
