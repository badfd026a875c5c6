"""Recorded Anthropic Messages traffic, replayed over loopback HTTP through our provider and our Agent.

Every cassette of ``tests/fixtures/wire/anthropic/`` (real answers of Claude, recorded by pydantic-ai) is served
by ``tests/wire/replay.py``. Two kinds of tests:

* generic tests replay every recorded request of every cassette through ``AnthropicProvider`` and check the
  events against a plain reading of the recorded answer (:func:`recorded_turn`, below) and the body we send
  against the recorded one (:func:`essentials`); again with streams cut into 1-byte reads, and with whole
  answers sent to requests that asked for a stream;
* one test (or more) per cassette pins the behaviour the recording exists for, with a compact snapshot of the
  events and of the ``RunResult``: conversations with tool calls run through ``Agent`` with real tools.

The replay server answers with the recording whatever we send, so every test also asserts what we sent.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.wire import replay as wire
from tests.wire.events import collect, compact, parts_of, run_agent, shape, streamed
from tests.wire.replay import (
    Cassette,
    Interaction,
    Replayer,
    ReplayServer,
    cassette_files,
    recorded_request_bodies,
    streamed_cassettes,
    whole_cassettes,
)
from tether import Agent
from tether.errors import BadRequest, ProviderError, ProviderUnavailable
from tether.events import StreamStart, ThinkingDelta
from tether.messages import Message, Part, Text, Thinking, ToolCall, ToolResult
from tether.providers.anthropic import AnthropicProvider
from tether.providers.base import ForceTool, ModelSettings, Request, ToolChoice, ToolDefinition
from tether.providers.http import RetryPolicy
from tether.tools.base import tool
from tether.usage import Usage

replay = wire.replay
"""The replay fixture (assigned, not imported, so that ruff does not read the test parameters as redefinitions)."""

CASSETTES = cassette_files("anthropic")
NO_RETRY = RetryPolicy(max_retries=0)
"""Each request is answered once: a retry would take the next recorded interaction."""
RETRY_AT_ONCE = RetryPolicy(max_retries=2, base_delay=0.0, max_delay=0.0)
"""Retries without waiting, to show which failures are not retried."""
OURS = {"origin": "anthropic"}


def provider(server: ReplayServer, *, stream: bool, retry: RetryPolicy = NO_RETRY, **options: Any) -> AnthropicProvider:
    """``AnthropicProvider`` for the cassette's model, pointed at the replay server."""
    model = server.cassette.interactions[0].request_body["model"]
    return AnthropicProvider(
        model,
        base_url=server.base_url,
        api_key="test-key",
        stream=stream,
        retry=retry,
        **{"prompt_cache": "off", **options},
    )


# --- the recordings read plainly (test oracles independent of the provider's decoder) ------------------------

RECORDED_FINISH = {"end_turn": "stop", "tool_use": "tool_calls", "max_tokens": "length"}


def recorded_message(interaction: Interaction) -> dict[str, Any]:
    """The recorded answer as one whole message, a stream's events folded by hand."""
    if not interaction.is_event_stream:
        message: dict[str, Any] = interaction.response_json()
        return message
    events = [json.loads(data) for data in interaction.events_data()]
    message = dict(events[0]["message"])
    blocks: dict[int, dict[str, Any]] = {}
    for event in events[1:]:
        if event["type"] == "content_block_start":
            blocks[event["index"]] = dict(event["content_block"], json="")
        elif event["type"] == "content_block_delta":
            block, delta = blocks[event["index"]], event["delta"]
            for key, field in (("text", "text"), ("thinking", "thinking"), ("signature", "signature")):
                if field in delta:
                    block[key] = block.get(key, "") + delta[field]
            block["json"] += delta.get("partial_json", "")
        elif event["type"] == "message_delta":
            message["stop_reason"] = event["delta"]["stop_reason"]
            message["usage"] = {**message["usage"], **event["usage"]}
    message["content"] = []
    for _, block in sorted(blocks.items()):
        raw = block.pop("json")
        if raw:
            block["input"] = json.loads(raw)
        message["content"].append(block)
    return message


