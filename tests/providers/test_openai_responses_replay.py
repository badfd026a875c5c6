"""Recorded OpenAI Responses traffic, replayed over loopback HTTP through our provider and our Agent.

Every cassette of ``tests/fixtures/wire/openai_responses/`` (real answers of OpenAI's ``/v1/responses``,
recorded by pydantic-ai) is served by ``tests/wire/replay.py``. Two kinds of tests:

* generic tests replay every recorded request of every cassette through ``OpenAIResponsesProvider`` and
  check the events against a plain reading of the recorded final response (:func:`recorded_turn`) and the
  body we send against the recorded one (:func:`essentials`); again with streams cut into 1-byte reads, and
  with whole answers sent to requests that asked for a stream;
* one test (or more) per cassette pins the behaviour the recording exists for, with a compact snapshot of the
  events and of the ``RunResult``: conversations with tool calls or reasoning run through ``Agent`` with real
  tools, and what we send back on the next turn (encrypted reasoning included) is compared with what the
  recording client sent.

The replay server answers with the recording whatever we send, so every test also asserts what we sent.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pytest

from tests.wire import replay as wire
from tests.wire.events import Call, Streamed, collect, compact, parts_of, run_agent, streamed
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
from tether.errors import ProviderError, ToolError
from tether.events import ThinkingDelta, ToolCallStart
from tether.messages import Message, Part, Role, Text, Thinking, ToolCall, ToolResult
from tether.providers.base import ModelSettings, Request, ToolChoice, ToolDefinition
from tether.providers.http import RetryPolicy
from tether.providers.openai_responses import ORIGIN, OpenAIResponsesProvider
from tether.providers.openai_responses_stream import ResponsesDecoder
from tether.tools.base import Done, Tool, tool
from tether.usage import Usage

replay = wire.replay
"""The replay fixture (assigned, not imported, so that ruff does not read the test parameters as redefinitions)."""

CASSETTES = cassette_files("openai_responses")
NO_RETRY = RetryPolicy(max_retries=0)
"""Each request is answered once: a retry would take the next recorded interaction."""
RETRY_AT_ONCE = RetryPolicy(max_retries=2, base_delay=0.0, max_delay=0.0)
"""Retries without waiting, to show which failures are not retried."""
GENERATED_ID = re.compile(r"call_[0-9a-f]{24}")
SEPARATOR = "\n\n"


# --- plain readings of the recording (test oracles, independent of the provider's decoder) --------------------


def final_response(interaction: Interaction) -> dict[str, Any]:
    """The recorded final response: the whole body, or the ``response`` of a stream's last event."""
    if not interaction.is_event_stream:
        whole: dict[str, Any] = interaction.response_json()
        return whole
    last = json.loads(interaction.events_data()[-1])
    assert last["type"] in ("response.completed", "response.incomplete"), last["type"]
    final: dict[str, Any] = last["response"]
    return final


def recorded_turn(interaction: Interaction) -> Streamed:
    """What the recorded answer says: text, reasoning summaries (parts of one item joined by a blank line),
    calls in output order, finish, and usage with the recorded input tokens (cached ones included)."""
    response = final_response(interaction)
    text = thinking = ""
    calls: list[Call] = []
    for item in response["output"]:
        if item["type"] == "message":
            text += "".join(c.get("text") or c.get("refusal") or "" for c in item["content"])
        elif item["type"] == "reasoning":
            thinking += SEPARATOR.join(part["text"] for part in item["summary"])
        elif item["type"] == "function_call":
            calls.append(Call(item["call_id"], item["name"], item["arguments"]))
    usage = response["usage"]
    return Streamed(
        response["model"],
        text,
        thinking,
        tuple(calls),
        "tool_calls" if calls else "stop",
        Usage(
            input_tokens=usage["input_tokens"],
            output_tokens=usage["output_tokens"],
            reasoning_tokens=usage["output_tokens_details"]["reasoning_tokens"],
        ),
        "",
    )


def in_recorded_terms(got: Streamed) -> Streamed:
    """Our turn with cached input tokens counted as input again, as the recorded ``input_tokens`` count them."""
    usage = Usage(
        input_tokens=got.usage.input_tokens + got.usage.cache_read_tokens,
        output_tokens=got.usage.output_tokens,
        reasoning_tokens=got.usage.reasoning_tokens,
    )
    return Streamed(got.model, got.text, got.thinking, got.calls, got.finish, usage, got.shape)


