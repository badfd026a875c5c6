"""OpenAI Responses without a server: the request body we build and the decoding of events and responses."""

from __future__ import annotations

from typing import Any

import pytest

from tether import Agent, Message, tool
from tether.errors import (
    BadRequest,
    ConfigInvalid,
    ContextOverflow,
    InvalidResponse,
    ProviderError,
    ProviderUnavailable,
    RateLimited,
    TransportError,
)
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
from tether.loop.accumulator import StreamAccumulator
from tether.messages import Text, Thinking, ToolCall, ToolResult
from tether.providers.base import ForceTool, ModelSettings, Request, ToolDefinition
from tether.providers.openai_responses import (
    ORIGIN,
    OpenAIResponsesProvider,
    encode_input,
    is_reasoning_model,
    parse_usage,
)
from tether.providers.openai_responses_stream import ResponsesDecoder
from tether.providers.registry import resolve
from tether.usage import Usage

WEATHER = ToolDefinition(
    "weather", "Weather in a city.", {"type": "object", "properties": {"city": {"type": "string"}}}
)


def provider(model: str = "gpt-4o", **options: Any) -> OpenAIResponsesProvider:
    options.setdefault("api_key", "sk-test")
    options.setdefault("base_url", "http://127.0.0.1:9/v1")
    return OpenAIResponsesProvider(model, **options)


def own(item_id: str, **more: Any) -> dict[str, Any]:
    return {"origin": ORIGIN, "id": item_id, **more}


def decode(*events: dict[str, Any]) -> list[LlmEvent]:
    decoder = ResponsesDecoder()
    out: list[LlmEvent] = []
    for event in events:
        out += decoder.feed(event)
    return out + decoder.end()


def created(model: str = "gpt-5-2025-08-07") -> dict[str, Any]:
    return {"type": "response.created", "response": {"id": "resp_1", "model": model, "status": "in_progress"}}


def completed(*output: dict[str, Any], status: str = "completed", **response: Any) -> dict[str, Any]:
    return {"type": f"response.{status}", "response": {"status": status, "output": list(output), **response}}


def call_item(item_id: str, call_id: str, arguments: str = "") -> dict[str, Any]:
    return {"type": "function_call", "id": item_id, "call_id": call_id, "name": "weather", "arguments": arguments}


def reasoning_item(item_id: str, encrypted: str | None, *summaries: str) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "reasoning",
        "id": item_id,
        "summary": [{"type": "summary_text", "text": text} for text in summaries],
    }
    if encrypted is not None:
        item["encrypted_content"] = encrypted
    return item


def accumulate(events: list[LlmEvent]) -> Message:
    accumulator = StreamAccumulator()
    for event in events:
        accumulator.add(event)
    return accumulator.finish().message


# --- the request body ---------------------------------------------------------------------------------------


def test_the_system_prompt_is_instructions_and_the_conversation_is_input_items_in_order() -> None:
    history = (
        Message.user("Weather in Paris?"),
        Message(
            "assistant",
            (Text("Let me look."), ToolCall("c1", "weather", {"city": "Paris"}, '{"city":"Paris"}')),
        ),
        Message("tool", (ToolResult("c1", "weather", "sunny"),)),
        Message.assistant("Sunny."),
        Message.user("Thanks"),
    )
    body = provider().request_body(Request(history, system="Be brief.", tools=(WEATHER,)))
    assert body["instructions"] == "Be brief."
    assert body["input"] == [
        {"role": "user", "content": "Weather in Paris?"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me look."}]},
        {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": '{"city":"Paris"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Sunny."}]},
        {"role": "user", "content": "Thanks"},
    ]
    assert (body["model"], body["stream"], body["store"]) == ("gpt-4o", True, False)
    assert "instructions" not in provider().request_body(Request(history))