def recorded_turn(interaction: Interaction) -> dict[str, Any]:
    """What a recorded answer says: model, text, thinking, client tool calls, finish and usage."""
    message = recorded_message(interaction)
    content = message["content"]
    usage = message["usage"]
    return {
        "model": message["model"],
        "text": "".join(b["text"] for b in content if b["type"] == "text"),
        "thinking": "".join(b["thinking"] for b in content if b["type"] == "thinking"),
        "signatures": [b["signature"] for b in content if b["type"] == "thinking"],
        "calls": [(b["id"], b["name"], b["input"]) for b in content if b["type"] == "tool_use"],
        "finish": RECORDED_FINISH[message["stop_reason"]],
        "usage": Usage(
            input_tokens=usage["input_tokens"],
            output_tokens=usage["output_tokens"],
            cache_read_tokens=usage.get("cache_read_input_tokens") or 0,
            cache_write_tokens=usage.get("cache_creation_input_tokens") or 0,
        ),
    }


def our_turn(events: list[Any]) -> dict[str, Any]:
    """Our events in the terms of :func:`recorded_turn` (the provider contract checked on the way)."""
    got = streamed(events)
    return {
        "model": got.model,
        "text": got.text,
        "thinking": got.thinking,
        "signatures": [e.signature for e in events if isinstance(e, ThinkingDelta) and e.signature is not None],
        "calls": [(call.id, call.name, json.loads(call.arguments)) for call in got.calls],
        "finish": got.finish,
        "usage": got.usage,
    }


PLAIN_TOOL_KEYS = {"name", "description", "input_schema", "strict"}
BODY_FIELDS = {"model", "max_tokens", "messages", "system", "stream", "tools", "tool_choice"}


def request_from(body: dict[str, Any]) -> Request:
    """The ``Request`` that a recorded request body encodes (the recorded conversation, as tether messages).

    Body fields tether has no setting for (``thinking``, ``output_config``) go in ``ModelSettings.extra``, and
    so do tools with options tether does not model (``defer_loading``, server tools): the whole list.
    """
    messages: list[Message] = []
    for entry in body["messages"]:
        if entry["role"] == "user":
            messages += user_messages(entry["content"])
        else:
            messages.append(assistant_message(entry["content"]))
    tools = body.get("tools") or []
    extra = {key: value for key, value in body.items() if key not in BODY_FIELDS}
    if any(set(t) - PLAIN_TOOL_KEYS for t in tools):
        extra["tools"] = tools
    definitions = tuple(
        ToolDefinition(t["name"], t["description"], t["input_schema"]) for t in tools if "input_schema" in t
    )
    return Request(
        tuple(messages),
        system=body.get("system"),
        tools=definitions,
        tool_choice=tool_choice_from(body.get("tool_choice") or {"type": "auto"}),
        settings=ModelSettings(max_tokens=body["max_tokens"], extra=extra),
    )


def user_messages(content: list[dict[str, Any]]) -> list[Message]:
    results = [
        ToolResult(b["tool_use_id"], "", result_text(b.get("content")), b.get("is_error", False))
        for b in content
        if b["type"] == "tool_result"
    ]
    texts = [Text(b["text"]) for b in content if b["type"] == "text"]
    return ([Message("tool", tuple(results))] if results else []) + ([Message("user", tuple(texts))] if texts else [])


def assistant_message(content: list[dict[str, Any]]) -> Message:
    """Parts in order; server blocks kept with their place (parts and characters of text before them)."""
    parts: list[Part] = []
    server: list[dict[str, Any]] = []
    chars = 0
    for block in content:
        kind = block["type"]
        if kind == "text":
            parts.append(Text(block["text"]))
            chars += len(block["text"])
        elif kind == "thinking":
            parts.append(Thinking(block["thinking"], block["signature"], OURS))
        elif kind == "redacted_thinking":
            parts.append(Thinking("", block["data"], {"origin": "anthropic", "redacted": True}))
        elif kind == "tool_use":
            parts.append(ToolCall(block["id"], block["name"], block["input"], json.dumps(block["input"])))
        else:
            placed = sum(1 for part in parts if not isinstance(part, Text))
            server.append({"anchor": [placed, chars], "block": block})
    return Message("assistant", tuple(parts), {"origin": "anthropic", "server_blocks": server} if server else None)