def _own(item: dict[str, Any]) -> dict[str, Any] | None:
    return {"origin": ORIGIN, "id": item["id"]} if item.get("id") else None


def request_from(body: dict[str, Any]) -> Request:
    """The ``Request`` a recorded request body encodes: its input items as tether messages (consecutive output
    items as one assistant message), its tools, tool choice and settings."""
    messages: list[Message] = []
    names: dict[str, str] = {}

    def add(role: Role, part: Part) -> None:
        if messages and messages[-1].role == role and role in ("assistant", "tool"):
            messages[-1] = Message(role, (*messages[-1].parts, part))
        else:
            messages.append(Message(role, (part,)))

    for item in body["input"]:
        kind = item.get("type", "message")
        if kind == "reasoning":
            text = SEPARATOR.join(part["text"] for part in item["summary"])
            data = {**(_own(item) or {}), "summary": item["summary"]}
            add("assistant", Thinking(text, item["encrypted_content"], data))
        elif kind == "function_call":
            names[item["call_id"]] = item["name"]
            arguments = item["arguments"]
            add("assistant", ToolCall(item["call_id"], item["name"], json.loads(arguments), arguments, _own(item)))
        elif kind == "function_call_output":
            add("tool", ToolResult(item["call_id"], names[item["call_id"]], item["output"]))
        elif isinstance(item["content"], str):
            if item["content"]:  # pydantic-ai sent an empty assistant message before parallel calls
                add(item["role"], Text(item["content"]))
        else:
            add(item["role"], Text("".join(c["text"] for c in item["content"]), _own(item)))
    tools = tuple(ToolDefinition(t["name"], t.get("description") or "", t["parameters"]) for t in body.get("tools", []))
    extra: dict[str, Any] = {k: body[k] for k in ("reasoning", "service_tier") if k in body}
    if body.get("include") not in (None, ["reasoning.encrypted_content"]):
        extra["include"] = body["include"]
    choice: ToolChoice = body.get("tool_choice", "auto")
    settings = ModelSettings(temperature=body.get("temperature"), extra=extra)
    return Request(
        tuple(messages), system=body.get("instructions") or None, tools=tools, tool_choice=choice, settings=settings
    )


def essential_item(item: dict[str, Any]) -> tuple[Any, ...]:
    kind = item.get("type", "message")
    if kind == "reasoning":
        return (kind, item["id"], item["encrypted_content"], item["summary"])
    if kind == "function_call":
        return (kind, item["call_id"], item["name"], item["arguments"], item.get("id"))
    if kind == "function_call_output":
        return (kind, item["call_id"], item["output"])
    content = item["content"]
    text = content if isinstance(content, str) else "".join(c["text"] for c in content)
    return ("message", item["role"], text, item.get("id"))


def essentials(body: dict[str, Any]) -> dict[str, Any]:
    """The fields of a request body that must match the recording.

    Left out on purpose, where our encoding legitimately differs from pydantic-ai's: ``store`` (we always send
    ``false``; pydantic-ai left the server's default), a tool's ``strict`` (we send ``false``, pydantic-ai
    ``true`` for schemas it found strict-compatible), an output item's ``status``, ``annotations`` and
    ``logprobs`` (read-only fields the server fills in), ``instructions: ""`` against no instructions, a
    ``previous_response_id: null`` and pydantic-ai's empty assistant message before parallel calls.
    """
    return {
        "model": body["model"],
        "stream": body.get("stream", False),
        "instructions": body.get("instructions") or None,
        "include": body.get("include"),
        "reasoning": body.get("reasoning"),
        "temperature": body.get("temperature"),
        "tool_choice": body.get("tool_choice"),
        "tools": [(t["name"], t.get("description") or "", t["parameters"]) for t in body.get("tools", [])],
        "input": [essential_item(item) for item in body["input"] if item.get("content") != ""],
    }


def prefix_key(system: str = "", *tools: str) -> str:
    """The ``prompt_cache_key`` of a run without a session: a digest of its system prompt and tools' names."""
    digest = hashlib.sha256(system.encode())
    for name in tools:
        digest.update(b"\0" + name.encode())
    return "tether-" + digest.hexdigest()[:32]