def test_parallel_calls_come_first_then_their_outputs_in_the_same_order() -> None:
    items = encode_input(
        (
            Message("assistant", (ToolCall("a", "f", {}, "{}"), ToolCall("b", "g", {"x": 1}, '{"x": 1}'))),
            Message("tool", (ToolResult("a", "f", "1"), ToolResult("b", "g", "oops", is_error=True))),
        )
    )
    assert [(item["type"], item["call_id"]) for item in items] == [
        ("function_call", "a"),
        ("function_call", "b"),
        ("function_call_output", "a"),
        ("function_call_output", "b"),
    ]
    assert items[3]["output"] == "oops"


def test_arguments_without_raw_text_are_sent_as_json() -> None:
    (item,) = encode_input((Message("assistant", (ToolCall("c", "f", {"x": "é"}),)),))
    assert item["arguments"] == '{"x": "é"}'


def test_own_reasoning_goes_back_with_its_encrypted_content_and_links_the_items_after_it_by_id() -> None:
    summary = [{"type": "summary_text", "text": "Think."}]
    parts = (
        Thinking("Think.", "enc-1", own("rs_1", summary=summary)),
        Text("Looking.", own("msg_1")),
        ToolCall("call_1", "weather", {"city": "Oslo"}, '{"city":"Oslo"}', own("fc_1")),
    )
    assert encode_input((Message.user("hi"), Message("assistant", parts)))[1:] == [
        {"type": "reasoning", "id": "rs_1", "encrypted_content": "enc-1", "summary": summary},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Looking."}],
            "id": "msg_1",
        },
        {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": '{"city":"Oslo"}', "id": "fc_1"},
    ]


def test_a_reasoning_item_without_a_kept_summary_sends_its_text_as_the_summary() -> None:
    (item,) = encode_input((Message("assistant", (Thinking("Hmm.", "enc", own("rs_1")),)),))
    assert item == {
        "type": "reasoning",
        "id": "rs_1",
        "encrypted_content": "enc",
        "summary": [{"type": "summary_text", "text": "Hmm."}],
    }


def test_foreign_or_unreplayable_thinking_is_dropped_and_then_no_item_ids_are_sent() -> None:
    parts = (
        Thinking("Anthropic thought", "sig-anthropic", {"origin": "anthropic"}),
        Text("One ", own("msg_1")),
        Thinking("reasoning_content of Chat Completions"),
        Thinking("own, without encrypted content", "", own("rs_2")),
        Text("message.", own("msg_1")),
        ToolCall("call_1", "weather", {}, "{}", own("fc_1")),
    )
    # Nothing links the items to a reasoning item that is sent, so their ids stay home (an fc_ id without its
    # reasoning is refused); the text around the dropped thinking stays one message.
    assert encode_input((Message("assistant", parts),)) == [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "One "}, {"type": "output_text", "text": "message."}],
        },
        {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{}"},
    ]


def test_a_refusal_goes_back_as_refusal_content() -> None:
    (item,) = encode_input((Message("assistant", (Text("I can't help with that.", {"refusal": True}),)),))
    assert item["content"] == [{"type": "refusal", "refusal": "I can't help with that."}]


@pytest.mark.parametrize(
    ("model", "reasoning"),
    [
        ("gpt-5", True),
        ("gpt-5-mini", True),
        ("o3-mini", True),
        ("o4-mini", True),
        ("codex-mini-latest", True),
        ("gpt-4o", False),
        ("gpt-4.1-mini", False),
        ("gpt-5-chat-latest", False),
    ],
)
def test_only_reasoning_models_are_asked_for_encrypted_reasoning(model: str, reasoning: bool) -> None:
    body = provider(model).request_body(Request((Message.user("hi"),)))
    assert is_reasoning_model(model) is reasoning
    assert provider(model).info.supports_thinking is reasoning
    assert body.get("include") == (["reasoning.encrypted_content"] if reasoning else None)
    assert body["store"] is False