def tool_choice_from(choice: dict[str, Any]) -> ToolChoice:
    if choice["type"] == "tool":
        return ForceTool(choice["name"])
    named: dict[str, ToolChoice] = {"auto": "auto", "none": "none", "any": "required"}
    return named[choice["type"]]


def result_text(content: Any) -> str:
    """A tool result's content as text: a string, or a list of text blocks joined."""
    if isinstance(content, list):
        return "".join(block["text"] for block in content)
    return content or ""


def essentials(body: dict[str, Any]) -> dict[str, Any]:
    """The fields of a request body that must match the recording.

    Left out or normalized on purpose, where our encoding legitimately differs from pydantic-ai's: a tool's
    ``strict`` (pydantic-ai sets it on schemas it finds strict-compatible; tether never does), and a tool
    result's content (pydantic-ai sends some as a list of text blocks; tether sends text, the same to the API).
    """
    messages = [
        {
            "role": m["role"],
            "content": [
                {**b, "content": result_text(b.get("content"))} if b["type"] == "tool_result" else b
                for b in m["content"]
            ],
        }
        for m in body["messages"]
    ]
    tools = [{k: v for k, v in t.items() if k != "strict"} for t in body.get("tools") or []]
    rest = {key: body.get(key) for key in ("model", "max_tokens", "system", "stream", "tool_choice")}
    extra = {key: value for key, value in body.items() if key not in BODY_FIELDS}
    return {**rest, **extra, "tools": tools, "messages": messages}


# --- every cassette, every interaction ------------------------------------------------------------------------


def test_the_replay_tests_cover_exactly_the_copied_cassettes() -> None:
    """A cassette added to the folder must get a dedicated test here (the generic ones run on it already)."""
    assert set(CASSETTES) == DEDICATED


@pytest.mark.parametrize("name", CASSETTES)
async def test_every_recorded_answer_decodes_as_recorded_and_every_request_is_encoded_as_recorded(
    replay: Replayer, name: str
) -> None:
    server = await replay.serve(name)
    for index, interaction in enumerate(server.cassette.interactions):
        recorded = interaction.request_body
        model = provider(server, stream=recorded["stream"])
        if interaction.status >= 400:
            with pytest.raises(BadRequest) as caught:
                await collect(model, request_from(recorded))
            error, envelope = caught.value, interaction.response_json()
            assert (error.code, error.status) == ("bad_request", interaction.status)
            assert error.provider_message == envelope["error"]["message"]
            assert error.request_id == envelope["request_id"]
        else:
            assert our_turn(await collect(model, request_from(recorded))) == recorded_turn(interaction)
        sent = server.requests[index]
        assert essentials(sent.body) == essentials(recorded)
        assert (sent.path, sent.headers["x-api-key"], sent.headers["anthropic-version"]) == (
            "/v1/messages",
            "test-key",
            "2023-06-01",
        )
        assert "authorization" not in sent.headers
    server.assert_all_served()


STREAMED = streamed_cassettes(CASSETTES)
WHOLE = whole_cassettes(CASSETTES)


@pytest.mark.parametrize("name", STREAMED)
async def test_a_recorded_stream_sent_one_byte_at_a_time_decodes_the_same(replay: Replayer, name: str) -> None:
    server = await replay.serve(name, chunk_size=1)
    for interaction in server.cassette.interactions:
        events = await collect(provider(server, stream=True), request_from(interaction.request_body))
        assert our_turn(events) == recorded_turn(interaction)
    server.assert_all_served()


@pytest.mark.parametrize("name", WHOLE)
async def test_a_whole_answer_to_a_streamed_request_is_read_whole(replay: Replayer, name: str) -> None:
    """A server that ignores ``stream: true`` and answers with one JSON message (the recorded ones) is read the
    same as when we asked for a whole answer."""
    server = await replay.serve(name)
    for interaction in server.cassette.interactions:
        events = await collect(provider(server, stream=True), request_from(interaction.request_body))
        assert our_turn(events) == recorded_turn(interaction)
    assert all(body["stream"] is True for body in server.bodies)
    server.assert_all_served()