def provider(server: ReplayServer, *, stream: bool, retry: RetryPolicy = NO_RETRY) -> OpenAIResponsesProvider:
    """``OpenAIResponsesProvider`` for the cassette's model, pointed at the replay server."""
    model = server.cassette.interactions[0].request_body["model"]
    return OpenAIResponsesProvider(model, base_url=server.base_url, api_key="test-key", stream=stream, retry=retry)


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
        responses = provider(server, stream=bool(recorded.get("stream")))
        if interaction.status >= 400:
            with pytest.raises(ProviderError) as caught:
                await collect(responses, request_from(recorded))
            assert (caught.value.code, caught.value.status) == ("bad_request", interaction.status)
            assert caught.value.provider_message == interaction.response_json()["error"]["message"]
        else:
            got = streamed(await collect(responses, request_from(recorded)))
            assert in_recorded_terms(got) == recorded_turn(interaction)
        sent = server.requests[index]
        assert essentials(sent.body) == essentials(recorded)
        assert (sent.body["store"], sent.headers["authorization"]) == (False, "Bearer test-key")
    server.assert_all_served()


STREAMED = streamed_cassettes(CASSETTES)
WHOLE = whole_cassettes(CASSETTES)


@pytest.mark.parametrize("name", STREAMED)
async def test_a_recorded_stream_sent_one_byte_at_a_time_decodes_the_same(replay: Replayer, name: str) -> None:
    server = await replay.serve(name, chunk_size=1)
    for interaction in server.cassette.interactions:
        got = streamed(await collect(provider(server, stream=True), request_from(interaction.request_body)))
        assert in_recorded_terms(got) == recorded_turn(interaction)
    server.assert_all_served()


@pytest.mark.parametrize("name", WHOLE)
async def test_a_whole_answer_to_a_streamed_request_is_read_as_the_whole_response(replay: Replayer, name: str) -> None:
    """A server that ignores ``stream: true`` and answers with one JSON response (the recorded ones) is read the
    same as when we asked for a whole answer."""
    server = await replay.serve(name)
    for interaction in server.cassette.interactions:
        got = streamed(await collect(provider(server, stream=True), request_from(interaction.request_body)))
        assert in_recorded_terms(got) == recorded_turn(interaction)
    assert all(body["stream"] is True for body in server.bodies)
    server.assert_all_served()


@pytest.mark.parametrize("name", STREAMED)
def test_the_final_response_of_a_recorded_stream_decodes_whole_to_the_same_turn(name: str) -> None:
    """The stream's deltas and its final ``response`` object, decoded whole, tell the same turn."""
    for interaction in Cassette.load(name).interactions:
        whole = ResponsesDecoder().whole(final_response(interaction))
        deltas = ResponsesDecoder()
        events = [e for data in interaction.events_data() for e in deltas.feed(json.loads(data))] + deltas.end()
        assert streamed(whole) == streamed(events)


# --- text ----------------------------------------------------------------------------------------------------


async def test_a_whole_text_answer_gives_its_text_stop_and_usage(replay: Replayer) -> None:
    server = await replay.serve("openai_responses/test_openai_responses_model_simple_response.yaml")
    events, result = await run_agent(Agent(provider(server, stream=False)), "What is the capital of France?")

    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "Text('The capital of France is Paris.')",
        "TurnCompleted(1)",
        "RunCompleted(complete)",
    ]
    assert (result.text, result.stop_reason, result.turns) == ("The capital of France is Paris.", "complete", 1)
    assert result.usage == Usage(input_tokens=14, output_tokens=8, requests=1)
    (text,) = result.messages[-1].parts
    assert text == Text(
        "The capital of France is Paris.",
        {"origin": ORIGIN, "id": "msg_68c2e8c26114819489dae5b59fceb7bf02e845978fbbb592"},
    )
    (sent,) = server.bodies
    assert sent == {
        "model": "gpt-4o",
        "input": [{"role": "user", "content": "What is the capital of France?"}],
        "stream": False,
        "store": False,
        "prompt_cache_key": prefix_key(),
    }
    # gpt-4o is not asked for encrypted reasoning (it answers that with HTTP 400); "store" and the key differ.
    assert {**recorded_request_bodies(server.cassette)[0], "store": False, "prompt_cache_key": prefix_key()} == sent