def test_tools_are_flat_function_definitions_sent_non_strict() -> None:
    body = provider().request_body(Request((Message.user("hi"),), tools=(WEATHER,), parallel_tool_calls=False))
    assert body["tools"] == [
        {
            "type": "function",
            "name": "weather",
            "description": "Weather in a city.",
            "parameters": WEATHER.parameters,
            "strict": False,
        }
    ]
    assert (body["tool_choice"], body["parallel_tool_calls"]) == ("auto", False)


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        (ForceTool("weather"), {"type": "function", "name": "weather"}),
    ],
)
def test_tool_choice_is_sent_as_the_api_names_it(choice: Any, sent: Any) -> None:
    body = provider().request_body(Request((Message.user("hi"),), tools=(WEATHER,), tool_choice=choice))
    assert body["tool_choice"] == sent


def test_no_tools_means_no_tool_fields() -> None:
    body = provider().request_body(Request((Message.user("hi"),), parallel_tool_calls=True))
    assert {"tools", "tool_choice", "parallel_tool_calls"} & set(body) == set()


def test_settings_are_sent_and_extra_is_merged_nested() -> None:
    settings = ModelSettings(
        max_tokens=100,
        temperature=0.2,
        top_p=0.9,
        extra={"reasoning": {"effort": "high", "summary": "auto"}, "include": [], "service_tier": "flex"},
    )
    body = provider("gpt-5").request_body(Request((Message.user("hi"),), settings=settings))
    assert (body["max_output_tokens"], body["temperature"], body["top_p"]) == (100, 0.2, 0.9)
    assert (body["reasoning"], body["service_tier"]) == ({"effort": "high", "summary": "auto"}, "flex")
    assert body["include"] == []  # the caller's choice wins over the default
    assert "max_tokens" not in body


def test_the_tools_off_summary_call_keeps_tool_choice_none_over_an_extra_default() -> None:
    settings = ModelSettings(extra={"tool_choice": "required"})
    final = provider().request_body(
        Request((Message.user("hi"),), tools=(WEATHER,), tool_choice="none", settings=settings)
    )
    assert final["tool_choice"] == "none"


# --- decoding a stream --------------------------------------------------------------------------------------


def test_created_gives_the_stream_start_and_text_deltas_carry_their_message_id_once() -> None:
    events = decode(
        created("gpt-4o-2024-08-06"),
        {"type": "response.in_progress", "response": {}},
        {"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "id": "msg_1"}},
        {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "delta": "Hel"},
        {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 0, "delta": "lo"},
        {"type": "response.output_text.done", "item_id": "msg_1", "output_index": 0, "text": "Hello"},
        completed(
            {"type": "message", "id": "msg_1", "content": [{"type": "output_text", "text": "Hello"}]},
            usage={"input_tokens": 5, "output_tokens": 2},
        ),
    )
    assert events == [
        StreamStart("gpt-4o-2024-08-06", "resp_1"),
        TextDelta("Hel", own("msg_1")),
        TextDelta("lo"),
        StreamEnd("stop", Usage(input_tokens=5, output_tokens=2)),
    ]
    assert accumulate(events).parts == (Text("Hello", own("msg_1")),)


def test_a_streamed_function_call_starts_at_its_output_index_and_ends_once() -> None:
    events = decode(
        created(),
        {"type": "response.output_item.added", "output_index": 1, "item": call_item("fc_1", "call_1")},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 1, "delta": '{"city"'},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 1, "delta": ':"Oslo"}'},
        {"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 1, "arguments": "x"},
        {"type": "response.output_item.done", "output_index": 1, "item": call_item("fc_1", "call_1", "x")},
        completed(call_item("fc_1", "call_1", '{"city":"Oslo"}')),
    )
    assert events[1:] == [
        ToolCallStart("call_1", "weather", 1, own("fc_1")),
        ToolCallDelta("call_1", '{"city"'),
        ToolCallDelta("call_1", ':"Oslo"}'),
        ToolCallEnd("call_1"),
        StreamEnd("tool_calls", Usage()),
    ]


def test_arguments_sent_only_whole_in_the_done_event_are_one_delta() -> None:
    events = decode(
        created(),
        {"type": "response.output_item.added", "output_index": 0, "item": call_item("fc_1", "call_1")},
        {"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": 0, "arguments": "{}"},
        completed(call_item("fc_1", "call_1", "{}")),
    )
    assert events[1:] == [
        ToolCallStart("call_1", "weather", 0, own("fc_1")),
        ToolCallDelta("call_1", "{}"),
        ToolCallEnd("call_1"),
        StreamEnd("tool_calls", Usage()),
    ]