# --- text --------------------------------------------------------------------------------------------------------


async def test_a_whole_text_answer_with_the_system_prompt_as_the_top_level_field(replay: Replayer) -> None:
    server = await replay.serve("anthropic/test_anthropic_model_instructions.yaml")
    (recorded,) = recorded_request_bodies(server.cassette)
    agent = Agent(provider(server, stream=False), system=recorded["system"])
    events, result = await run_agent(agent, "What is the capital of France?")

    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "Text('The capital of France is Paris.')",
        "TurnCompleted(1)",
        "RunCompleted(complete)",
    ]
    assert (result.text, result.stop_reason, result.turns) == ("The capital of France is Paris.", "complete", 1)
    assert result.usage == Usage(input_tokens=20, output_tokens=10, requests=1)
    # The default max_tokens (4096) is what pydantic-ai sent: the whole body is the recorded one.
    assert server.bodies == [recorded]
    assert recorded["system"] == "You are a helpful assistant.\n\n"


async def test_a_streamed_text_answer_ignores_pings_and_reads_usage_from_message_delta(replay: Replayer) -> None:
    server = await replay.serve("anthropic/test_request_stream_fallback_for_high_max_tokens.yaml")
    (recorded,) = recorded_request_bodies(server.cassette)
    events = await collect(
        provider(server, stream=True),
        Request(
            (Message.user(recorded["messages"][0]["content"][0]["text"]),), settings=ModelSettings(max_tokens=32000)
        ),
    )
    assert shape(events) == "start text end"  # the ping between the block's start and its delta gives nothing
    assert events[0] == StreamStart("claude-sonnet-4-5-20250929", "msg_018E1hg8GoVTGEKQY3ovMcSJ")
    got = streamed(events)
    assert (got.text, got.finish, got.usage) == ("2", "stop", Usage(input_tokens=20, output_tokens=5))
    assert server.bodies == [recorded]

    server = await replay.serve("anthropic/test_request_stream_fallback_for_high_max_tokens.yaml")
    agent = Agent(provider(server, stream=True), settings=ModelSettings(max_tokens=32000))
    run_events, result = await run_agent(agent, "What is 1+1? Answer with just the number.")
    assert compact(run_events) == [
        "RunStarted",
        "TurnStarted(1)",
        "Text('2')",
        "TurnCompleted(1)",
        "RunCompleted(complete)",
    ]
    assert result.usage == Usage(input_tokens=20, output_tokens=5, requests=1)
    assert server.bodies == [recorded]


# --- tools -------------------------------------------------------------------------------------------------------


async def test_two_tool_round_trips_send_each_result_back_as_a_user_tool_result(replay: Replayer) -> None:
    server = await replay.serve("anthropic/test_anthropic_mixed_strict_tool_run.yaml")
    recorded = recorded_request_bodies(server.cassette)

    @tool
    def country_source() -> str:
        return "Japan"

    @tool
    def capital_lookup(country: str) -> str:
        return {"Japan": "Tokyo"}[country]

    agent = Agent(provider(server, stream=False), tools=[country_source, capital_lookup], system=recorded[0]["system"])
    events, result = await run_agent(agent, recorded[0]["messages"][0]["content"][0]["text"])

    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        'Text("I\'ll help you find the capital city using the available tools.")',
        "TurnCompleted(1)",
        "ToolCall(country_source)",
        "ToolResult(country_source -> Japan)",
        "TurnStarted(2)",
        "TurnCompleted(2)",
        "ToolCall(capital_lookup)",
        "ToolResult(capital_lookup -> Tokyo)",
        "TurnStarted(3)",
        "Text('Capital: Tokyo')",
        "TurnCompleted(3)",
        "RunCompleted(complete)",
    ]
    assert (result.text, result.stop_reason, result.turns) == ("Capital: Tokyo", "complete", 3)
    assert parts_of(result.messages[2]) == [
        'Text("I\'ll help you find the capital city usin")',
        "ToolCall(toolu_01Ttepb9joVoQFHP568v7UAL, country_source, {})",
    ]
    assert result.usage == Usage(input_tokens=628 + 691 + 757, output_tokens=50 + 53 + 6, requests=3)
    # Every request matches the recording (the system prompt on each, the tools, every result as a
    # tool_result with is_error false); pydantic-ai marked one tool strict, which tether does not.
    for sent, expected in zip(server.bodies, recorded, strict=True):
        assert essentials(sent) == essentials(expected)
    assert server.bodies[2]["messages"][-1] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_011j5uC2Tg3TZJo3nmLtJ8Mm",
                "content": "Tokyo",
                "is_error": False,
            }
        ],
    }
    server.assert_all_served()