async def test_a_streamed_text_answer_with_instructions_and_an_extra_include(replay: Replayer) -> None:
    server = await replay.serve("openai_responses/test_openai_instructions_with_responses_logprobs_streaming.yaml")
    settings = ModelSettings(extra={"include": ["message.output_text.logprobs"]})
    agent = Agent(provider(server, stream=True), system="You are a helpful assistant.", settings=settings)
    events, result = await run_agent(agent, "What is the capital of Minas Gerais?")

    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "Text*9('The capital of Minas Gerais is Belo Horizonte.')",
        "TurnCompleted(1)",
        "RunCompleted(complete)",
    ]
    assert result.usage == Usage(input_tokens=25, output_tokens=10, requests=1)
    assert result.turn_usage == (Usage(input_tokens=25, output_tokens=10, requests=1),)
    (sent,) = server.bodies
    assert sent["instructions"] == "You are a helpful assistant."
    key = prefix_key("You are a helpful assistant.")
    assert {**recorded_request_bodies(server.cassette)[0], "store": False, "prompt_cache_key": key} == sent


# --- tool calls ------------------------------------------------------------------------------------------------


async def test_a_whole_function_call_round_trip_pairs_the_output_by_call_id(replay: Replayer) -> None:
    server = await replay.serve("openai_responses/test_openai_responses_model_simple_response_with_tool_call.yaml")
    asked: list[str] = []

    @tool
    def get_capital(country: str) -> str:
        asked.append(country)
        return "Potato City"

    events, result = await run_agent(
        Agent(provider(server, stream=False), tools=[get_capital]), "What is the capital of PotatoLand?"
    )

    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "TurnCompleted(1)",
        "ToolCall(get_capital)",
        "ToolResult(get_capital -> Potato City)",
        "TurnStarted(2)",
        "Text('The capital of PotatoLand is Potato City.')",
        "TurnCompleted(2)",
        "RunCompleted(complete)",
    ]
    assert asked == ["PotatoLand"]
    assert parts_of(result.messages[1]) == [
        "ToolCall(call_YfwRsW8sUxDKipwyhWTzOXCA, get_capital, {'country': 'PotatoLand'})"
    ]
    assert result.usage == Usage(input_tokens=40 + 67, output_tokens=18 + 11, requests=2)
    # Without reasoning to link them to, no item ids go back: only the call id pairs the output with its call.
    assert server.bodies[1]["input"][1:] == [
        {
            "type": "function_call",
            "call_id": "call_YfwRsW8sUxDKipwyhWTzOXCA",
            "name": "get_capital",
            "arguments": '{"country":"PotatoLand"}',
        },
        {"type": "function_call_output", "call_id": "call_YfwRsW8sUxDKipwyhWTzOXCA", "output": "Potato City"},
    ]
    assert server.bodies[0]["tools"] == [
        {
            "type": "function",
            "name": "get_capital",
            "description": "",
            "parameters": get_capital.parameters,
            "strict": False,
        }
    ]
    for sent, recorded in zip(server.bodies, recorded_request_bodies(server.cassette), strict=True):
        assert essentials(sent)["input"] == essentials(recorded)["input"]
        assert sent["tool_choice"] == recorded["tool_choice"] == "auto"
    server.assert_all_served()