def test_deltas_that_name_their_item_only_by_output_index_find_it() -> None:
    events = decode(
        created(),
        {"type": "response.output_item.added", "output_index": 3, "item": call_item("fc_1", "call_1")},
        {"type": "response.function_call_arguments.delta", "output_index": 3, "delta": "{}"},
        {"type": "response.function_call_arguments.done", "output_index": 3, "arguments": "{}"},
        completed(call_item("fc_1", "call_1", "{}")),
    )
    assert events[1:] == [
        ToolCallStart("call_1", "weather", 3, own("fc_1")),
        ToolCallDelta("call_1", "{}"),
        ToolCallEnd("call_1"),
        StreamEnd("tool_calls", Usage()),
    ]


def test_arguments_of_a_call_that_never_started_are_an_invalid_response() -> None:
    decoder = ResponsesDecoder()
    with pytest.raises(InvalidResponse, match="never started"):
        decoder.feed({"type": "response.function_call_arguments.delta", "item_id": "fc_9", "delta": "{"})


def summary_delta(item_id: str, index: int, delta: str) -> dict[str, Any]:
    return {"type": "response.reasoning_summary_text.delta", "item_id": item_id, "summary_index": index, "delta": delta}


def test_each_reasoning_item_is_one_thinking_part_closed_by_its_final_encrypted_content() -> None:
    rs_1 = reasoning_item("rs_1", "enc-final-1", "First part.", "Second.")
    rs_2 = reasoning_item("rs_2", "enc-final-2")
    events = decode(
        created(),
        {"type": "response.output_item.added", "output_index": 0, "item": reasoning_item("rs_1", "enc-partial")},
        {"type": "response.reasoning_summary_part.added", "item_id": "rs_1", "summary_index": 0},
        summary_delta("rs_1", 0, "First "),
        summary_delta("rs_1", 0, "part."),
        {"type": "response.reasoning_summary_part.added", "item_id": "rs_1", "summary_index": 1},
        summary_delta("rs_1", 1, "Second."),
        {"type": "response.output_item.done", "output_index": 0, "item": rs_1},
        {"type": "response.output_item.added", "output_index": 1, "item": call_item("fc_1", "call_1")},
        {"type": "response.output_item.done", "output_index": 1, "item": call_item("fc_1", "call_1", "{}")},
        {"type": "response.output_item.added", "output_index": 2, "item": reasoning_item("rs_2", None)},
        {"type": "response.output_item.done", "output_index": 2, "item": rs_2},
        completed(rs_1, call_item("fc_1", "call_1", "{}"), rs_2),
    )
    assert [e for e in events if isinstance(e, ThinkingDelta)] == [
        ThinkingDelta("First "),
        ThinkingDelta("part."),
        ThinkingDelta("\n\nSecond."),
        ThinkingDelta("", "enc-final-1", own("rs_1", summary=rs_1["summary"])),
        ThinkingDelta("", "enc-final-2", own("rs_2", summary=[])),
    ]
    message = accumulate(events)
    assert message.parts == (
        Thinking("First part.\n\nSecond.", "enc-final-1", own("rs_1", summary=rs_1["summary"])),
        ToolCall("call_1", "weather", {}, "{}", own("fc_1")),
        Thinking("", "enc-final-2", own("rs_2", summary=[])),
    )
    # ... and each goes back as the item it was, the call linked to them by its id.
    assert [(item.get("type"), item.get("id")) for item in encode_input((Message.user("hi"), message))] == [
        (None, None),
        ("reasoning", "rs_1"),
        ("function_call", "fc_1"),
        ("reasoning", "rs_2"),
    ]


