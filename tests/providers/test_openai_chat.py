"""OpenAI Chat Completions without a server: the request body we build and the decoding of chunks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tether import Agent, Message, tool
from tether.errors import ConfigInvalid, InvalidResponse, ProviderUnavailable, TransportError
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
from tether.messages import ToolCall, ToolResult
from tether.providers import openai_chat
from tether.providers.base import ForceTool, ModelSettings, Request, ToolDefinition
from tether.providers.memo import ToolsMemo
from tether.providers.openai_chat import OpenAIChatProvider, encode_message
from tether.providers.openai_chat_stream import ChatDecoder, parse_usage
from tether.providers.registry import PROFILES, resolve
from tether.usage import Usage

WEATHER = ToolDefinition(
    "weather", "Weather in a city.", {"type": "object", "properties": {"city": {"type": "string"}}}
)


def provider(profile: str = "openai", **options: Any) -> OpenAIChatProvider:
    options.setdefault("api_key", "sk-test")
    options.setdefault("base_url", "http://127.0.0.1:9/v1")
    return OpenAIChatProvider("some-model", profile=PROFILES[profile], **options)


def decode(profile: str, *chunks: dict[str, Any]) -> list[LlmEvent]:
    decoder = ChatDecoder(PROFILES[profile])
    events: list[LlmEvent] = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    return events + decoder.end()


# --- the request body ---------------------------------------------------------------------------------------


def test_body_has_the_system_prompt_first_then_the_conversation() -> None:
    history = (
        Message.user("Weather in Paris?"),
        Message("assistant", (ToolCall("c1", "weather", {"city": "Paris"}, '{"city":"Paris"}'),)),
        Message("tool", (ToolResult("c1", "weather", "sunny"),)),
    )
    body = provider().request_body(Request(history, system="Be brief.", tools=(WEATHER,)))
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": '{"city":"Paris"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {"name": "weather", "description": "Weather in a city.", "parameters": WEATHER.parameters},
        }
    ]
    assert body["tool_choice"] == "auto"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


def test_parallel_results_become_one_tool_message_each_in_order() -> None:
    message = Message("tool", (ToolResult("a", "f", "1"), ToolResult("b", "f", "2", is_error=True)))
    assert encode_message(message) == [
        {"role": "tool", "tool_call_id": "a", "content": "1"},
        {"role": "tool", "tool_call_id": "b", "content": "2"},
    ]


def test_arguments_without_raw_text_are_sent_as_json() -> None:
    (encoded,) = encode_message(Message("assistant", (ToolCall("c", "f", {"x": "é"}),)))
    assert encoded["tool_calls"][0]["function"]["arguments"] == '{"x": "é"}'


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        (ForceTool("weather"), {"type": "function", "function": {"name": "weather"}}),
    ],
)
def test_tool_choice_is_sent_as_the_api_names_it(choice: Any, sent: Any) -> None:
    body = provider().request_body(Request((Message.user("hi"),), tools=(WEATHER,), tool_choice=choice))
    assert body["tool_choice"] == sent


def test_no_tools_means_no_tool_fields() -> None:
    body = provider().request_body(Request((Message.user("hi"),), parallel_tool_calls=False))
    assert "tools" not in body
    assert "tool_choice" not in body
    assert "parallel_tool_calls" not in body


def test_parallel_tool_calls_is_sent_only_where_the_profile_accepts_it() -> None:
    request = Request((Message.user("hi"),), tools=(WEATHER,), parallel_tool_calls=False)
    assert provider().request_body(request)["parallel_tool_calls"] is False
    assert "parallel_tool_calls" not in provider("minimax").request_body(request)


@pytest.mark.parametrize(
    ("profile", "field"),
    [
        ("openai", "max_completion_tokens"),
        ("ollama", "max_tokens"),
        ("vllm", "max_tokens"),
        ("minimax", "max_completion_tokens"),
    ],
)
def test_the_output_limit_goes_in_the_field_the_profile_names(profile: str, field: str) -> None:
    settings = ModelSettings(max_tokens=100, temperature=0.2, top_p=0.9, extra={"seed": 7})
    body = provider(profile).request_body(Request((Message.user("hi"),), settings=settings))
    assert body[field] == 100
    assert {"max_tokens", "max_completion_tokens"} - {field} & set(body) == set()
    assert (body["temperature"], body["top_p"], body["seed"]) == (0.2, 0.9, 7)


def test_stream_options_are_left_out_where_the_profile_refuses_them_and_when_not_streaming() -> None:
    request = Request((Message.user("hi"),))
    assert "stream_options" not in provider("minimax").request_body(request)
    body = provider(stream=False).request_body(request)
    assert body["stream"] is False
    assert "stream_options" not in body


# --- decoding -----------------------------------------------------------------------------------------------


def test_interleaved_calls_are_told_apart_by_index_and_generated_ids_fill_missing_ones() -> None:
    events = decode(
        "openai",
        {"id": "r1", "model": "gpt-x", "choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "a", "function": {"name": "f", "arguments": ""}},
            {"index": 1, "id": "", "function": {"name": "g", "arguments": '{"y"'}},
        ]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"x": 1}'}}]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "function": {"arguments": ": 2}"}}]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    )  # fmt: skip
    generated = events[2]
    assert isinstance(generated, ToolCallStart)
    assert generated.id.startswith("call_")
    assert events == [
        StreamStart("gpt-x", "r1"),
        ToolCallStart("a", "f", 0),
        ToolCallStart(generated.id, "g", 1),
        ToolCallDelta(generated.id, '{"y"'),
        ToolCallDelta("a", '{"x": 1}'),
        ToolCallDelta(generated.id, ": 2}"),
        ToolCallEnd("a"),
        ToolCallEnd(generated.id),
        StreamEnd("tool_calls", Usage()),
    ]


@pytest.mark.parametrize(("profile", "field"), [("deepseek", "reasoning_content"), ("ollama", "reasoning")])
def test_reasoning_fields_become_thinking(profile: str, field: str) -> None:
    events = decode(
        profile,
        {"choices": [{"delta": {field: "hmm"}}]},
        {"choices": [{"delta": {"content": "42"}, "finish_reason": "stop"}]},
    )
    assert [e for e in events if isinstance(e, ThinkingDelta | TextDelta)] == [ThinkingDelta("hmm"), TextDelta("42")]


def test_a_refusal_is_text_marked_as_a_refusal() -> None:
    events = decode("openai", {"choices": [{"delta": {"refusal": "I can't help with that."}, "finish_reason": "stop"}]})
    assert TextDelta("I can't help with that.", provider_data={"refusal": True}) in events


@pytest.mark.parametrize(
    ("finish", "mapped"),
    [
        ("stop", "stop"),
        ("length", "length"),
        ("tool_calls", "tool_calls"),
        ("function_call", "tool_calls"),
        ("content_filter", "content_filter"),
        ("eos", "other"),
    ],
)
def test_finish_reasons_are_normalized(finish: str, mapped: str) -> None:
    events = decode("openai", {"choices": [{"delta": {"content": "x"}, "finish_reason": finish}]})
    end = events[-1]
    assert isinstance(end, StreamEnd)
    assert end.finish_reason == mapped


def test_usage_counts_cached_prompt_tokens_apart() -> None:
    openai = {
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "prompt_tokens_details": {"cached_tokens": 60},
        "completion_tokens_details": {"reasoning_tokens": 5},
    }
    assert parse_usage(openai) == Usage(input_tokens=40, output_tokens=20, cache_read_tokens=60, reasoning_tokens=5)
    deepseek = {
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "prompt_cache_hit_tokens": 30,
        "prompt_cache_miss_tokens": 70,
    }
    assert parse_usage(deepseek) == Usage(input_tokens=70, output_tokens=20, cache_read_tokens=30)


def test_the_usage_only_chunk_after_the_finish_is_read() -> None:
    events = decode(
        "openai",
        {"choices": [{"delta": {"content": "hi"}, "finish_reason": "stop"}]},
        {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}},
    )
    assert events[-1] == StreamEnd("stop", Usage(input_tokens=3, output_tokens=1))


def test_a_whole_completion_decodes_to_the_same_events_as_a_stream() -> None:
    calls = [
        {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}},
    ]
    message = {"role": "assistant", "content": "Let me look.", "tool_calls": calls}
    completion = {
        "id": "r",
        "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 6},
    }
    events = ChatDecoder(PROFILES["openai"]).whole(completion)
    assert events == [
        StreamStart("m", "r"),
        TextDelta("Let me look."),
        ToolCallStart("c1", "f", 0),
        ToolCallDelta("c1", "{}"),
        ToolCallStart("c2", "g", 1),
        ToolCallDelta("c2", "{}"),
        ToolCallEnd("c1"),
        ToolCallEnd("c2"),
        StreamEnd("tool_calls", Usage(input_tokens=5, output_tokens=6)),
    ]


def test_a_stream_that_stops_before_its_finish_reason_is_a_transport_error() -> None:
    decoder = ChatDecoder(PROFILES["openai"])
    decoder.feed({"choices": [{"delta": {"content": "half an ans"}}]})
    with pytest.raises(TransportError, match="before finishing"):
        decoder.end()


def test_an_error_object_in_the_stream_is_raised_with_its_code() -> None:
    decoder = ChatDecoder(PROFILES["openai"])
    with pytest.raises(ProviderUnavailable):
        decoder.feed({"error": {"message": "The server had an error", "type": "server_error"}})


def test_a_chunk_that_is_not_an_object_is_an_invalid_response() -> None:
    with pytest.raises(InvalidResponse):
        ChatDecoder(PROFILES["openai"]).feed([1, 2])


# --- profiles and model strings -----------------------------------------------------------------------------


def test_a_hosted_profile_without_a_key_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigInvalid, match="OPENAI_API_KEY"):
        Agent("openai:gpt-4o-mini")


def test_the_key_is_read_from_the_profiles_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-from-env")
    model = resolve("deepseek:deepseek-chat")
    assert model.info.model_string == "deepseek:deepseek-chat"
    assert "sk-from-env" not in repr(model)


@pytest.mark.parametrize("prefix", ["ollama", "vllm", "llamacpp"])
def test_local_servers_need_no_key(prefix: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for profile in PROFILES.values():
        for name in profile.key_variables:
            monkeypatch.delenv(name, raising=False)
    model = resolve(f"{prefix}:some-model")
    assert model.info.provider == prefix


def test_openai_compatible_needs_a_base_url() -> None:
    with pytest.raises(ConfigInvalid, match="needs a base_url"):
        Agent("openai-compatible:my-model")
    assert Agent("openai-compatible:my-model", base_url="http://127.0.0.1:9/v1").provider.info.name == "my-model"


def test_a_model_that_cannot_call_tools_is_refused_at_start_with_tools() -> None:
    @tool
    def noop() -> str:
        """Nothing."""
        return ""

    with pytest.raises(ConfigInvalid, match="cannot call tools"):
        Agent("openai:o1-mini", api_key="sk-test", tools=[noop], tool_mode="native")


def test_base_url_and_api_key_are_refused_for_a_provider_instance() -> None:
    from tether.providers.scripted import ScriptedProvider

    with pytest.raises(ConfigInvalid, match="only apply to a model string"):
        Agent(ScriptedProvider([]), base_url="http://x")


def test_the_tools_off_summary_call_keeps_tool_choice_none_over_an_extra_default() -> None:
    settings = ModelSettings(extra={"tool_choice": "required"})
    normal = provider().request_body(Request((Message.user("hi"),), tools=(WEATHER,), settings=settings))
    final = provider().request_body(
        Request((Message.user("hi"),), tools=(WEATHER,), tool_choice="none", settings=settings)
    )
    assert normal["tool_choice"] == "required"
    assert final["tool_choice"] == "none"


def test_the_payload_sent_is_the_body_and_each_message_is_encoded_once(monkeypatch: pytest.MonkeyPatch) -> None:
    history = (
        Message.user("Weather in Paris? Ünïcode ✓"),
        Message("assistant", (ToolCall("c1", "weather", {"city": "Paris"}, '{"city":"Paris"}'),)),
        Message("tool", (ToolResult("c1", "weather", "sunny"),)),
    )
    model = provider()
    request = Request(history, system="Be brief.", tools=(WEATHER,), settings=ModelSettings(max_tokens=5))
    assert json.loads(model.request_payload(request)) == model.request_body(request)
    encoded: list[Message] = []
    original = openai_chat.encode_message

    def counting(message: Message, origin: str = "") -> list[dict[str, Any]]:
        encoded.append(message)
        return original(message, origin)

    monkeypatch.setattr(openai_chat, "encode_message", counting)
    model.request_payload(request)
    model.request_payload(Request((*history, Message.user("And Rome?")), tools=(WEATHER,)))
    assert encoded == [Message.user("And Rome?")], "messages already sent are not encoded again"


def test_every_request_is_sent_with_the_tools_and_settings_it_asks_for() -> None:
    """Every turn of a run sends the same tools and settings; a request with other tools, another choice or other
    settings, or settings whose ``extra`` fields were changed in place, is sent as it is now, never as the one
    before."""
    model = provider()
    settings = ModelSettings(max_tokens=5)
    tools = (WEATHER,)
    history: tuple[Message, ...] = (Message.user("hi"),)
    for turn in range(3):
        request = Request(history, system="Be brief.", tools=tools, settings=settings)
        assert json.loads(model.request_payload(request)) == model.request_body(request)
        history += (Message.user(f"and {turn}?"),)
    extra = ModelSettings(extra={"seed": 1})
    changed = [
        Request(history, tools=tools, settings=settings, tool_choice="none"),
        Request(history, tools=tools, settings=settings, tool_choice="required"),
        Request(history, tools=(WEATHER,), settings=settings, parallel_tool_calls=False),
        Request(history, tools=(), settings=settings),
        Request(history, tools=tools, settings=ModelSettings(max_tokens=9)),
        Request(history, tools=tools, settings=extra),
        Request(history, system="Be long.", tools=tools, settings=settings),
    ]
    for request in changed:
        assert json.loads(model.request_payload(request)) == model.request_body(request)
    extra.extra["seed"] = 2
    request = Request(history, tools=tools, settings=extra)
    assert json.loads(model.request_payload(request))["seed"] == 2
    empty = ModelSettings()
    model.request_payload(Request(history, tools=tools, settings=empty))
    empty.extra["top_k"] = 3
    assert json.loads(model.request_payload(Request(history, tools=tools, settings=empty)))["top_k"] == 3


def test_each_tool_is_encoded_once_across_requests_and_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run makes its definitions afresh, around the tool's own schema: the tool's JSON is reused; a tool
    with another schema, name or description is encoded anew; the body is the same JSON as ``request_body``."""
    encoded: list[str] = []

    def counting(tool: ToolDefinition) -> dict[str, Any]:
        encoded.append(tool.name)
        return openai_chat._tool_item(tool)

    monkeypatch.setattr(openai_chat, "_TOOLS", ToolsMemo(counting))
    model = provider()
    clock = ToolDefinition("clock", "The time.", {"type": "object", "properties": {}})
    sent: list[str] = []
    for tools in [(WEATHER, clock), (ToolDefinition(WEATHER.name, WEATHER.description, WEATHER.parameters), clock)]:
        request = Request((Message.user("hi"),), tools=tools, settings=ModelSettings(extra={"seed": 1}))
        payload = model.request_payload(request)
        sent += encoded
        assert json.loads(payload) == model.request_body(request)
        encoded.clear()
    assert sent == ["weather", "clock"], "the second run's definitions reuse the first's JSON"
    model.request_payload(Request((Message.user("hi"),), tools=(WEATHER, clock)))
    assert encoded == [], "tools already sent are not encoded again"
    renamed = ToolDefinition("forecast", WEATHER.description, WEATHER.parameters)
    request = Request((Message.user("hi"),), tools=(renamed,))
    assert json.loads(model.request_payload(request))["tools"][0]["function"]["name"] == "forecast"
    assert encoded == ["forecast"]


def test_tools_replaced_or_withdrawn_by_settings_are_not_sent() -> None:
    model = provider()
    replaced = Request((Message.user("hi"),), tools=(WEATHER,), settings=ModelSettings(extra={"tools": []}))
    assert json.loads(model.request_payload(replaced)) == model.request_body(replaced)
    assert json.loads(model.request_payload(replaced))["tools"] == []
    withdrawn = Request((Message.user("hi"),), tools=(WEATHER,), tool_choice="none")
    assert json.loads(model.request_payload(withdrawn)) == model.request_body(withdrawn)


def test_a_json_schema_is_sent_as_response_format_where_the_profile_can_use_it() -> None:
    schema = {"anyOf": [{"type": "object", "properties": {"type": {"const": "final"}}}]}
    request = Request((Message.user("hi"),), json_schema=schema)
    body = provider("vllm").request_body(request)
    assert body["response_format"] == {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
    assert provider("vllm").info.supports_json_schema
    assert "response_format" not in provider("minimax").request_body(request)
    assert not provider("minimax").info.supports_json_schema