async def test_a_streamed_function_call_then_a_streamed_answer(replay: Replayer) -> None:
    server = await replay.serve("openai_responses/test_openai_responses_stream.yaml")

    @tool
    def get_capital(country: str) -> str:
        return {"France": "Paris"}[country]

    agent = Agent(provider(server, stream=True), tools=[get_capital])
    events, result = await run_agent(agent, "What is the capital of France?")

    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "TurnCompleted(1)",
        "ToolCall(get_capital)",
        "ToolResult(get_capital -> Paris)",
        "TurnStarted(2)",
        "Text*7('The capital of France is Paris.')",
        "TurnCompleted(2)",
        "RunCompleted(complete)",
    ]
    (call,) = result.messages[1].parts
    assert call == ToolCall(
        "call_kL0PCQV7M2WMoVX8V8OtYSAL",
        "get_capital",
        {"country": "France"},
        '{"country":"France"}',
        {"origin": ORIGIN, "id": "fc_67e554a1de488191af0831d35cbe082e0794405d35281ae2"},
    )
    assert result.usage == Usage(input_tokens=255 + 278, output_tokens=16 + 9, requests=2)
    # The recording client sent the item id (fc_...) as the call id, a bug of its version; we send the call id.
    recorded = recorded_request_bodies(server.cassette)[1]["input"]
    assert recorded[1]["call_id"] == recorded[2]["call_id"] == "fc_67e554a1de488191af0831d35cbe082e0794405d35281ae2"
    assert server.bodies[1]["input"][1:] == [
        {
            "type": "function_call",
            "call_id": "call_kL0PCQV7M2WMoVX8V8OtYSAL",
            "name": "get_capital",
            "arguments": '{"country":"France"}',
        },
        {"type": "function_call_output", "call_id": "call_kL0PCQV7M2WMoVX8V8OtYSAL", "output": "Paris"},
    ]
    server.assert_all_served()


async def test_the_first_streamed_turn_indexes_the_call_by_its_output_index(replay: Replayer) -> None:
    server = await replay.serve("openai_responses/test_openai_responses_stream.yaml", chunk_size=13)
    events = await collect(provider(server, stream=True), Request((Message.user("What is the capital of France?"),)))

    assert [e for e in events if isinstance(e, ToolCallStart)] == [
        ToolCallStart(
            "call_kL0PCQV7M2WMoVX8V8OtYSAL",
            "get_capital",
            0,
            {"origin": ORIGIN, "id": "fc_67e554a1de488191af0831d35cbe082e0794405d35281ae2"},
        )
    ]
    assert streamed(events).shape == "start call-start call-delta*5 call-end end"


async def test_parallel_calls_run_in_model_order_and_their_outputs_follow_both_calls(replay: Replayer) -> None:
    server = await replay.serve("openai_responses/test_openai_responses_model_retry.yaml")
    schema = recorded_request_bodies(server.cassette)[0]["tools"][0]

    def get_location(arguments: dict[str, Any]) -> dict[str, int]:
        if arguments["loc_name"] != "London":
            raise ToolError('Wrong location, I only know about "London".')
        return {"lat": 51, "lng": 0}

    tools = [Tool.from_schema("get_location", "", schema["parameters"], get_location)]
    events, result = await run_agent(
        Agent(provider(server, stream=False), tools=tools), "What is the location of Londos and London?"
    )

    assert compact(events)[:8] == [
        "RunStarted",
        "TurnStarted(1)",
        "TurnCompleted(1)",
        "ToolCall(get_location)",
        "ToolResult(get_location -> error:tool_failed)",
        "ToolCall(get_location)",
        'ToolResult(get_location -> {"lat": 51, "lng": 0})',
        "TurnStarted(2)",
    ]
    assert result.text.startswith('It seems "Londos" might be incorrect or unknown.')
    assert result.usage == Usage(input_tokens=335, output_tokens=44, requests=2)  # the first answer counted 0
    second = server.bodies[1]["input"]
    assert [(item.get("type"), item.get("call_id")) for item in second] == [
        (None, None),
        ("function_call", "call_LWVp74L5HaH2KNvgVz9PJsrj"),
        ("function_call", "call_YnRAWeTyxI91m5uNa5bxXwVO"),
        ("function_call_output", "call_LWVp74L5HaH2KNvgVz9PJsrj"),
        ("function_call_output", "call_YnRAWeTyxI91m5uNa5bxXwVO"),
    ]
    assert second[3]["output"] == 'Wrong location, I only know about "London".'
    # The recording differs only in that output (pydantic-ai appended "Fix the errors and try again.").
    recorded = essentials(recorded_request_bodies(server.cassette)[1])["input"]
    assert recorded[3][2].startswith('Wrong location, I only know about "London".\n\nFix the errors')
    assert essentials(server.bodies[1])["input"] == [
        *recorded[:3],
        (*recorded[3][:2], second[3]["output"]),
        recorded[4],
    ]
    server.assert_all_served()


# --- reasoning -------------------------------------------------------------------------------------------------

REASONING_HIGH = ModelSettings(extra={"reasoning": {"effort": "high", "summary": "detailed"}})