FAMILY = {
    "Alice": "alice is bob's wife",
    "Bob": "bob is alice's husband",
    "Charlie": "charlie is alice's son",
    "Daisy": "daisy is bob's daughter and charlie's younger sister",
}


async def test_four_parallel_tool_uses_run_in_order_and_their_results_go_back_in_one_user_message(
    replay: Replayer,
) -> None:
    server = await replay.serve("anthropic/test_multiple_parallel_tool_calls.yaml")
    recorded = recorded_request_bodies(server.cassette)
    asked: list[str] = []

    @tool
    def retrieve_entity_info(name: str) -> str:
        """Get the knowledge about the given entity."""
        asked.append(name)
        return FAMILY[name]

    agent = Agent(provider(server, stream=False), tools=[retrieve_entity_info], system=recorded[0]["system"])
    events, result = await run_agent(agent, "Alice, Bob, Charlie and Daisy are a family. Who is the youngest?")

    lines = compact(events)
    assert lines[3:13] == [
        "TurnCompleted(1)",
        "ToolCall(retrieve_entity_info)",
        f"ToolResult(retrieve_entity_info -> {FAMILY['Alice']})",
        "ToolCall(retrieve_entity_info)",
        f"ToolResult(retrieve_entity_info -> {FAMILY['Bob']})",
        "ToolCall(retrieve_entity_info)",
        f"ToolResult(retrieve_entity_info -> {FAMILY['Charlie']})",
        "ToolCall(retrieve_entity_info)",
        f"ToolResult(retrieve_entity_info -> {FAMILY['Daisy']})",
        "TurnStarted(2)",
    ]
    assert lines[-2:] == ["TurnCompleted(2)", "RunCompleted(complete)"]
    assert asked == ["Alice", "Bob", "Charlie", "Daisy"]
    assert result.text.endswith("which indicates she is the youngest among the four family members.")
    assert [c.id for c in result.messages[2].tool_calls] == [
        "toolu_0167cfEnoQaPviGdVXA95zcu",
        "toolu_01EEe2V5HD1Ac4rKiUR4HD2T",
        "toolu_01XFyAjstT3966qvRynZyVPo",
        "toolu_013mnQZbgtK2oe3Mo3XKJsx3",
    ]
    assert result.usage == Usage(input_tokens=423 + 771, output_tokens=202 + 77, requests=2)
    # The second request is the recorded one: the four tool_use blocks, then ONE user message of the four
    # tool_result blocks in the model's order.
    assert server.bodies == recorded
    server.assert_all_served()


EXCHANGE_RATE = "1 USD = 0.92 EUR"


