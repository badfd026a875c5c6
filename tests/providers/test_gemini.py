"""Gemini's native API without a recorded server: the request body we build, the decoding of answers
(candidate selection included), and, over a loopback server, what the Agent does with blocked answers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from tests.helpers import describe
from tests.wire.events import run_agent
from tether import Agent, tool
from tether.errors import (
    AuthFailed,
    ConfigInvalid,
    InvalidResponse,
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
from tether.messages import Message, Text, Thinking, ToolCall, ToolResult
from tether.providers.base import ForceTool, ModelSettings, Request, ToolDefinition
from tether.providers.gemini import GeminiProvider, encode_contents, parse_usage
from tether.providers.gemini_schema import to_gemini_schema
from tether.providers.gemini_stream import GeminiDecoder
from tether.providers.http import RetryPolicy
from tether.providers.registry import resolve
from tether.usage import Usage

WEATHER = ToolDefinition(
    "weather",
    "Weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
TIME = ToolDefinition("time", "The time now.", {"type": "object", "properties": {}})
GEMINI = {"origin": "gemini"}


def provider(**options: Any) -> GeminiProvider:
    options.setdefault("api_key", "test-key")
    options.setdefault("base_url", "http://127.0.0.1:9/v1beta")
    return GeminiProvider("gemini-2.5-flash", **options)


def body_for(request: Request, **options: Any) -> dict[str, Any]:
    return provider(**options).request_body(request)


def candidate(*parts: dict[str, Any], finish: str | None = "STOP", index: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}}
    if finish is not None:
        out["finishReason"] = finish
    if index is not None:
        out["index"] = index
    return out


def response(*candidates: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"candidates": list(candidates), "modelVersion": "gemini-2.5-flash", "responseId": "r1", **fields}


def decode(*chunks: Any, live: bool = True) -> list[LlmEvent]:
    decoder = GeminiDecoder(live=live)
    events: list[LlmEvent] = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    return events + decoder.end()


def end_of(events: list[LlmEvent]) -> StreamEnd:
    end = events[-1]
    assert isinstance(end, StreamEnd)
    return end


def texts(events: list[LlmEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


# --- the request body: roles, system instruction, tools ------------------------------------------------------


def test_roles_are_user_and_model_and_the_system_prompt_is_the_system_instruction() -> None:
    history = (
        Message.user("Weather in Paris?"),
        Message("assistant", (Text("Let me look."), ToolCall("c1", "weather", {"city": "Paris"}, '{"city":"Paris"}'))),
        Message("tool", (ToolResult("c1", "weather", "sunny"),)),
        Message.assistant("It is sunny."),
    )
    body = body_for(Request(history, system="Be brief."))
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "Weather in Paris?"}]},
        {
            "role": "model",
            "parts": [
                {"text": "Let me look."},
                {"functionCall": {"id": "c1", "name": "weather", "args": {"city": "Paris"}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"id": "c1", "name": "weather", "response": {"ok": True, "result": "sunny"}}}
            ],
        },
        {"role": "model", "parts": [{"text": "It is sunny."}]},
    ]
    assert "tools" not in body
    assert "toolConfig" not in body
    assert "generationConfig" not in body


def test_system_messages_in_the_history_join_the_system_instruction_and_leave_the_contents() -> None:
    body = body_for(Request((Message.system("Stored rules."), Message.user("hi")), system="Agent rules."))
    assert body["systemInstruction"] == {"parts": [{"text": "Agent rules."}, {"text": "Stored rules."}]}
    assert body["contents"] == [{"role": "user", "parts": [{"text": "hi"}]}]


def test_tools_go_in_one_tools_entry_with_their_json_schema_as_is_and_the_choice_is_auto() -> None:
    body = body_for(Request((Message.user("hi"),), tools=(WEATHER, TIME)))
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {"name": "weather", "description": "Weather in a city.", "parametersJsonSchema": WEATHER.parameters},
                {"name": "time", "description": "The time now.", "parametersJsonSchema": TIME.parameters},
            ]
        }
    ]
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "AUTO"}}


def test_a_schema_gemini_parameters_cannot_hold_goes_through_unchanged_as_json_schema() -> None:
    schema = {
        "type": "object",
        "properties": {"when": {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]}},
        "required": ["when"],
        "additionalProperties": False,
    }
    tool = ToolDefinition("remind", "Set a reminder.", schema)
    (declaration,) = body_for(Request((Message.user("hi"),), tools=(tool,)))["tools"][0]["functionDeclarations"]
    assert declaration == {"name": "remind", "description": "Set a reminder.", "parametersJsonSchema": schema}


def test_the_fallback_translates_parameters_to_the_openapi_subset_and_sends_no_json_schema() -> None:
    body = body_for(Request((Message.user("hi"),), tools=(WEATHER, TIME)), json_schema_parameters=False)
    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "weather",
                    "description": "Weather in a city.",
                    "parameters": {"type": "OBJECT", "properties": {"city": {"type": "STRING"}}, "required": ["city"]},
                },
                {"name": "time", "description": "The time now.", "parameters": {"type": "OBJECT", "properties": {}}},
            ]
        }
    ]


@pytest.mark.parametrize(
    ("choice", "config"),
    [
        ("auto", {"mode": "AUTO"}),
        ("required", {"mode": "ANY"}),
        (ForceTool("weather"), {"mode": "ANY", "allowedFunctionNames": ["weather"]}),
        ("none", {"mode": "NONE"}),
    ],
)
def test_the_tool_choice_is_the_function_calling_mode(choice: Any, config: dict[str, Any]) -> None:
    body = body_for(Request((Message.user("hi"),), tools=(WEATHER,), tool_choice=choice))
    assert body["toolConfig"] == {"functionCallingConfig": config}


def test_settings_go_in_generation_config_and_extra_is_merged_into_it() -> None:
    thinking = {"generationConfig": {"thinkingConfig": {"includeThoughts": True}}, "safetySettings": []}
    settings = ModelSettings(temperature=0.2, max_tokens=100, top_p=0.9, extra=thinking)
    body = body_for(Request((Message.user("hi"),), settings=settings))
    assert body["generationConfig"] == {
        "maxOutputTokens": 100,
        "temperature": 0.2,
        "topP": 0.9,
        "thinkingConfig": {"includeThoughts": True},
    }
    assert body["safetySettings"] == []


def test_the_tools_off_summary_call_keeps_mode_none_over_an_extra_tool_config() -> None:
    extra = {"toolConfig": {"functionCallingConfig": {"mode": "ANY"}, "retrievalConfig": {"languageCode": "en"}}}
    request = Request((Message.user("hi"),), tools=(WEATHER,), tool_choice="none", settings=ModelSettings(extra=extra))
    assert body_for(request)["toolConfig"] == {
        "functionCallingConfig": {"mode": "NONE"},
        "retrievalConfig": {"languageCode": "en"},
    }
    normal = Request((Message.user("hi"),), tools=(WEATHER,), settings=ModelSettings(extra=extra))
    assert body_for(normal)["toolConfig"]["functionCallingConfig"] == {"mode": "ANY"}


def test_each_tool_schema_is_translated_once_per_definition() -> None:
    gemini = provider()
    first = gemini.request_body(Request((Message.user("hi"),), tools=(WEATHER,)))
    second = gemini.request_body(Request((Message.user("hi"), Message.assistant("hello")), tools=(WEATHER,)))
    (declaration,) = first["tools"][0]["functionDeclarations"]
    assert second["tools"][0]["functionDeclarations"][0] is declaration


def test_a_users_empty_prompt_is_still_sent() -> None:
    assert encode_contents([Message.user("")]) == [{"role": "user", "parts": [{"text": ""}]}]


# --- tool results -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "result"),
    [("84", 84), ('{"temp": 20.5, "unit": "C"}', {"temp": 20.5, "unit": "C"}), ("true", True), ("sunny", "sunny")],
)
def test_a_result_is_sent_in_the_ok_envelope_parsed_when_it_is_json(content: str, result: Any) -> None:
    (encoded,) = encode_contents([Message("tool", (ToolResult("c1", "f", content),))])
    assert encoded["parts"] == [
        {"functionResponse": {"id": "c1", "name": "f", "response": {"ok": True, "result": result}}}
    ]


def test_an_error_result_is_sent_in_the_error_envelope_with_its_code() -> None:
    error = ToolResult("c1", "f", "city must be a string", is_error=True, code="invalid_arguments")
    (encoded,) = encode_contents([Message("tool", (error,))])
    assert encoded["parts"][0]["functionResponse"]["response"] == {
        "ok": False,
        "error": {"code": "invalid_arguments", "message": "city must be a string", "details": None},
    }


def test_the_results_of_one_turn_go_back_in_one_content_in_the_order_received_with_the_call_ids() -> None:
    calls = (ToolCall("b", "f", {"n": 2}), ToolCall("a", "f", {"n": 1}), ToolCall("c", "g", {}))
    results = (ToolResult("b", "f", "2"), ToolResult("a", "f", "1"), ToolResult("c", "g", "x", is_error=True))
    contents = encode_contents([Message.user("go"), Message("assistant", calls), Message("tool", results)])
    assert [call["functionCall"]["id"] for call in contents[1]["parts"]] == ["b", "a", "c"]
    assert len(contents) == 3
    assert contents[2]["role"] == "user"
    answers = [part["functionResponse"] for part in contents[2]["parts"]]
    assert [(a["id"], a["name"], a["response"]["ok"]) for a in answers] == [
        ("b", "f", True),
        ("a", "f", True),
        ("c", "g", False),
    ]


def test_a_users_message_after_tool_results_joins_their_content_and_empty_messages_are_left_out() -> None:
    contents = encode_contents(
        [
            Message.user("go"),
            Message("assistant", (ToolCall("a", "f", {}),)),
            Message("tool", (ToolResult("a", "f", "1"),)),
            Message.user("Your previous reply could not be used."),
            Message("assistant", (Thinking("foreign", "sig", {"origin": "anthropic"}),)),
        ]
    )
    assert [content["role"] for content in contents] == ["user", "model", "user"]
    assert contents[2]["parts"][1] == {"text": "Your previous reply could not be used."}


# --- thinking and thought signatures ------------------------------------------------------------------------


def test_thought_parts_are_thinking_and_signatures_ride_on_the_part_that_carried_them() -> None:
    events = decode(
        response(
            candidate(
                {"text": "Let me think.", "thought": True},
                {"text": "", "thought": True, "thoughtSignature": "SIG-THINK"},
                {
                    "functionCall": {"id": "g1", "name": "weather", "args": {"city": "Paris"}},
                    "thoughtSignature": "SIG-C",
                },
                {"text": "Checking.", "thoughtSignature": "SIG-TEXT"},
            )
        ),
        live=False,
    )
    assert events == [
        StreamStart("gemini-2.5-flash", "r1"),
        ThinkingDelta("Let me think.", None, GEMINI),
        ThinkingDelta("", "SIG-THINK", GEMINI),
        ToolCallStart("g1", "weather", 0, {"origin": "gemini", "thoughtSignature": "SIG-C"}),
        ToolCallDelta("g1", '{"city": "Paris"}'),
        ToolCallEnd("g1"),
        TextDelta("Checking.", {"origin": "gemini", "thoughtSignature": "SIG-TEXT"}),
        StreamEnd("tool_calls", Usage()),
    ]


def test_thought_signatures_are_sent_back_on_the_same_parts_next_turn() -> None:
    accumulator = StreamAccumulator()
    chunks = [
        response(candidate({"text": "Hmm, ", "thought": True}, finish=None)),
        response(candidate({"text": "weather.", "thought": True, "thoughtSignature": "SIG-THINK"}, finish=None)),
        response(candidate({"text": "Looking", "thoughtSignature": "SIG-TEXT"}, finish=None)),
        response(candidate({"text": " it up."}, finish=None)),
        response(
            candidate({"functionCall": {"name": "weather", "args": {"city": "Oslo"}}, "thoughtSignature": "SIG-C"})
        ),
    ]
    for event in decode(*chunks):
        accumulator.add(event)
    turn = accumulator.finish()
    (call,) = turn.tool_calls
    history = [
        Message.user("Weather in Oslo?"),
        turn.message,
        Message("tool", (ToolResult(call.id, "weather", "cold"),)),
    ]
    model_turn = encode_contents(history)[1]
    assert model_turn == {
        "role": "model",
        "parts": [
            {"text": "Hmm, weather.", "thought": True, "thoughtSignature": "SIG-THINK"},
            {"text": "Looking it up.", "thoughtSignature": "SIG-TEXT"},
            {"functionCall": {"name": "weather", "args": {"city": "Oslo"}}, "thoughtSignature": "SIG-C"},
        ],
    }


def test_thinking_and_signatures_written_by_another_provider_are_not_sent() -> None:
    assistant = Message(
        "assistant",
        (
            Thinking("Anthropic reasoning", "anthropic-sig", {"origin": "anthropic"}),
            Thinking("reasoning of unknown origin", "sig"),
            Thinking("our own summary", None, GEMINI),
            Text("Answer.", {"origin": "openai-responses", "thoughtSignature": "not-ours"}),
            ToolCall("c1", "f", {}, "{}", {"origin": "anthropic", "thoughtSignature": "not-ours"}),
        ),
    )
    (_, model) = encode_contents([Message.user("hi"), assistant])
    assert model["parts"] == [
        {"text": "our own summary", "thought": True},
        {"text": "Answer."},
        {"functionCall": {"id": "c1", "name": "f", "args": {}}},
    ]


FOREIGN_TURN = Message(
    "assistant",
    (
        Text("Checking both."),
        ToolCall("c1", "weather", {"city": "Oslo"}, '{"city": "Oslo"}', {"origin": "anthropic"}),
        ToolCall("c2", "weather", {"city": "Rome"}, '{"city": "Rome"}'),
    ),
)
FOREIGN_HISTORY = [
    Message.user("Weather in Oslo and Rome?"),
    FOREIGN_TURN,
    Message("tool", (ToolResult("c1", "weather", "cold"), ToolResult("c2", "weather", "warm"))),
]


@pytest.mark.parametrize("model", ["gemini-3-flash-preview", "gemini-3.1-pro-preview", "models/gemini-4-pro"])
def test_on_gemini_3_a_turn_gemini_did_not_sign_gets_the_placeholder_on_its_first_call(model: str) -> None:
    body = GeminiProvider(model, api_key="k").request_body(Request(tuple(FOREIGN_HISTORY), tools=(WEATHER,)))
    parts = body["contents"][1]["parts"]
    assert [part.get("thoughtSignature") for part in parts] == [None, "skip_thought_signature_validator", None]


def test_on_gemini_3_a_real_signature_is_never_replaced() -> None:
    signed = ToolCall("c1", "weather", {"city": "Oslo"}, "{}", {"origin": "gemini", "thoughtSignature": "SIG"})
    turn = Message("assistant", (signed, FOREIGN_TURN.parts[2]))
    history = [FOREIGN_HISTORY[0], turn, FOREIGN_HISTORY[2]]
    body = GeminiProvider("gemini-3-pro-preview", api_key="k").request_body(Request(tuple(history)))
    assert [part.get("thoughtSignature") for part in body["contents"][1]["parts"]] == ["SIG", None]


@pytest.mark.parametrize("model", ["gemini-2.5-flash", "gemini-2.0-flash", "gemma-3-27b-it", "tunedModels/mine"])
def test_models_before_gemini_3_get_no_placeholder(model: str) -> None:
    body = GeminiProvider(model, api_key="k").request_body(Request(tuple(FOREIGN_HISTORY)))
    assert all("thoughtSignature" not in part for content in body["contents"] for part in content["parts"])


# --- decoding: calls, usage, finish reasons ------------------------------------------------------------------


def test_whole_function_calls_become_start_delta_end_and_a_call_without_an_id_gets_one_of_tethers() -> None:
    events = decode(
        response(
            candidate(
                {"functionCall": {"name": "weather", "args": {"city": "Paris"}}},
                {"functionCall": {"id": "given", "name": "time"}},
            )
        )
    )
    start = events[1]
    assert isinstance(start, ToolCallStart)
    generated = start.id
    assert generated.startswith("gemini_noid_")
    assert events[1:] == [
        ToolCallStart(generated, "weather", 0),
        ToolCallDelta(generated, '{"city": "Paris"}'),
        ToolCallEnd(generated),
        ToolCallStart("given", "time", 1),
        ToolCallDelta("given", "{}"),
        ToolCallEnd("given"),
        StreamEnd("tool_calls", Usage()),
    ]


def test_usage_counts_cached_prompt_tokens_apart_and_thoughts_as_output_and_reasoning() -> None:
    usage = {
        "promptTokenCount": 100,
        "cachedContentTokenCount": 60,
        "toolUsePromptTokenCount": 3,
        "candidatesTokenCount": 20,
        "thoughtsTokenCount": 5,
        "totalTokenCount": 128,
    }
    assert parse_usage(usage) == Usage(input_tokens=43, output_tokens=25, cache_read_tokens=60, reasoning_tokens=5)


def test_the_last_usage_of_a_stream_counts() -> None:
    events = decode(
        response(candidate({"text": "a"}, finish=None), usageMetadata={"promptTokenCount": 9}),
        response(candidate({"text": "b"}), usageMetadata={"promptTokenCount": 7, "candidatesTokenCount": 2}),
    )
    assert end_of(events).usage == Usage(input_tokens=7, output_tokens=2)


@pytest.mark.parametrize(
    ("finish", "mapped"),
    [
        ("STOP", "stop"),
        ("MAX_TOKENS", "length"),
        ("OTHER", "other"),
        ("LANGUAGE", "other"),
        ("FINISH_REASON_UNSPECIFIED", "other"),
    ],
)
def test_finish_reasons_of_a_usable_answer_are_normalized(finish: str, mapped: str) -> None:
    assert end_of(decode(response(candidate({"text": "x"}, finish=finish)))).finish_reason == mapped


@pytest.mark.parametrize("finish", ["SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII"])
def test_a_blocked_candidate_finishes_with_content_filter_and_no_output(finish: str) -> None:
    events = decode(response(candidate({"text": "half of something"}, finish=finish)), live=False)
    assert events == [StreamStart("gemini-2.5-flash", "r1"), StreamEnd("content_filter", Usage())]


# --- candidate selection ------------------------------------------------------------------------------------


def test_candidate_0_blocked_and_candidate_1_fine_gives_candidate_1() -> None:
    events = decode(
        response(
            candidate({"text": "Something unsafe"}, finish="SAFETY", index=0),
            candidate({"text": "A safe answer."}, index=1),
        ),
        live=False,
    )
    assert texts(events) == "A safe answer."
    assert end_of(events).finish_reason == "stop"


def test_an_empty_candidate_is_passed_over_for_the_next_one_with_content() -> None:
    events = decode(response(candidate(index=0), candidate({"text": "Here."}, index=1)), live=False)
    assert texts(events) == "Here."


def test_the_first_usable_candidate_wins_by_index_not_by_position() -> None:
    events = decode(response(candidate({"text": "second"}, index=1), candidate({"text": "first"}, index=0)), live=False)
    assert texts(events) == "first"


def test_all_candidates_blocked_gives_a_turn_without_output_finished_by_the_content_filter() -> None:
    events = decode(
        response(
            candidate({"text": "no"}, finish="SAFETY", index=0),
            candidate(finish="PROHIBITED_CONTENT", index=1),
        ),
        live=False,
    )
    assert events == [StreamStart("gemini-2.5-flash", "r1"), StreamEnd("content_filter", Usage())]


def test_a_malformed_function_call_is_never_the_answer() -> None:
    malformed = candidate(finish="MALFORMED_FUNCTION_CALL")
    malformed["finishMessage"] = "Malformed function call: print(weather(city=Paris)"
    alone = decode(response(malformed))
    assert alone == [StreamStart("gemini-2.5-flash", "r1"), StreamEnd("error", Usage())]
    with_call = candidate({"functionCall": {"name": "weather", "args": {}}}, finish="MALFORMED_FUNCTION_CALL", index=0)
    fine = candidate({"text": "I need a city."}, index=1)
    events = decode(response(with_call, fine), live=False)
    assert not any(isinstance(event, ToolCallStart) for event in events)
    assert texts(events) == "I need a city."


def test_a_mix_of_blocked_and_malformed_candidates_is_not_reported_as_a_content_filter() -> None:
    events = decode(response(candidate(finish="SAFETY", index=0), candidate(finish="MALFORMED_FUNCTION_CALL", index=1)))
    assert end_of(events).finish_reason == "error"


def test_a_blocked_prompt_gives_a_turn_without_output_finished_by_the_content_filter() -> None:
    blocked = {"promptFeedback": {"blockReason": "SAFETY"}, "usageMetadata": {"promptTokenCount": 8}}
    events = decode(blocked)
    assert events == [StreamStart(), StreamEnd("content_filter", Usage(input_tokens=8))]


def test_a_streamed_candidate_is_passed_on_as_it_arrives() -> None:
    decoder = GeminiDecoder(live=True)
    first = decoder.feed(response(candidate({"text": "Hel"}, finish=None)))
    assert first == [StreamStart("gemini-2.5-flash", "r1"), TextDelta("Hel")]
    assert decoder.feed(response(candidate({"text": "lo"}))) == [TextDelta("lo")]
    assert decoder.end() == [StreamEnd("stop", Usage())]


def test_a_streamed_candidate_blocked_after_part_of_it_streamed_fails_as_an_invalid_response() -> None:
    decoder = GeminiDecoder(live=True)
    decoder.feed(response(candidate({"text": "Here is how to"}, finish=None)))
    decoder.feed(response(candidate(finish="SAFETY")))
    with pytest.raises(InvalidResponse, match="SAFETY"):
        decoder.end()


def test_a_streamed_candidate_blocked_before_any_output_ends_with_the_content_filter() -> None:
    events = decode(
        response(candidate({"text": "thinking...", "thought": True}, finish=None)),
        response(candidate(finish="SAFETY")),
    )
    assert end_of(events).finish_reason == "content_filter"
    assert texts(events) == ""


def test_a_stream_asking_for_several_candidates_is_read_whole_before_choosing() -> None:
    chunks = [
        response(candidate({"text": "bad"}, finish=None, index=0), candidate({"text": "go"}, finish=None, index=1)),
        response(candidate(finish="RECITATION", index=0), candidate({"text": "od"}, index=1)),
    ]
    decoder = GeminiDecoder(live=False)
    assert decoder.feed(chunks[0]) == [StreamStart("gemini-2.5-flash", "r1")]
    assert decoder.feed(chunks[1]) == []
    assert decoder.end() == [TextDelta("go"), TextDelta("od"), StreamEnd("stop", Usage())]


def test_a_streamed_chunk_blocked_as_it_arrives_is_not_passed_on() -> None:
    decoder = GeminiDecoder(live=True)
    assert decoder.feed(response(candidate({"text": "Here is how to"}, finish="SAFETY"))) == [
        StreamStart("gemini-2.5-flash", "r1")
    ]
    assert decoder.end() == [StreamEnd("content_filter", Usage())]


# --- in-band errors and broken streams -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ({"code": 429, "message": "Resource has been exhausted", "status": "RESOURCE_EXHAUSTED"}, RateLimited),
        ({"code": 500, "message": "Internal error encountered.", "status": "INTERNAL"}, ProviderUnavailable),
        ({"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}, ProviderUnavailable),
    ],
)
def test_an_error_in_the_stream_is_raised_with_its_code(error: dict[str, Any], kind: type[Exception]) -> None:
    decoder = GeminiDecoder()
    decoder.feed(response(candidate({"text": "par"}, finish=None)))
    with pytest.raises(kind) as caught:
        decoder.feed({"error": error})
    assert error["message"] in str(caught.value)


def test_an_error_sent_as_a_json_array_is_raised() -> None:
    with pytest.raises(RateLimited):
        GeminiDecoder().feed([{"error": {"code": 429, "message": "Quota", "status": "RESOURCE_EXHAUSTED"}}])


def test_a_json_array_of_responses_is_read_in_order() -> None:
    events = decode([response(candidate({"text": "a"}, finish=None)), response(candidate({"text": "b"}))])
    assert texts(events) == "ab"


def test_a_stream_that_stops_before_any_finish_reason_is_a_transport_error() -> None:
    decoder = GeminiDecoder()
    decoder.feed(response(candidate({"text": "half an ans"}, finish=None)))
    with pytest.raises(TransportError, match="before finishing"):
        decoder.end()


def test_a_stream_without_any_chunk_is_an_invalid_response() -> None:
    with pytest.raises(InvalidResponse):
        GeminiDecoder().end()


def test_a_chunk_that_is_not_an_object_is_an_invalid_response() -> None:
    with pytest.raises(InvalidResponse):
        GeminiDecoder().feed("hello")


# --- schema translation: one test per construct -------------------------------------------------------------


def test_schema_types_are_upper_case() -> None:
    schema = {
        "type": "object",
        "properties": {
            "s": {"type": "string"},
            "n": {"type": "number"},
            "i": {"type": "integer"},
            "b": {"type": "boolean"},
            "a": {"type": "array", "items": {"type": "string"}},
        },
    }
    assert to_gemini_schema(schema) == {
        "type": "OBJECT",
        "properties": {
            "s": {"type": "STRING"},
            "n": {"type": "NUMBER"},
            "i": {"type": "INTEGER"},
            "b": {"type": "BOOLEAN"},
            "a": {"type": "ARRAY", "items": {"type": "STRING"}},
        },
    }


def test_schema_refs_are_inlined_from_defs_with_the_referring_description_kept() -> None:
    schema = {
        "$defs": {"City": {"type": "object", "properties": {"name": {"type": "string"}}, "description": "A city."}},
        "type": "object",
        "properties": {"home": {"$ref": "#/$defs/City", "description": "Where you live."}},
    }
    assert to_gemini_schema(schema)["properties"]["home"] == {
        "type": "OBJECT",
        "properties": {"name": {"type": "STRING"}},
        "description": "Where you live.",
    }


def test_schema_refs_under_definitions_are_inlined_too() -> None:
    schema = {
        "definitions": {"Id": {"type": "integer"}},
        "type": "object",
        "properties": {"id": {"$ref": "#/definitions/Id"}},
    }
    assert to_gemini_schema(schema)["properties"]["id"] == {"type": "INTEGER"}


def test_a_recursive_ref_is_expanded_once_then_left_open() -> None:
    schema = {
        "$defs": {
            "Node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}}}
        },
        "$ref": "#/$defs/Node",
    }
    assert to_gemini_schema(schema) == {
        "type": "OBJECT",
        "properties": {"children": {"type": "ARRAY", "items": {}}},
    }


def test_additional_properties_schema_and_title_keywords_are_dropped() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:x",
        "title": "Args",
        "type": "object",
        "additionalProperties": False,
        "properties": {"tags": {"type": "object", "additionalProperties": {"type": "string"}, "title": "Tags"}},
    }
    assert to_gemini_schema(schema) == {"type": "OBJECT", "properties": {"tags": {"type": "OBJECT"}}}


def test_any_of_a_type_and_null_is_that_type_nullable() -> None:
    optional = {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "Nickname"}
    assert to_gemini_schema(optional) == {"type": "STRING", "nullable": True, "default": None}


def test_a_type_list_with_null_is_the_type_nullable() -> None:
    assert to_gemini_schema({"type": ["integer", "null"], "minimum": 0}) == {
        "type": "INTEGER",
        "minimum": 0,
        "nullable": True,
    }


def test_any_of_several_types_stays_any_of_and_one_of_is_read_as_any_of() -> None:
    union = {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}], "description": "An id."}
    assert to_gemini_schema(union) == {
        "description": "An id.",
        "anyOf": [{"type": "STRING"}, {"type": "INTEGER"}],
        "nullable": True,
    }
    assert to_gemini_schema({"oneOf": [{"type": "string"}, {"type": "boolean"}]}) == {
        "anyOf": [{"type": "STRING"}, {"type": "BOOLEAN"}]
    }


def test_all_of_is_merged_into_one_schema() -> None:
    schema = {
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
            {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
        ],
        "description": "Both.",
    }
    assert to_gemini_schema(schema) == {
        "type": "OBJECT",
        "description": "Both.",
        "properties": {"a": {"type": "STRING"}, "b": {"type": "INTEGER"}},
        "required": ["a", "b"],
    }


def test_const_becomes_a_one_value_enum() -> None:
    assert to_gemini_schema({"const": "celsius"}) == {"type": "STRING", "enum": ["celsius"]}


def test_a_string_enum_is_kept_and_a_null_in_it_makes_the_value_nullable() -> None:
    assert to_gemini_schema({"enum": ["red", "green", None]}) == {
        "type": "STRING",
        "enum": ["red", "green"],
        "nullable": True,
    }


def test_an_enum_of_numbers_goes_into_the_description() -> None:
    assert to_gemini_schema({"type": "integer", "enum": [1, 2, 3], "description": "Level."}) == {
        "type": "INTEGER",
        "description": "Level. Allowed values: 1, 2, 3.",
    }


def test_exclusive_bounds_become_inclusive_ones() -> None:
    assert to_gemini_schema({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10}) == {
        "type": "INTEGER",
        "minimum": 1,
        "maximum": 9,
    }
    assert to_gemini_schema({"type": "number", "exclusiveMinimum": 0.5}) == {"type": "NUMBER", "minimum": 0.5}


def test_only_formats_gemini_accepts_are_kept() -> None:
    assert to_gemini_schema({"type": "string", "format": "date-time"}) == {"type": "STRING", "format": "date-time"}
    assert to_gemini_schema({"type": "string", "format": "uuid"}) == {"type": "STRING"}
    assert to_gemini_schema({"type": "integer", "format": "int64"}) == {"type": "INTEGER", "format": "int64"}


def test_tuple_items_become_items_of_any_of_the_element_schemas() -> None:
    pair = {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "minItems": 2, "maxItems": 2}
    assert to_gemini_schema(pair) == {
        "type": "ARRAY",
        "minItems": 2,
        "maxItems": 2,
        "items": {"anyOf": [{"type": "STRING"}, {"type": "INTEGER"}]},
    }


def test_required_keeps_only_names_that_are_properties() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "ghost"]}
    assert to_gemini_schema(schema)["required"] == ["a"]


def test_unsupported_validation_keywords_are_dropped_and_supported_ones_kept() -> None:
    schema = {
        "type": "string",
        "minLength": 1,
        "maxLength": 5,
        "pattern": "^[a-z]+$",
        "examples": ["abc"],
        "not": {"const": "x"},
        "deprecated": True,
    }
    assert to_gemini_schema(schema) == {"type": "STRING", "minLength": 1, "maxLength": 5, "pattern": "^[a-z]+$"}


def test_a_pydantic_model_schema_translates_end_to_end() -> None:
    from pydantic import BaseModel

    class Address(BaseModel):
        street: str
        zip_code: str | None = None

    class Order(BaseModel):
        item: str
        quantity: int = 1
        ship_to: Address

    assert to_gemini_schema(Order.model_json_schema()) == {
        "type": "OBJECT",
        "properties": {
            "item": {"type": "STRING"},
            "quantity": {"type": "INTEGER", "default": 1},
            "ship_to": {
                "type": "OBJECT",
                "properties": {
                    "street": {"type": "STRING"},
                    "zip_code": {"type": "STRING", "default": None, "nullable": True},
                },
                "required": ["street"],
            },
        },
        "required": ["item", "ship_to"],
    }


# --- construction and capabilities ---------------------------------------------------------------------------


def test_without_a_key_the_provider_is_refused_naming_both_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(ConfigInvalid, match="GEMINI_API_KEY or GOOGLE_API_KEY"):
        Agent("gemini:gemini-2.5-flash")


def test_a_model_without_function_calling_is_refused_by_the_agent_when_it_has_tools() -> None:
    @tool
    def noop() -> str:
        """Nothing."""
        return ""

    with pytest.raises(ConfigInvalid, match="cannot call tools"):
        Agent("gemini:gemma-3-27b-it", api_key="k", tools=[noop], tool_mode="native")
    assert Agent("gemini:gemma-3-27b-it", api_key="k").provider.info.supports_tools is False
    assert Agent("gemini:gemini-2.5-flash", api_key="k", tools=[noop]).provider.info.supports_tools is True


@pytest.mark.parametrize(
    ("model", "thinks"),
    [("gemini-2.0-flash", False), ("gemini-2.5-flash", True), ("gemini-3-pro-preview", True), ("gemini-10", True)],
)
def test_thinking_support_is_known_by_model_version(model: str, thinks: bool) -> None:
    assert GeminiProvider(model, api_key="k").info.supports_thinking is thinks


# --- over a loopback server ---------------------------------------------------------------------------------


class GeminiServer:
    """A Gemini API on loopback answering with scripted responses (whole or as an SSE stream)."""

    def __init__(self) -> None:
        self.answers: list[tuple[int, Any]] = []
        self.requests: list[dict[str, Any]] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(
            {
                "path": request.path,
                "query": request.query_string,
                "key": request.headers.get("x-goog-api-key"),
                "body": body,
            }
        )
        status, answer = self.answers.pop(0)
        if status != 200 or not request.path.endswith(":streamGenerateContent"):
            return web.json_response(answer, status=status)
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)
        for chunk in answer:
            await stream.write(f"data: {json.dumps(chunk)}\r\n\r\n".encode())
        return stream


@pytest.fixture
async def gemini() -> AsyncIterator[tuple[GeminiServer, str]]:
    server = GeminiServer()
    app = web.Application()
    app.router.add_post("/{tail:.*}", server.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield server, f"http://127.0.0.1:{runner.addresses[0][1]}/v1beta"
    await runner.cleanup()


BLOCKED = response(
    candidate({"text": "I'll explain how to"}, finish="SAFETY", index=0),
    candidate(finish="PROHIBITED_CONTENT", index=1),
    usageMetadata={"promptTokenCount": 5},
)


@pytest.mark.parametrize("stream", [False, True])
async def test_all_candidates_blocked_is_retried_once_with_a_correction_then_the_run_ends_degraded(
    gemini: tuple[GeminiServer, str], stream: bool
) -> None:
    server, base_url = gemini
    answer = [BLOCKED] if stream else BLOCKED
    server.answers = [(200, answer), (200, answer)]
    model = GeminiProvider("gemini-2.5-flash", base_url=base_url, api_key="k", stream=stream)
    events, result = await run_agent(Agent(model, system="Be safe."), "Tell me something.")

    assert [describe(event) for event in events] == [
        "RunStarted",
        "TurnStarted(1)",
        "TurnCompleted(1 rejected)",
        "CallFailed(1 invalid_response -> retry)",
        "TurnStarted(1 attempt=2)",
        "TurnCompleted(1 rejected)",
        "CallFailed(1 invalid_response -> stop)",
        "RunCompleted(invalid_response)",
    ]
    assert (result.stop_reason, result.degraded, result.turns) == ("invalid_response", True, 0)
    assert "content filter" in result.text
    assert result.usage == Usage(input_tokens=10, requests=2)
    assert [m.role for m in result.messages] == ["system", "user"]  # nothing blocked entered the transcript
    first, second = (request["body"]["contents"] for request in server.requests)
    assert first == [{"role": "user", "parts": [{"text": "Tell me something."}]}]
    (retry,) = second  # the correction follows the prompt in the same user content
    prompt, correction = retry["parts"]
    assert (retry["role"], prompt) == ("user", {"text": "Tell me something."})
    assert "blocked by the provider's content filter" in correction["text"]


async def test_a_blocked_answer_then_a_fine_one_completes_the_run(gemini: tuple[GeminiServer, str]) -> None:
    server, base_url = gemini
    server.answers = [(200, BLOCKED), (200, response(candidate({"text": "Here is a safe answer."})))]
    model = GeminiProvider("gemini-2.5-flash", base_url=base_url, api_key="k", stream=False)
    _, result = await run_agent(Agent(model), "Tell me something.")
    assert (result.stop_reason, result.text, result.degraded) == ("complete", "Here is a safe answer.", False)


async def test_the_key_goes_in_the_x_goog_api_key_header_and_never_in_the_url(gemini: tuple[GeminiServer, str]) -> None:
    server, base_url = gemini
    server.answers = [(200, [response(candidate({"text": "hi"}))]), (200, response(candidate({"text": "hi"})))]
    await Agent("gemini:gemini-2.5-flash", base_url=base_url, api_key="secret-123").run("hi")
    await Agent(GeminiProvider("models/gemini-2.5-flash", base_url=base_url, api_key="secret-123", stream=False)).run(
        "hi"
    )
    assert [(r["path"], r["query"], r["key"]) for r in server.requests] == [
        ("/v1beta/models/gemini-2.5-flash:streamGenerateContent", "alt=sse", "secret-123"),
        ("/v1beta/models/gemini-2.5-flash:generateContent", "", "secret-123"),
    ]


async def test_a_tuned_model_is_asked_at_its_own_path(gemini: tuple[GeminiServer, str]) -> None:
    server, base_url = gemini
    server.answers = [(200, response(candidate({"text": "tuned"})))]
    model = GeminiProvider("tunedModels/my-model-123", base_url=base_url, api_key="k", stream=False)
    assert (await Agent(model).run("hi")).text == "tuned"
    assert server.requests[0]["path"] == "/v1beta/tunedModels/my-model-123:generateContent"


async def test_an_invalid_api_key_is_auth_failed_although_gemini_answers_400(gemini: tuple[GeminiServer, str]) -> None:
    server, base_url = gemini
    rejection = {
        "error": {
            "code": 400,
            "message": "API key not valid. Please pass a valid API key.",
            "status": "INVALID_ARGUMENT",
            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}],
        }
    }
    server.answers = [(400, rejection)]
    model = GeminiProvider("gemini-2.5-flash", base_url=base_url, api_key="wrong", retry=RetryPolicy(max_retries=0))
    with pytest.raises(AuthFailed) as caught:
        _ = [event async for event in model.stream(Request((Message.user("hi"),)))]
    assert (caught.value.code, caught.value.status) == ("auth_failed", 400)
    assert caught.value.provider_message == "API key not valid. Please pass a valid API key."


async def test_the_key_is_read_from_gemini_api_key_first_then_google_api_key(
    gemini: tuple[GeminiServer, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    server, base_url = gemini
    server.answers = [(200, [response(candidate({"text": "hi"}))]) for _ in range(2)]
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.setenv("GOOGLE_API_KEY", "google-key")
    agent = Agent("gemini:gemini-2.5-flash", base_url=base_url)
    assert "google-key" not in repr(agent.provider)
    await agent.run("hi")
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-key")
    await Agent("gemini:gemini-2.5-flash", base_url=base_url).run("hi")
    assert [request["key"] for request in server.requests] == ["google-key", "gemini-key"]


def test_the_default_base_url_is_the_v1beta_api() -> None:
    model = resolve("gemini:gemini-2.5-flash", base_url=None, api_key="k")
    assert isinstance(model, GeminiProvider)
    assert (
        repr(model)
        == "GeminiProvider('gemini:gemini-2.5-flash', base_url='https://generativelanguage.googleapis.com/v1beta')"
    )


async def test_a_stream_asking_for_several_candidates_chooses_among_them_before_passing_any_on(
    gemini: tuple[GeminiServer, str],
) -> None:
    server, base_url = gemini
    server.answers = [
        (
            200,
            [
                response(
                    candidate({"text": "Unsafe"}, finish=None, index=0), candidate({"text": "Sa"}, finish=None, index=1)
                ),
                response(candidate(finish="SAFETY", index=0), candidate({"text": "fe."}, index=1)),
            ],
        )
    ]
    model = GeminiProvider("gemini-2.5-flash", base_url=base_url, api_key="k")
    settings = ModelSettings(extra={"generationConfig": {"candidateCount": 2}})
    events = [event async for event in model.stream(Request((Message.user("hi"),), settings=settings))]
    assert texts(events) == "Safe."
    assert end_of(events).finish_reason == "stop"
    assert server.requests[0]["body"]["generationConfig"] == {"candidateCount": 2}


def test_an_extra_generation_config_that_is_not_an_object_is_sent_as_given() -> None:
    """Only an object's ``candidateCount`` says how many candidates are asked for; anything else a setting's
    ``extra`` holds there goes to the server as it is, for the server to judge."""
    model = provider()
    request = Request((Message.user("hi"),), settings=ModelSettings(extra={"generationConfig": "fast"}))
    assert model.stream(request) is not None  # reading the candidates asked for does not fail
    assert json.loads(model.request_payload(request))["generationConfig"] == "fast"