async def test_encrypted_reasoning_is_kept_as_thinking_and_sent_back_on_the_next_turn(replay: Replayer) -> None:
    server = await replay.serve("openai_responses/test_openai_responses_model_thinking_part.yaml")
    first_answer, second_answer = (final_response(i)["output"] for i in server.cassette.interactions)
    agent = Agent(provider(server, stream=False), settings=REASONING_HIGH)

    events, first = await run_agent(agent, "How do I cross the street?")
    reasoning, message = first_answer
    summary = SEPARATOR.join(part["text"] for part in reasoning["summary"])
    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "ThinkingStarted",
        f"Thinking({summary!r})",
        "ThinkingEnded",
        f"Text({message['content'][0]['text']!r})",
        "TurnCompleted(1)",
        "RunCompleted(complete)",
    ]
    thinking, text = first.messages[-1].parts
    assert thinking == Thinking(
        summary,
        reasoning["encrypted_content"],
        {"origin": ORIGIN, "id": reasoning["id"], "summary": reasoning["summary"]},
    )
    assert text == Text(message["content"][0]["text"], {"origin": ORIGIN, "id": message["id"]})
    assert first.usage == Usage(input_tokens=13, output_tokens=2199, reasoning_tokens=1920, requests=1)

    follow_up = "Considering the way to cross the street, analogously, how do I cross the river?"
    _, second = await run_agent(agent, follow_up, history=first.messages)
    assert second.text == second_answer[1]["content"][0]["text"]
    assert second.usage == Usage(input_tokens=314, output_tokens=2737, reasoning_tokens=2112, requests=1)
    # The reasoning item goes back whole, and the message after it with its id, which links the two.
    assert server.bodies[1]["input"][1:3] == [
        {
            "type": "reasoning",
            "id": reasoning["id"],
            "encrypted_content": reasoning["encrypted_content"],
            "summary": reasoning["summary"],
        },
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": message["content"][0]["text"]}],
            "id": message["id"],
        },
    ]
    for sent, recorded in zip(server.bodies, recorded_request_bodies(server.cassette), strict=True):
        assert essentials(sent) == essentials(recorded)
        assert (sent["include"], sent["store"]) == (["reasoning.encrypted_content"], False)
    server.assert_all_served()


async def test_streamed_summary_parts_make_one_thinking_part_closed_by_the_final_encrypted_content(
    replay: Replayer,
) -> None:
    server = await replay.serve("openai_responses/test_openai_responses_thinking_part_iter.yaml", chunk_size=101)
    (interaction,) = server.cassette.interactions
    stream = [json.loads(data) for data in interaction.events_data()]
    added = next(e["item"] for e in stream if e["type"] == "response.output_item.added")
    done = next(e["item"] for e in stream if e["type"] == "response.output_item.done")
    events, result = await run_agent(
        Agent(provider(server, stream=True), settings=REASONING_HIGH), "How do I cross the street?"
    )

    summary = SEPARATOR.join(part["text"] for part in done["summary"])
    lines = compact(events)
    # 383 deltas in 4 summary parts, one blank line between parts: one block, closed by its encrypted content
    assert lines[2:5] == ["ThinkingStarted", f"Thinking*383({summary!r})", "ThinkingEnded"]
    answer = final_response(interaction)["output"][1]
    assert answer["content"][0]["text"].startswith("I'm not a road safety professional")
    assert lines[5] == f"Text*271({answer['content'][0]['text']!r})"
    assert lines[6:] == ["TurnCompleted(1)", "RunCompleted(complete)"]
    thinking, text = result.messages[-1].parts
    assert isinstance(thinking, Thinking)
    assert isinstance(text, Text)
    # The encrypted content of output_item.added may be incomplete; the one of output_item.done is kept.
    assert added["encrypted_content"] != done["encrypted_content"]
    assert thinking == Thinking(
        summary, done["encrypted_content"], {"origin": ORIGIN, "id": done["id"], "summary": done["summary"]}
    )
    assert result.usage == Usage(input_tokens=13, output_tokens=1680, reasoning_tokens=1408, requests=1)
    # What the next request would carry back (no second interaction is recorded): the item whole.
    follow_up = provider(server, stream=True).request_body(Request(result.messages))
    assert follow_up["input"][1] == {
        "type": "reasoning",
        "id": done["id"],
        "encrypted_content": done["encrypted_content"],
        "summary": done["summary"],
    }
    assert (follow_up["input"][2]["id"], text.provider_data) == (answer["id"], {"origin": ORIGIN, "id": answer["id"]})
    assert essentials(server.bodies[0]) == essentials(interaction.request_body)