def test_reasoning_text_deltas_are_thinking_too() -> None:
    events = decode(
        created(),
        {"type": "response.reasoning_text.delta", "item_id": "rs_1", "content_index": 0, "delta": "Let me think"},
        {"type": "response.output_item.done", "output_index": 0, "item": {"type": "reasoning", "id": "rs_1"}},
        completed({"type": "reasoning", "id": "rs_1"}),
    )
    assert [e for e in events if isinstance(e, ThinkingDelta)] == [
        ThinkingDelta("Let me think"),
        ThinkingDelta("", "", own("rs_1", summary=[])),
    ]


def test_reasoning_without_encrypted_content_still_closes_its_part_but_is_not_sent_back() -> None:
    """Two such items stay two parts (an empty signature closes a block); with ``store: false`` their ids name
    nothing the server kept, so neither goes back."""
    events = decode(
        created(),
        summary_delta("rs_1", 0, "One."),
        {"type": "response.output_item.done", "output_index": 0, "item": reasoning_item("rs_1", None, "One.")},
        summary_delta("rs_2", 0, "Two."),
        {"type": "response.output_item.done", "output_index": 1, "item": reasoning_item("rs_2", None, "Two.")},
        completed(),
    )
    message = accumulate(events)
    assert [(part.text, part.signature) for part in message.parts if isinstance(part, Thinking)] == [
        ("One.", ""),
        ("Two.", ""),
    ]
    assert encode_input((message,)) == []


def test_a_refusal_is_text_marked_as_a_refusal() -> None:
    events = decode(
        created(),
        {"type": "response.refusal.delta", "item_id": "msg_1", "output_index": 0, "delta": "I can't "},
        {"type": "response.refusal.delta", "item_id": "msg_1", "output_index": 0, "delta": "help."},
        completed(),
    )
    assert events[1:3] == [
        TextDelta("I can't ", own("msg_1", refusal=True)),
        TextDelta("help.", {"refusal": True}),
    ]
    assert accumulate(events).parts == (Text("I can't help.", own("msg_1", refusal=True)),)


def test_usage_counts_cached_input_apart_and_reasoning_tokens_as_part_of_the_output() -> None:
    usage = {
        "input_tokens": 2087,
        "input_tokens_details": {"cached_tokens": 2048},
        "output_tokens": 1926,
        "output_tokens_details": {"reasoning_tokens": 1792},
        "total_tokens": 4013,
    }
    assert parse_usage(usage) == Usage(
        input_tokens=39, output_tokens=1926, cache_read_tokens=2048, reasoning_tokens=1792
    )
    assert decode(created(), completed(usage=usage))[-1] == StreamEnd("stop", parse_usage(usage))


@pytest.mark.parametrize(
    ("reason", "finish"),
    [("max_output_tokens", "length"), ("content_filter", "content_filter"), ("something_new", "other")],
)
def test_an_incomplete_response_finishes_for_its_reason(reason: str, finish: str) -> None:
    events = decode(created(), completed(status="incomplete", incomplete_details={"reason": reason}))
    assert events[-1] == StreamEnd(finish, Usage())  # type: ignore[arg-type]


def test_an_incomplete_event_is_incomplete_even_when_its_response_leaves_the_status_out() -> None:
    event = {"type": "response.incomplete", "response": {"incomplete_details": {"reason": "max_output_tokens"}}}
    assert decode(created(), event)[-1] == StreamEnd("length", Usage())


def test_nothing_after_the_final_response_counts() -> None:
    events = decode(
        created(),
        completed(usage={"input_tokens": 1}),
        {"type": "response.output_text.delta", "item_id": "msg_9", "delta": "late"},
        completed(usage={"input_tokens": 2}),
    )
    assert events == [StreamStart("gpt-5-2025-08-07", "resp_1"), StreamEnd("stop", Usage(input_tokens=1))]


def test_a_call_cut_off_by_the_output_limit_is_left_open_and_never_executed() -> None:
    events = decode(
        created(),
        {"type": "response.output_item.added", "output_index": 0, "item": call_item("fc_1", "call_1")},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": '{"ci'},
        completed(status="incomplete", incomplete_details={"reason": "max_output_tokens"}),
    )
    assert not any(isinstance(e, ToolCallEnd) for e in events)
    accumulator = StreamAccumulator()
    for event in events:
        accumulator.add(event)
    turn = accumulator.finish()
    assert (turn.finish_reason, turn.tool_calls, len(turn.incomplete_calls)) == ("length", (), 1)