async def test_server_tool_search_blocks_are_not_run_and_go_back_in_place_with_the_client_tool_use(
    replay: Replayer,
) -> None:
    server = await replay.serve("anthropic/test_anthropic_native_tool_search_streaming.yaml", chunk_size=64)
    recorded = recorded_request_bodies(server.cassette)
    called: list[tuple[str, str]] = []

    @tool
    def get_exchange_rate(from_currency: str, to_currency: str) -> str:
        """Look up the current exchange rate between two currencies."""
        called.append((from_currency, to_currency))
        return EXCHANGE_RATE

    @tool
    def stock_lookup(symbol: str) -> str:
        """Look up stock price by ticker symbol."""
        raise AssertionError("never called")

    # Deferred loading and the server's tool search are Anthropic options: the recorded tools list, sent whole.
    settings = ModelSettings(extra={"tools": recorded[0]["tools"]})
    agent = Agent(provider(server, stream=True), tools=[get_exchange_rate, stock_lookup], settings=settings)
    events, result = await run_agent(agent, "What is the current USD to EUR exchange rate?")

    answer = (
        "The current exchange rate is **1 USD = 0.92 EUR**. This means that for every US Dollar, you get "
        "approximately **92 Euro cents**. Keep in mind that exchange rates fluctuate constantly, so this rate "
        "may change throughout the day."
    )
    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "Text*4('Let me search for a tool that can provide current exchange rate information."
        "I found the right tool! Let me fetch the current USD to EUR exchange rate for you.')",
        "TurnCompleted(1)",
        "ToolCall(get_exchange_rate)",
        f"ToolResult(get_exchange_rate -> {EXCHANGE_RATE})",
        "TurnStarted(2)",
        f"Text*4({answer!r})",
        "TurnCompleted(2)",
        "RunCompleted(complete)",
    ]
    assert called == [("USD", "EUR")]
    first = result.messages[1]
    assert parts_of(first) == [
        "Text('Let me search for a tool that can provid')",
        "ToolCall(toolu_01EFn5wTNBYA8Reni8rbmnHT, get_exchange_rate, {'from_currency': 'USD', 'to_currency': 'EUR'})",
    ]
    assert first.provider_data is not None
    assert [entry["block"]["type"] for entry in first.provider_data["server_blocks"]] == [
        "server_tool_use",
        "tool_search_tool_result",
    ]
    assert result.usage == Usage(input_tokens=1591 + 1007, output_tokens=175 + 59, requests=2)
    # The second request sends the first answer back block for block as it came: text, the server's search
    # and its result (input assembled from the stream), text again, then the client tool_use.
    assert server.bodies[1]["messages"][1] == recorded[1]["messages"][1]
    for sent, expected in zip(server.bodies, recorded, strict=True):
        assert essentials(sent) == essentials(expected)
    server.assert_all_served()


# --- thinking ---------------------------------------------------------------------------------------------------


async def test_whole_thinking_is_kept_with_its_signature_and_sent_back_unchanged_on_the_next_turn(
    replay: Replayer,
) -> None:
    server = await replay.serve("anthropic/test_anthropic_model_thinking_part.yaml")
    recorded = recorded_request_bodies(server.cassette)
    first_answer = server.cassette.interactions[0].response_json()["content"]
    agent = Agent(provider(server, stream=False), settings=ModelSettings(extra={"thinking": recorded[0]["thinking"]}))

    events, first = await run_agent(agent, "How do I cross the street?")
    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "ThinkingStarted",
        f"Thinking({first_answer[0]['thinking']!r})",
        "ThinkingEnded",  # the signature closes the block
        f"Text({first_answer[1]['text']!r})",
        "TurnCompleted(1)",
        "RunCompleted(complete)",
    ]
    thinking = first.messages[-1].parts[0]
    assert thinking == Thinking(first_answer[0]["thinking"], first_answer[0]["signature"], OURS)

    follow_up = recorded[1]["messages"][2]["content"][0]["text"]
    events, second = await run_agent(agent, follow_up, history=first.messages)
    assert compact(events)[2] == "ThinkingStarted"
    assert compact(events)[3].startswith("Thinking('This is an interesting analogy question.")
    assert second.text.startswith("# How to Cross a River (Using the Street-Crossing Analogy)")
    assert second.usage == Usage(input_tokens=354, output_tokens=525, requests=1)
    # Both requests are the recorded ones: the second replays the thinking block, signature byte for byte.
    assert server.bodies == recorded
    assert server.bodies[1]["messages"][1]["content"][0]["signature"] == first_answer[0]["signature"]
    server.assert_all_served()