async def test_reasoning_and_a_function_call_go_back_together_with_the_calls_item_id(replay: Replayer) -> None:
    server = await replay.serve("openai_responses/test_openai_responses_thinking_with_tool_calls.yaml")
    first_body = recorded_request_bodies(server.cassette)[0]
    plans: list[str] = []

    @tool
    def update_plan(plan: str) -> str:
        plans.append(plan)
        return "plan updated"

    settings = ModelSettings(extra={"reasoning": {"effort": "low", "summary": "detailed"}})
    agent = Agent(
        provider(server, stream=False), tools=[update_plan], system=first_body["instructions"], settings=settings
    )
    events, result = await run_agent(agent, first_body["input"][0]["content"])

    reasoning, call = final_response(server.cassette.interactions[0])["output"]
    lines = compact(events)
    assert lines[2:5] == [
        "ThinkingStarted",
        f"Thinking({SEPARATOR.join(p['text'] for p in reasoning['summary'])!r})",
        "ThinkingEnded",
    ]
    assert lines[5:9] == [
        "TurnCompleted(1)",
        "ToolCall(update_plan)",
        "ToolResult(update_plan -> plan updated)",
        "TurnStarted(2)",
    ]
    assert lines[-2:] == ["TurnCompleted(2)", "RunCompleted(complete)"]
    assert plans == [json.loads(call["arguments"])["plan"]]
    assert result.text.startswith("Softly old fountains illumine alleys\nDunes over harbor aglow")
    assert result.usage == Usage(
        input_tokens=124 + 39, output_tokens=1926 + 124, cache_read_tokens=2048, reasoning_tokens=1792, requests=2
    )
    assert server.bodies[1]["input"][1:] == [
        {
            "type": "reasoning",
            "id": reasoning["id"],
            "encrypted_content": reasoning["encrypted_content"],
            "summary": reasoning["summary"],
        },
        {
            "type": "function_call",
            "call_id": call["call_id"],
            "name": "update_plan",
            "arguments": call["arguments"],
            "id": call["id"],
        },
        {"type": "function_call_output", "call_id": call["call_id"], "output": "plan updated"},
    ]
    for sent, recorded in zip(server.bodies, recorded_request_bodies(server.cassette), strict=True):
        assert essentials(sent)["input"] == essentials(recorded)["input"]
        assert (sent["instructions"], sent["reasoning"], sent["include"]) == (
            recorded["instructions"],
            recorded["reasoning"],
            recorded["include"],
        )
    server.assert_all_served()


async def test_reasoning_without_a_summary_and_a_done_tool_with_usage_of_reasoning_tokens(replay: Replayer) -> None:
    server = await replay.serve("openai_responses/test_openai_responses_streaming_usage.yaml")
    recorded = recorded_request_bodies(server.cassette)[0]
    schema = recorded["tools"][0]

    def final_result(arguments: dict[str, Any]) -> None:
        raise Done(str(arguments["result"]))

    tools = [Tool.from_schema("final_result", schema["description"], schema["parameters"], final_result)]
    settings = ModelSettings(
        extra={"reasoning": recorded["reasoning"], "service_tier": "flex", "tool_choice": "required"}
    )
    events, result = await run_agent(
        Agent(provider(server, stream=True), tools=tools, settings=settings), "Calculate 100 * 200 / 3"
    )

    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "ThinkingStarted",  # a reasoning item without a summary: a block that shows no text, marked all the same
        "ThinkingEnded",
        "TurnCompleted(1)",
        "ToolCall(final_result)",
        "ToolResult(final_result -> 6666)",
        "RunCompleted(done_tool)",
    ]
    assert (result.text, result.stop_reason) == ("6666", "done_tool")
    assert result.usage == Usage(input_tokens=53, output_tokens=469, reasoning_tokens=448, requests=1)
    thinking, call = result.messages[1].parts
    stream = [json.loads(data) for data in server.cassette.interactions[0].events_data()]
    reasoning = next(e["item"] for e in stream if e["type"] == "response.output_item.done")
    # Each event re-encrypts the reasoning: output_item.done's is kept (the final response has another one).
    assert (
        reasoning["encrypted_content"]
        != final_response(server.cassette.interactions[0])["output"][0]["encrypted_content"]
    )
    assert thinking == Thinking(
        "", reasoning["encrypted_content"], {"origin": ORIGIN, "id": reasoning["id"], "summary": []}
    )
    assert isinstance(call, ToolCall)
    assert call.arguments == {"result": 6666}
    (sent,) = server.bodies
    assert essentials(sent) == essentials(recorded)
    assert (sent["service_tier"], sent["tool_choice"]) == ("flex", "required")