def test_a_call_the_stream_never_closed_is_closed_by_the_completed_response() -> None:
    events = decode(
        created(),
        {"type": "response.output_item.added", "output_index": 0, "item": call_item("fc_1", "call_1", "{}")},
        completed(call_item("fc_1", "call_1", "{}")),
    )
    assert events[1:] == [
        ToolCallStart("call_1", "weather", 0, own("fc_1")),
        ToolCallDelta("call_1", "{}"),
        ToolCallEnd("call_1"),
        StreamEnd("tool_calls", Usage()),
    ]


@pytest.mark.parametrize(
    ("error", "kind", "code"),
    [
        ({"code": "server_error", "message": "The server had an error."}, ProviderUnavailable, "provider_unavailable"),
        ({"code": "rate_limit_exceeded", "message": "Slow down."}, RateLimited, "rate_limited"),
        ({"code": "invalid_prompt", "message": "Your prompt was flagged."}, BadRequest, "bad_request"),
        ({"code": "image_too_large", "message": "Too big."}, BadRequest, "bad_request"),
        ({"code": "context_length_exceeded", "message": "Too long."}, ContextOverflow, "context_overflow"),
    ],
)
def test_a_failed_response_is_raised_with_the_code_its_error_names(
    error: dict[str, Any], kind: type[ProviderError], code: str
) -> None:
    decoder = ResponsesDecoder()
    decoder.feed(created())
    with pytest.raises(kind) as caught:
        decoder.feed({"type": "response.failed", "response": {"status": "failed", "error": error, "output": []}})
    assert caught.value.code == code
    assert caught.value.provider_message == error["message"]


@pytest.mark.parametrize(
    ("event", "kind"),
    [
        ({"type": "error", "code": "rate_limit_exceeded", "message": "Slow down.", "param": None}, RateLimited),
        ({"type": "error", "code": "server_error", "message": "Oops.", "param": None}, ProviderUnavailable),
        ({"type": "error", "code": None, "message": "Something went wrong.", "param": None}, ProviderUnavailable),
        (
            {"type": "error", "error": {"type": "invalid_request_error", "code": None, "message": "Bad input."}},
            BadRequest,
        ),
    ],
)
def test_an_error_event_is_raised_with_the_code_it_names(event: dict[str, Any], kind: type[ProviderError]) -> None:
    with pytest.raises(kind) as caught:
        decode(created(), event)
    assert caught.value.provider_message in ("Slow down.", "Oops.", "Something went wrong.", "Bad input.")
    assert caught.value.status is None


def test_events_the_decoder_does_not_use_are_ignored() -> None:
    events = decode(
        created(),
        {"type": "response.web_search_call.in_progress", "output_index": 0, "item_id": "ws_1"},
        {"type": "response.output_item.added", "output_index": 0, "item": {"type": "web_search_call", "id": "ws_1"}},
        {"type": "response.content_part.added", "item_id": "msg_1", "part": {"type": "output_text", "text": ""}},
        completed({"type": "web_search_call", "id": "ws_1", "status": "completed"}),
    )
    assert events == [StreamStart("gpt-5-2025-08-07", "resp_1"), StreamEnd("stop", Usage())]


def test_a_stream_that_stops_before_its_final_response_is_a_transport_error() -> None:
    decoder = ResponsesDecoder()
    decoder.feed(created())
    decoder.feed({"type": "response.output_text.delta", "item_id": "msg_1", "delta": "half an ans"})
    with pytest.raises(TransportError, match="before finishing"):
        decoder.end()
    with pytest.raises(InvalidResponse, match="without sending anything"):
        ResponsesDecoder().end()


def test_an_event_that_is_not_an_object_is_an_invalid_response() -> None:
    with pytest.raises(InvalidResponse):
        ResponsesDecoder().feed([1, 2])