async def test_streamed_thinking_deltas_then_the_signature_then_text(replay: Replayer) -> None:
    server = await replay.serve("anthropic/test_anthropic_model_thinking_part_stream.yaml", chunk_size=100)
    (recorded,) = recorded_request_bodies(server.cassette)
    expected = recorded_turn(server.cassette.interactions[0])
    agent = Agent(provider(server, stream=True), settings=ModelSettings(extra={"thinking": recorded["thinking"]}))
    events, result = await run_agent(agent, "How do I cross the street?")

    lines = compact(events)
    # 13 pieces of reasoning reach the host between the block's marks; the signature closes the block (an empty
    # delta, not shown: its ThinkingEnded is).
    assert lines[2:5] == ["ThinkingStarted", f"Thinking*13({expected['thinking']!r})", "ThinkingEnded"]
    assert lines[5].startswith("Text*")
    assert lines[6:] == ["TurnCompleted(1)", "RunCompleted(complete)"]
    assert expected["thinking"].startswith("This is a straightforward question about pedestrian safety.")
    thinking, text = result.messages[-1].parts
    assert thinking == Thinking(expected["thinking"], expected["signatures"][0], OURS)
    assert text == Text(expected["text"])
    assert result.usage == Usage(input_tokens=43, output_tokens=282, requests=1)
    assert server.bodies == [recorded]


async def test_thinking_before_a_tool_use_is_sent_back_with_the_tool_result(replay: Replayer) -> None:
    server = await replay.serve("anthropic/test_anthropic_tool_with_thinking.yaml")
    recorded = recorded_request_bodies(server.cassette)
    first_answer = server.cassette.interactions[0].response_json()["content"]

    @tool
    def get_user_country() -> str:
        return "Mexico"

    settings = ModelSettings(extra={"thinking": recorded[0]["thinking"]})
    agent = Agent(provider(server, stream=False), tools=[get_user_country], settings=settings)
    events, result = await run_agent(agent, "What is the largest city in the user country?")

    lines = compact(events)
    assert lines[:2] == ["RunStarted", "TurnStarted(1)"]
    assert lines[2:5] == ["ThinkingStarted", f"Thinking({first_answer[0]['thinking']!r})", "ThinkingEnded"]
    assert lines[5:11] == [
        f"Text({first_answer[1]['text']!r})",
        "TurnCompleted(1)",
        "ToolCall(get_user_country)",
        "ToolResult(get_user_country -> Mexico)",
        "TurnStarted(2)",
        lines[10],
    ]
    assert lines[10].startswith("Text(\"Based on the information that you're from Mexico")
    assert lines[11:] == ["TurnCompleted(2)", "RunCompleted(complete)"]
    assert parts_of(result.messages[1]) == [
        "Thinking('The user is asking about the largest cit')",
        'Text("I\'ll help you find the largest city in y")',
        "ToolCall(toolu_01YGzqpRE16Vricda3Aqcejo, get_user_country, {})",
    ]
    assert result.usage == Usage(input_tokens=398 + 566, output_tokens=155 + 126, requests=2)
    # The second request carries the thinking block unchanged, before the text and the tool_use, and the
    # result in the next user message: the recorded bodies exactly.
    assert server.bodies == recorded
    server.assert_all_served()


# --- errors ----------------------------------------------------------------------------------------------------


async def test_an_invalid_request_400_is_bad_request_with_status_message_and_request_id(replay: Replayer) -> None:
    server = await replay.serve("anthropic/test_anthropic_explicit_effort_xhigh_unsupported_model_errors.yaml")
    (recorded,) = recorded_request_bodies(server.cassette)
    agent = Agent(
        provider(server, stream=False, retry=RETRY_AT_ONCE),
        settings=ModelSettings(extra={"output_config": recorded["output_config"]}),
    )
    events, result = await run_agent(agent, "What is 2+2?")

    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "TurnCompleted(1 rejected)",
        "CallFailed(1 bad_request -> stop)",
        "RunCompleted(error)",
    ]
    assert (result.stop_reason, result.degraded) == ("error", True)
    error = result.error
    assert isinstance(error, BadRequest)
    assert (error.code, error.status, error.request_id) == ("bad_request", 400, "req_011Ca7jT9AHpgXgdv8igm4z9")
    assert (
        error.provider_message
        == "This model does not support effort level 'xhigh'. Supported levels: high, low, max, medium."
    )
    assert error.details == {"provider_code": "invalid_request_error"}
    assert "does not support effort level" in result.detail
    assert server.bodies == [recorded]  # a 400 is not retried, even when retries are allowed