async def test_the_thinking_deltas_of_a_summaryless_reasoning_item_carry_no_text(replay: Replayer) -> None:
    server = await replay.serve("openai_responses/test_openai_responses_streaming_usage.yaml", chunk_size=1)
    events = await collect(provider(server, stream=True), Request((Message.user("Calculate 100 * 200 / 3"),)))
    thinking = [e for e in events if isinstance(e, ThinkingDelta)]
    assert [(e.text, bool(e.signature)) for e in thinking] == [("", True)]  # one closing delta, nothing shown
    (start,) = (e for e in events if isinstance(e, ToolCallStart))
    assert (start.id, start.index) == ("call_CWXgs68YprAjp6t0371hiPOI", 1)  # the reasoning item is output 0


# --- errors ----------------------------------------------------------------------------------------------------


async def test_a_json_400_to_a_streamed_request_is_bad_request_and_the_run_reports_it(replay: Replayer) -> None:
    server = await replay.serve("openai_responses/test_openai_responses_model_http_error.yaml")
    agent = Agent(provider(server, stream=True, retry=RETRY_AT_ONCE), settings=ModelSettings(temperature=-1))
    events, result = await run_agent(agent, "What is the capital of France?")

    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "TurnCompleted(1 rejected)",
        "CallFailed(1 bad_request -> stop)",
        "RunCompleted(error)",
    ]
    assert (result.stop_reason, result.degraded) == ("error", True)
    error = result.error
    assert isinstance(error, ProviderError)
    assert (error.code, error.status) == ("bad_request", 400)
    assert error.provider_message == (
        "Invalid 'temperature': decimal below minimum value. Expected a value >= 0, but got -1 instead."
    )
    assert error.details == {"provider_code": "decimal_below_min_value"}
    assert "decimal below minimum value" in result.detail
    assert len(server.requests) == 1  # a 400 is not retried
    assert (server.bodies[0]["stream"], server.bodies[0]["temperature"]) == (True, -1)


async def test_an_unknown_model_is_bad_request_with_the_providers_message_and_status(replay: Replayer) -> None:
    server = await replay.serve("openai_responses/test_model_name_suggestion[openai-responses].yaml")
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
    assert (error.code, error.status) == ("bad_request", 400)
    assert error.provider_message == "The requested model 'gpt-5.2-proo' does not exist."
    assert error.details == {"provider_code": "model_not_found"}
    assert result.usage == Usage(requests=1)
    assert len(server.requests) == 1
    # A gpt-5 name: asked for encrypted reasoning, as the recording client did.
    assert server.bodies[0] == {
        **recorded_request_bodies(server.cassette)[0],
        "store": False,
        "prompt_cache_key": prefix_key(),
    }


DEDICATED = {
    "openai_responses/test_model_name_suggestion[openai-responses].yaml",
    "openai_responses/test_openai_instructions_with_responses_logprobs_streaming.yaml",
    "openai_responses/test_openai_responses_model_http_error.yaml",
    "openai_responses/test_openai_responses_model_retry.yaml",
    "openai_responses/test_openai_responses_model_simple_response.yaml",
    "openai_responses/test_openai_responses_model_simple_response_with_tool_call.yaml",
    "openai_responses/test_openai_responses_model_thinking_part.yaml",
    "openai_responses/test_openai_responses_stream.yaml",
    "openai_responses/test_openai_responses_streaming_usage.yaml",
    "openai_responses/test_openai_responses_thinking_part_iter.yaml",
    "openai_responses/test_openai_responses_thinking_with_tool_calls.yaml",
}
"""The cassettes with a dedicated test above."""