# --- decoding a whole response --------------------------------------------------------------------------------


def test_a_whole_response_decodes_to_the_same_events_as_its_stream() -> None:
    output = [
        reasoning_item("rs_1", "enc", "Plan.", "Check."),
        {"type": "message", "id": "msg_1", "content": [{"type": "output_text", "text": "Looking."}]},
        call_item("fc_1", "call_1", '{"city":"Oslo"}'),
    ]
    usage = {"input_tokens": 10, "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 12}}
    response = {"id": "resp_1", "model": "gpt-5", "status": "completed", "output": output, "usage": usage}
    whole = ResponsesDecoder().whole(response)
    assert whole == [
        StreamStart("gpt-5", "resp_1"),
        ThinkingDelta("Plan.\n\nCheck.", "enc", own("rs_1", summary=output[0]["summary"])),
        TextDelta("Looking.", own("msg_1")),
        ToolCallStart("call_1", "weather", 2, own("fc_1")),
        ToolCallDelta("call_1", '{"city":"Oslo"}'),
        ToolCallEnd("call_1"),
        StreamEnd("tool_calls", Usage(input_tokens=10, output_tokens=20, reasoning_tokens=12)),
    ]
    streamed = decode(
        {"type": "response.created", "response": {"id": "resp_1", "model": "gpt-5"}},
        summary_delta("rs_1", 0, "Plan."),
        summary_delta("rs_1", 1, "Check."),
        {"type": "response.output_item.done", "output_index": 0, "item": output[0]},
        {"type": "response.output_text.delta", "item_id": "msg_1", "output_index": 1, "delta": "Looking."},
        {"type": "response.output_item.added", "output_index": 2, "item": call_item("fc_1", "call_1")},
        {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": '{"city":"Oslo"}'},
        {"type": "response.function_call_arguments.done", "item_id": "fc_1", "arguments": '{"city":"Oslo"}'},
        {"type": "response.completed", "response": response},
    )
    assert accumulate(whole) == accumulate(streamed)


def test_a_whole_response_read_from_a_stream_request_is_decoded_whole() -> None:
    """A server that ignores ``stream: true`` sends one JSON response, which arrives as one event."""
    response = {"id": "r", "model": "m", "status": "completed", "output": [], "usage": {"input_tokens": 1}}
    assert ResponsesDecoder().feed(response) == [StreamStart("m", "r"), StreamEnd("stop", Usage(input_tokens=1))]


def test_a_whole_failed_response_is_raised() -> None:
    with pytest.raises(ProviderUnavailable):
        ResponsesDecoder().whole({"status": "failed", "error": {"code": "server_error", "message": "x"}, "output": []})
    with pytest.raises(InvalidResponse, match="without output"):
        ResponsesDecoder().whole({"id": "r"})


# --- configuration and model strings --------------------------------------------------------------------------


def test_without_a_key_the_model_string_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigInvalid, match="OPENAI_API_KEY"):
        Agent("openai-responses:gpt-5")


def test_the_model_string_builds_this_provider_with_the_key_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    model = resolve("openai-responses:gpt-5")
    assert isinstance(model, OpenAIResponsesProvider)
    assert model.info.model_string == "openai-responses:gpt-5"
    assert "sk-from-env" not in repr(model)
    assert "api.openai.com/v1" in repr(model)


def test_a_server_of_its_own_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = resolve("openai-responses:gpt-oss-20b", base_url="http://127.0.0.1:8000/v1")
    assert model.info.name == "gpt-oss-20b"


def test_a_model_that_cannot_call_tools_is_refused_by_the_agent_when_given_tools() -> None:
    @tool
    def noop() -> str:
        """Nothing."""
        return ""

    weak = provider("o1-mini")
    assert weak.info.supports_tools is False
    with pytest.raises(ConfigInvalid, match="cannot call tools"):
        Agent(weak, tools=[noop], tool_mode="native")
    assert Agent(weak).provider is weak  # without tools it is fine
    assert Agent(provider("gpt-5"), tools=[noop]).provider.info.supports_tools