async def test_an_unknown_model_404_is_bad_request_with_status_message_and_request_id(replay: Replayer) -> None:
    server = await replay.serve("anthropic/test_model_name_suggestion[anthropic].yaml")
    (recorded,) = recorded_request_bodies(server.cassette)
    events, result = await run_agent(Agent(provider(server, stream=False, retry=RETRY_AT_ONCE)), "hello")

    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "TurnCompleted(1 rejected)",
        "CallFailed(1 bad_request -> stop)",
        "RunCompleted(error)",
    ]
    assert result.stop_reason == "error"
    error = result.error
    assert isinstance(error, ProviderError)
    assert (error.code, error.status, error.request_id) == ("bad_request", 404, "req_011CdufXo8Y2LVfY2veyuQWG")
    assert error.provider_message == "model: claude-sonet-4-5"
    assert error.details == {"provider_code": "not_found_error"}
    assert result.usage == Usage(requests=1)
    assert server.bodies == [recorded]  # a 404 is not retried


def overloaded_mid_stream(cassette: Cassette) -> Cassette:
    """The recorded text stream cut after its text block starts by an in-band ``overloaded_error`` event, as
    Anthropic sends one under load (the recordings hold none)."""
    first = cassette.interactions[0]
    events = first.body.decode().split("\n\n")
    error = 'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'
    body = "\n\n".join([*events[:3], error, ""]).encode()
    changed = Interaction(first.method, first.uri, first.request_body, first.status, first.reason, first.headers, body)
    return Cassette(cassette.name + " (overloaded)", (changed,))


async def test_an_overloaded_error_in_the_stream_is_provider_unavailable_and_ends_the_run(replay: Replayer) -> None:
    cassette = overloaded_mid_stream(Cassette.load("anthropic/test_request_stream_fallback_for_high_max_tokens.yaml"))
    server = await replay.serve(cassette)
    with pytest.raises(ProviderUnavailable) as caught:
        await collect(provider(server, stream=True), Request((Message.user("What is 1+1?"),)))
    assert (caught.value.code, caught.value.provider_message) == ("provider_unavailable", "Overloaded")

    server = await replay.serve(cassette)
    events, result = await run_agent(Agent(provider(server, stream=True, retry=RETRY_AT_ONCE)), "What is 1+1?")
    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "TurnCompleted(1 rejected)",
        "CallFailed(1 provider_unavailable -> stop)",
        "RunCompleted(error)",
    ]
    assert result.stop_reason == "error"
    assert isinstance(result.error, ProviderUnavailable)
    assert len(server.requests) == 1  # the stream had started: never retried


async def test_extra_headers_go_with_every_request(replay: Replayer) -> None:
    server = await replay.serve("anthropic/test_anthropic_model_instructions.yaml")
    model = provider(server, stream=False, headers={"anthropic-beta": "interleaved-thinking-2025-05-14"})
    await collect(model, Request((Message.user("What is the capital of France?"),)))
    headers = server.requests[0].headers
    assert (headers["anthropic-beta"], headers["anthropic-version"]) == (
        "interleaved-thinking-2025-05-14",
        "2023-06-01",
    )


DEDICATED = {
    "anthropic/test_anthropic_explicit_effort_xhigh_unsupported_model_errors.yaml",
    "anthropic/test_anthropic_mixed_strict_tool_run.yaml",
    "anthropic/test_anthropic_model_instructions.yaml",
    "anthropic/test_anthropic_model_thinking_part.yaml",
    "anthropic/test_anthropic_model_thinking_part_stream.yaml",
    "anthropic/test_anthropic_native_tool_search_streaming.yaml",
    "anthropic/test_anthropic_tool_with_thinking.yaml",
    "anthropic/test_model_name_suggestion[anthropic].yaml",
    "anthropic/test_multiple_parallel_tool_calls.yaml",
    "anthropic/test_request_stream_fallback_for_high_max_tokens.yaml",
}
"""The cassettes with a dedicated test above."""
