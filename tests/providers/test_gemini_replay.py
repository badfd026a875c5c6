"""Recorded Gemini traffic, replayed over loopback HTTP through our provider and our Agent.

Every cassette of ``tests/fixtures/wire/google/`` (real answers of Gemini 2.0, 2.5 and 3 recorded by
pydantic-ai) is served by ``tests/wire/replay.py``. Two kinds of tests:

* generic tests replay every recorded request of every cassette through ``GeminiProvider`` and check the
  events against a plain reading of the recorded answer (:func:`recorded_turn`, below) and the body we send
  against the recorded one (:func:`essentials`); again with streams cut into 1-byte reads, and with whole
  answers sent to requests that asked for a stream;
* one test (or more) per cassette pins the behaviour the recording exists for: conversations with tool calls
  run through ``Agent`` with real tools, and the thought signatures we send back are the ones received.

The replay server answers with the recording whatever we send, so every test also asserts what we sent.
Differences from pydantic-ai's requests that do not matter, and that :func:`essentials` leaves out: it sends
``responseModalities: ["TEXT"]`` (the default), ``parameters_json_schema`` (we send ``parameters`` in
Gemini's schema subset), snake-case ``include_thoughts``, ids of its own (``pyd_ai_...``) on the calls the model
sent without one and on their responses (we send those back without an id, as the model wrote them), the
``{"return_value": ...}`` / ``{"error": ...}`` response objects (we send ``{"ok": ..., ...}``), a "Fix the
errors and try again." line after a tool's error, and thought signatures re-encoded in the URL-safe base64
alphabet (we send back the exact string we received).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
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
from tether.errors import BadRequest, ProviderError, ToolError
from tether.events import TextDelta, ThinkingDelta
from tether.messages import Message, Part, Text, Thinking, ToolCall, ToolResult
from tether.providers.base import ModelSettings, Request, ToolDefinition
from tether.providers.gemini import GeminiProvider
from tether.providers.http import RetryPolicy
from tether.tools.base import Done, Tool, tool
from tether.usage import Usage

replay = wire.replay
"""The replay fixture (assigned, not imported, so that ruff does not read the test parameters as redefinitions)."""

CASSETTES = cassette_files("google")
NO_RETRY = RetryPolicy(max_retries=0)
"""Each request is answered once: a retry would take the next recorded interaction."""
RETRY_AT_ONCE = RetryPolicy(max_retries=2, base_delay=0.0, max_delay=0.0)
"""Retries without waiting, to show which failures are retried."""
GENERATED_ID = re.compile(r"gemini_noid_[0-9a-f]{24}")
GEMINI = {"origin": "gemini"}


# --- plain readings of the recordings, as oracles -------------------------------------------------------------


def model_of(interaction: Interaction) -> str:
    return interaction.path.split("/models/", 1)[1].split(":", 1)[0]


def is_streamed(interaction: Interaction) -> bool:
    return interaction.path.endswith(":streamGenerateContent")


def provider(server: ReplayServer, *, stream: bool, retry: RetryPolicy = NO_RETRY) -> GeminiProvider:
    """``GeminiProvider`` for the cassette's model, pointed at the replay server."""
    model = model_of(server.cassette.interactions[0])
    return GeminiProvider(
        model,
        base_url=server.base_url,
        api_key="test-key",
        stream=stream,
        retry=retry,
        json_schema_parameters=not recorded_with_openapi_parameters(server),
    )


def recorded_with_openapi_parameters(server: ReplayServer) -> bool:
    """Whether the cassette's client sent tools in the OpenAPI ``parameters`` field (so the provider's fallback
    is what reproduces its requests) rather than as plain JSON Schema."""
    declarations = [
        declaration
        for body in recorded_request_bodies(server.cassette)
        for entry in (body or {}).get("tools", [])
        for declaration in entry.get("functionDeclarations", [])
    ]
    return any("parameters" in declaration for declaration in declarations)


def standard(signature: str | None) -> str | None:
    """A signature in the standard base64 alphabet (pydantic-ai sent them back URL-safe)."""
    return signature.replace("-", "+").replace("_", "/") if signature else None


def recorded_chunks(interaction: Interaction) -> list[dict[str, Any]]:
    if interaction.is_event_stream:
        return [json.loads(data) for data in interaction.events_data()]
    return [interaction.response_json()]


def recorded_turn(interaction: Interaction) -> Streamed:
    """The answer as the recording has it: candidate 0's parts, its last finish reason, the last usage."""
    chunks = recorded_chunks(interaction)
    text = thinking = finish = ""
    calls: list[Call] = []
    usage: dict[str, Any] = {}
    for chunk in chunks:
        usage = chunk.get("usageMetadata") or usage
        for candidate in chunk.get("candidates", [])[:1]:
            for part in candidate["content"]["parts"]:
                if part.get("thought"):
                    thinking += part["text"]
                elif "functionCall" in part:
                    call = part["functionCall"]
                    arguments = json.dumps(call.get("args", {}), ensure_ascii=False)
                    calls.append(Call(call.get("id", ""), call["name"], arguments))
                else:
                    text += part.get("text", "")
            finish = candidate.get("finishReason") or finish
    thoughts = usage.get("thoughtsTokenCount", 0)
    return Streamed(
        chunks[0].get("modelVersion"),
        text,
        thinking,
        tuple(calls),
        "tool_calls" if calls else {"STOP": "stop", "MAX_TOKENS": "length"}[finish],
        Usage(
            input_tokens=usage.get("promptTokenCount", 0),
            output_tokens=usage.get("candidatesTokenCount", 0) + thoughts,
            reasoning_tokens=thoughts,
        ),
        "",
    )


def in_recorded_terms(got: Streamed) -> Streamed:
    """Our turn as the recording reads: an id we generated for a call that came without one is ``""``."""
    calls = tuple(Call("" if GENERATED_ID.fullmatch(c.id) else c.id, c.name, c.arguments) for c in got.calls)
    return Streamed(got.model, got.text, got.thinking, calls, got.finish, got.usage, got.shape)


def json_schema_from_gemini(schema: dict[str, Any]) -> dict[str, Any]:
    """A recorded Gemini-subset schema (``type: "OBJECT"``) as the JSON Schema a tool would declare."""
    out = {key: value for key, value in schema.items() if key not in ("properties", "items", "type")}
    if "type" in schema:
        out["type"] = schema["type"].lower()
    if "properties" in schema:
        out["properties"] = {name: json_schema_from_gemini(sub) for name, sub in schema["properties"].items()}
    if "items" in schema:
        out["items"] = json_schema_from_gemini(schema["items"])
    return out


def declared_parameters(declaration: dict[str, Any]) -> dict[str, Any]:
    """A declaration's parameters as JSON Schema, whichever spelling of the field it was sent with."""
    for field in ("parametersJsonSchema", "parameters_json_schema"):
        if field in declaration:
            return dict(declaration[field])
    return json_schema_from_gemini(declaration["parameters"])


def sent_parameters(declaration: dict[str, Any]) -> tuple[str, Any]:
    """The field a declaration's parameters went in and what it held, the two spellings of the JSON Schema
    field read as one (proto JSON accepts both)."""
    if "parameters" in declaration:
        return ("parameters", declaration["parameters"])
    return ("json schema", declared_parameters(declaration))


def recorded_result(response: dict[str, Any]) -> tuple[bool, str]:
    """``(ok, text)`` of a pydantic-ai function response, as a tool's result text."""
    if "error" in response:
        return False, response["error"]
    value = response["return_value"]
    return True, value if isinstance(value, str) else json.dumps(value)


def request_from(body: dict[str, Any]) -> Request:
    """The ``Request`` a recorded request body encodes: its conversation as tether messages (with the
    recorded thought signatures marked as Gemini's), tools, system instruction and configuration."""
    messages: list[Message] = []
    for content in body["contents"]:
        if content["role"] == "model":
            messages.append(Message("assistant", tuple(_model_part(part) for part in content["parts"])))
            continue
        results: list[Part] = []
        for part in content["parts"]:
            if answer := part.get("functionResponse"):
                ok, text = recorded_result(answer["response"])
                results.append(ToolResult(answer["id"], answer["name"], text, not ok, None if ok else "tool_failed"))
        if results:
            messages.append(Message("tool", tuple(results)))
        if texts := [Text(part["text"]) for part in content["parts"] if "text" in part]:
            messages.append(Message("user", tuple(texts)))
    tools = tuple(
        ToolDefinition(d["name"], d.get("description", ""), declared_parameters(d))
        for entry in body.get("tools", [])
        for d in entry["functionDeclarations"]
    )
    system = (
        " ".join(part["text"] for part in body["systemInstruction"]["parts"]) if "systemInstruction" in body else None
    )
    extra: dict[str, Any] = {key: body[key] for key in ("generationConfig", "toolConfig") if key in body}
    return Request(tuple(messages), system=system, tools=tools, settings=ModelSettings(extra=extra))


def _model_part(part: dict[str, Any]) -> Part:
    signature = part.get("thoughtSignature")
    own = {"origin": "gemini", "thoughtSignature": signature} if signature else None
    if part.get("thought"):
        return Thinking(part["text"], signature, GEMINI)
    if call := part.get("functionCall"):
        arguments = call.get("args", {})
        return ToolCall(call["id"], call["name"], arguments, json.dumps(arguments), own)
    return Text(part["text"], own)


def essentials(body: dict[str, Any]) -> dict[str, Any]:
    """The fields of a request body that must match the recording, with the differences the module
    docstring lists taken out: call ids are numbered by first appearance (pydantic-ai's own, ``pyd_ai_...``,
    read as no id at all, which is what we send for a call that came without one), signatures in one alphabet,
    function responses as ``(ok, value)`` with an error's first line, tool parameters in Gemini's subset."""
    ids: dict[str, str] = {}

    def call_id(value: str | None) -> str:
        if value is None or value.startswith("pyd_ai_"):
            return "(no id)"
        return ids.setdefault(value, f"#{len(ids)}")

    def part(item: dict[str, Any]) -> tuple[Any, ...]:
        signature = standard(item.get("thoughtSignature"))
        if call := item.get("functionCall"):
            return ("call", call_id(call.get("id")), call["name"], call.get("args", {}), signature)
        if answer := item.get("functionResponse"):
            response = answer["response"]
            if "ok" in response:
                ok, value = response["ok"], response["result"] if response["ok"] else response["error"]["message"]
            else:
                ok, value = "error" not in response, response.get("return_value", response.get("error"))
            value = value.split("\n")[0] if not ok else value
            return ("result", call_id(answer.get("id")), answer["name"], ok, value, signature)
        return ("thought" if item.get("thought") else "text", item["text"], signature)

    declarations = [d for entry in body.get("tools", []) for d in entry["functionDeclarations"]]
    config = {_camel(k): v for k, v in (body.get("generationConfig") or {}).items() if k != "responseModalities"}
    if "thinkingConfig" in config:
        config["thinkingConfig"] = {_camel(k): v for k, v in config["thinkingConfig"].items()}
    default_choice = {"functionCallingConfig": {"mode": "AUTO"}} if declarations else None
    return {
        "system": [p["text"] for p in (body.get("systemInstruction") or {}).get("parts", [])],
        "contents": [(content["role"], [part(item) for item in content["parts"]]) for content in body["contents"]],
        "tools": [(d["name"], d.get("description", ""), sent_parameters(d)) for d in declarations],
        "toolConfig": body.get("toolConfig") or default_choice,
        "generationConfig": config,
    }


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(word.title() for word in rest)


# --- every cassette, every interaction ------------------------------------------------------------------------


def test_the_replay_tests_cover_exactly_the_copied_cassettes() -> None:
    """A cassette added to the folder must get a dedicated test here (the generic one runs on it already)."""
    assert set(CASSETTES) == DEDICATED


@pytest.mark.parametrize("name", CASSETTES)
async def test_every_recorded_answer_decodes_as_recorded_and_every_request_is_encoded_as_recorded(
    replay: Replayer, name: str
) -> None:
    server = await replay.serve(name)
    for index, interaction in enumerate(server.cassette.interactions):
        recorded = interaction.request_body
        gemini = provider(server, stream=is_streamed(interaction))
        if interaction.status >= 400:
            with pytest.raises(ProviderError) as caught:
                await collect(gemini, request_from(recorded))
            error = interaction.response_json()["error"]
            assert (caught.value.code, caught.value.status) == ("bad_request", interaction.status)
            assert caught.value.provider_message == error["message"]
        else:
            expected = recorded_turn(interaction)
            assert in_recorded_terms(streamed(await collect(gemini, request_from(recorded)))) == expected
        sent = server.requests[index]
        assert essentials(sent.body) == essentials(recorded)
        assert sent.headers["x-goog-api-key"] == "test-key"
        assert "key=" not in sent.query
        assert sent.query == ("alt=sse" if is_streamed(interaction) else "")
    server.assert_all_served()


STREAMED = streamed_cassettes(CASSETTES)
WHOLE = whole_cassettes(CASSETTES)


@pytest.mark.parametrize("name", STREAMED)
async def test_a_recorded_stream_sent_one_byte_at_a_time_decodes_the_same(replay: Replayer, name: str) -> None:
    """Lines, events, JSON and multi-byte characters ("30°C") split across reads change nothing."""
    server = await replay.serve(name, chunk_size=1)
    for interaction in server.cassette.interactions:
        events = await collect(provider(server, stream=True), request_from(interaction.request_body))
        assert in_recorded_terms(streamed(events)) == recorded_turn(interaction)
    server.assert_all_served()


@pytest.mark.parametrize("name", WHOLE)
async def test_a_whole_answer_to_a_streamed_request_is_read_as_one_chunk(replay: Replayer, name: str) -> None:
    """A server that answers ``streamGenerateContent`` with one JSON response is read like a whole answer
    (the recorded whole answers, served at the streaming path)."""
    recorded = Cassette.load(name)
    moved = tuple(
        replace(i, uri=i.uri.replace(":generateContent", ":streamGenerateContent?alt=sse"))
        for i in recorded.interactions
    )
    server = await replay.serve(Cassette(recorded.name, moved))
    for interaction in server.cassette.interactions:
        events = await collect(provider(server, stream=True), request_from(interaction.request_body))
        assert in_recorded_terms(streamed(events)) == recorded_turn(interaction)
    assert all(request.query == "alt=sse" for request in server.requests)
    server.assert_all_served()


# --- tool parameters ---------------------------------------------------------------------------------------


async def test_tool_parameters_go_over_http_as_the_json_schema_the_recorded_client_sent(replay: Replayer) -> None:
    # A live exchange in which the API accepted plain JSON Schema for a tool (proto JSON reads both spellings of
    # the field: the recording's client wrote parameters_json_schema, tether writes parametersJsonSchema).
    server = await replay.serve("google/test_google_model_retry.yaml")
    ((recorded,),) = [entry["functionDeclarations"] for entry in recorded_request_bodies(server.cassette)[0]["tools"]]
    schema = recorded["parameters_json_schema"]
    tool = ToolDefinition(recorded["name"], recorded["description"], schema)
    sent = provider(server, stream=False)
    assert not recorded_with_openapi_parameters(server)

    async for _ in sent.stream(Request((Message.user("What is the capital of France?"),), tools=(tool,))):
        pass

    (declaration,) = server.bodies[0]["tools"][0]["functionDeclarations"]
    assert declaration == {"name": tool.name, "description": tool.description, "parametersJsonSchema": schema}


# --- the simple answers -------------------------------------------------------------------------------------


async def test_a_whole_text_answer_gives_its_text_stop_and_usage_with_thoughts_counted(replay: Replayer) -> None:
    server = await replay.serve("google/test_google_model.yaml")
    events, result = await run_agent(Agent(provider(server, stream=False), system="You are a chatbot."), "Hello!")

    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "Text('Hello! How can I help you today?')",
        "TurnCompleted(1)",
        "RunCompleted(complete)",
    ]
    assert (result.text, result.stop_reason) == ("Hello! How can I help you today?", "complete")
    assert result.usage == Usage(input_tokens=9, output_tokens=9 + 34, reasoning_tokens=34, requests=1)
    assert server.bodies == [
        {
            "contents": [{"role": "user", "parts": [{"text": "Hello!"}]}],
            "systemInstruction": {"parts": [{"text": "You are a chatbot."}]},
        }
    ]
    assert essentials(server.bodies[0]) == essentials(recorded_request_bodies(server.cassette)[0])
    assert server.requests[0].path == "/v1beta/models/gemini-2.5-flash:generateContent"


async def test_a_streamed_answer_arrives_in_pieces_and_takes_the_last_usage(replay: Replayer) -> None:
    server = await replay.serve("google/test_google_model_stream.yaml")
    agent = Agent(
        provider(server, stream=True), system="You are a helpful chatbot.", settings=ModelSettings(temperature=0.0)
    )
    events, result = await run_agent(agent, "What is the capital of France?")

    assert compact(events)[2] == "Text*3('The capital of France is Paris.\\n')"
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["The", " capital of France", " is Paris.\n"]
    # The first chunks say 15 prompt tokens, the last one 13 and 8 candidates: the last one counts.
    assert result.usage == Usage(input_tokens=13, output_tokens=8, requests=1)
    assert server.bodies[0]["generationConfig"] == {"temperature": 0.0}
    assert essentials(server.bodies[0]) == essentials(recorded_request_bodies(server.cassette)[0])
    assert server.requests[0].path == "/v1beta/models/gemini-2.0-flash-exp:streamGenerateContent"
    assert server.requests[0].query == "alt=sse"


async def test_an_unknown_model_404_is_bad_request_with_the_providers_message_and_status(replay: Replayer) -> None:
    server = await replay.serve("google/test_model_name_suggestion[google].yaml")
    events, result = await run_agent(Agent(provider(server, stream=False, retry=RETRY_AT_ONCE)), "hello")

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
    assert (error.code, error.status) == ("bad_request", 404)
    assert error.provider_message == (
        "models/gemini-3.6-flahs is not found for API version v1beta, or is not supported for generateContent. "
        "Call ModelService.ListModels to see the list of available models and their supported methods."
    )
    assert "is not found" in result.detail
    assert len(server.requests) == 1  # a 404 is not retried, even when retries are allowed
    assert server.bodies[0] == {"contents": [{"role": "user", "parts": [{"text": "hello"}]}]}


# --- tool calls ---------------------------------------------------------------------------------------------


def capital_tool(*, strict: bool) -> Tool:
    @tool
    def get_capital(country: str) -> str:
        """Get the capital of a country.

        Args:
            country: The country name.
        """
        if strict and country != "La France":
            raise ToolError('The country is not supported. Use "La France" instead.')
        return "Paris"

    return get_capital


async def test_a_streamed_tool_round_trip_sends_calls_that_came_without_an_id_back_without_one(
    replay: Replayer,
) -> None:
    server = await replay.serve("google/test_google_model_iter_stream.yaml")

    @tool
    def get_temperature(city: str) -> str:
        """Get the temperature in a city.

        Args:
            city: The city name.
        """
        return {"Paris": "30°C"}[city]

    agent = Agent(
        provider(server, stream=True),
        tools=[capital_tool(strict=False), get_temperature],
        system="You are a helpful chatbot.",
    )
    events, result = await run_agent(agent, "What is the temperature of the capital of France?")

    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "TurnCompleted(1)",
        "ToolCall(get_capital)",
        "ToolResult(get_capital -> Paris)",
        "TurnStarted(2)",
        "TurnCompleted(2)",
        "ToolCall(get_temperature)",
        "ToolResult(get_temperature -> 30°C)",
        "TurnStarted(3)",
        "Text*2('The temperature in Paris is 30°C.\\n')",
        "TurnCompleted(3)",
        "RunCompleted(complete)",
    ]
    assert result.usage == Usage(input_tokens=52 + 64 + 79, output_tokens=5 + 5 + 12, requests=3)
    first_call, second_call = result.messages[2].tool_calls[0], result.messages[4].tool_calls[0]
    # Gemini 2.0 sends calls without ids: tether pairs each with its result by an id of its own...
    assert GENERATED_ID.fullmatch(first_call.id)
    assert GENERATED_ID.fullmatch(second_call.id)
    assert result.messages[3].tool_results[0].call_id == first_call.id
    # ...and sends the model's content back as the model wrote it: no id on the call, none on its response.
    last = server.bodies[2]["contents"]
    assert last[1] == {
        "role": "model",
        "parts": [{"functionCall": {"name": "get_capital", "args": {"country": "France"}}}],
    }
    assert last[2] == {
        "role": "user",
        "parts": [{"functionResponse": {"name": "get_capital", "response": {"ok": True, "result": "Paris"}}}],
    }
    assert last[3]["parts"] == [{"functionCall": {"name": "get_temperature", "args": {"city": "Paris"}}}]
    assert last[4]["parts"][0]["functionResponse"] == {
        "name": "get_temperature",
        "response": {"ok": True, "result": "30°C"},
    }
    assert first_call.id not in json.dumps(server.bodies)
    assert second_call.id not in json.dumps(server.bodies)
    for sent, recorded in zip(server.bodies, recorded_request_bodies(server.cassette), strict=True):
        assert essentials(sent) == essentials(recorded)
    server.assert_all_served()


async def test_a_tool_error_goes_back_in_the_error_envelope_and_signed_calls_are_sent_back_signed(
    replay: Replayer,
) -> None:
    server = await replay.serve("google/test_google_model_retry.yaml")
    agent = Agent(
        provider(server, stream=False),
        tools=[capital_tool(strict=True)],
        system="You are a helpful chatbot.",
        settings=ModelSettings(temperature=0.0),
    )
    events, result = await run_agent(agent, "What is the capital of France?")

    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "TurnCompleted(1)",
        "ToolCall(get_capital)",
        "ToolResult(get_capital -> error:tool_failed)",
        "TurnStarted(2)",
        "TurnCompleted(2)",
        "ToolCall(get_capital)",
        "ToolResult(get_capital -> Paris)",
        "TurnStarted(3)",
        "Text('Paris')",
        "TurnCompleted(3)",
        "RunCompleted(complete)",
    ]
    assert (result.text, result.turns) == ("Paris", 3)
    assert result.usage == Usage(
        input_tokens=57 + 109 + 142,
        output_tokens=15 + 124 + 16 + 199 + 1 + 97,
        reasoning_tokens=124 + 199 + 97,
        requests=3,
    )
    answers = [i.response_json()["candidates"][0]["content"]["parts"][0] for i in server.cassette.interactions]
    first, second = result.messages[2].tool_calls[0], result.messages[4].tool_calls[0]
    assert first.provider_data == {"origin": "gemini", "thoughtSignature": answers[0]["thoughtSignature"]}
    assert result.messages[-1].parts == (
        Text("Paris", {"origin": "gemini", "thoughtSignature": answers[2]["thoughtSignature"]}),
    )
    contents = server.bodies[2]["contents"]
    assert contents[1]["parts"] == [
        {
            "functionCall": {"name": "get_capital", "args": {"country": "France"}},  # no id came, none goes
            "thoughtSignature": answers[0]["thoughtSignature"],  # exactly as received
        }
    ]
    assert contents[2]["parts"][0]["functionResponse"]["response"] == {
        "ok": False,
        "error": {
            "code": "tool_failed",
            "message": 'The country is not supported. Use "La France" instead.',
            "details": None,
        },
    }
    assert contents[3]["parts"][0]["thoughtSignature"] == answers[1]["thoughtSignature"]
    assert "id" not in contents[3]["parts"][0]["functionCall"]
    assert GENERATED_ID.fullmatch(second.id)
    for sent, recorded in zip(server.bodies, recorded_request_bodies(server.cassette), strict=True):
        assert essentials(sent) == essentials(recorded)
    server.assert_all_served()


async def test_a_streamed_gemini_3_call_has_its_signature_sent_back_on_the_same_call(replay: Replayer) -> None:
    server = await replay.serve("google/test_google_streaming_tool_call_thought_signature.yaml")

    @tool
    def get_country() -> str:
        return "Mexico"

    events, result = await run_agent(
        Agent(provider(server, stream=True), tools=[get_country]),
        "What is the capital of the user country? Call the tool",
    )

    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "TurnCompleted(1)",
        "ToolCall(get_country)",
        "ToolResult(get_country -> Mexico)",
        "TurnStarted(2)",
        "Text*2('The capital of Mexico is Mexico City.')",
        "TurnCompleted(2)",
        "RunCompleted(complete)",
    ]
    signature = recorded_chunks(server.cassette.interactions[0])[0]["candidates"][0]["content"]["parts"][0][
        "thoughtSignature"
    ]
    (call,) = result.messages[1].tool_calls
    assert call.provider_data == {"origin": "gemini", "thoughtSignature": signature}
    assert server.bodies[1]["contents"][1] == {
        "role": "model",
        "parts": [{"functionCall": {"name": "get_country", "args": {}}, "thoughtSignature": signature}],
    }
    assert result.usage == Usage(input_tokens=29 + 257, output_tokens=10 + 202 + 8, reasoning_tokens=202, requests=2)
    for sent, recorded in zip(server.bodies, recorded_request_bodies(server.cassette), strict=True):
        assert essentials(sent) == essentials(recorded)
    server.assert_all_served()


async def test_three_calls_in_one_turn_are_answered_together_in_order_then_a_done_tool_ends_the_run(
    replay: Replayer,
) -> None:
    server = await replay.serve("google/test_google_instructions_only_with_tool_calls.yaml")
    topics = iter(["cars", "penguins", "cars", "penguins", "cars", "penguins"])

    # A tool whose result changes from call to call says so; otherwise the loop would answer the model's
    # identical follow-up calls with the first result (loop/repeats.py).
    @tool(repeatable=True)
    def generate_topic() -> str:
        return next(topics)

    recorded = recorded_request_bodies(server.cassette)
    schema = recorded[0]["tools"][0]["functionDeclarations"][1]

    def final_result(arguments: dict[str, Any]) -> None:
        raise Done("\n".join(arguments["response"]))

    done = Tool.from_schema("final_result", schema["description"], schema["parameters_json_schema"], final_result)
    forced = {
        "toolConfig": {
            "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["generate_topic", "final_result"]}
        }
    }
    agent = Agent(
        provider(server, stream=False),
        tools=[generate_topic, done],
        system="Tell three jokes. Generate topics with the generate_topic tool.",
        settings=ModelSettings(extra=forced),
    )
    events, result = await run_agent(agent, "")

    topic = ["ToolCall(generate_topic)"]
    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "TurnCompleted(1)",
        *topic, "ToolResult(generate_topic -> cars)",
        *topic, "ToolResult(generate_topic -> penguins)",
        *topic, "ToolResult(generate_topic -> cars)",
        "TurnStarted(2)", "TurnCompleted(2)", *topic, "ToolResult(generate_topic -> penguins)",
        "TurnStarted(3)", "TurnCompleted(3)", *topic, "ToolResult(generate_topic -> cars)",
        "TurnStarted(4)", "TurnCompleted(4)", *topic, "ToolResult(generate_topic -> penguins)",
        "TurnStarted(5)",
        "TurnCompleted(5)",
        "ToolCall(final_result)",
        f"ToolResult(final_result -> {result.text})",
        "RunCompleted(done_tool)",
    ]  # fmt: skip
    assert result.text.splitlines() == [
        "What kind of car does a sheep drive? A Lamborghini!",
        "Why don't you see penguins in Great Britain? Because they're afraid of Wales!",
        "What happened when the wheel was invented? It caused a revolution!",
    ]
    calls = result.messages[2].tool_calls
    assert len({call.id for call in calls}) == 3, "three calls without ids are told apart inside tether"
    assert [part["functionResponse"].get("id") for part in server.bodies[1]["contents"][2]["parts"]] == [None] * 3
    assert [part["functionCall"].get("id") for part in server.bodies[1]["contents"][1]["parts"]] == [None] * 3
    assert [part["functionResponse"]["response"] for part in server.bodies[1]["contents"][2]["parts"]] == [
        {"ok": True, "result": "cars"},
        {"ok": True, "result": "penguins"},
        {"ok": True, "result": "cars"},
    ]
    first_answer = server.cassette.interactions[0].response_json()["candidates"][0]["content"]["parts"]
    # Only the first of parallel calls carries a signature; it goes back on that call, the others go without.
    assert [part.get("thoughtSignature") for part in server.bodies[1]["contents"][1]["parts"]] == [
        first_answer[0]["thoughtSignature"],
        None,
        None,
    ]
    assert server.bodies[0]["contents"] == [{"role": "user", "parts": [{"text": ""}]}]
    assert result.usage == Usage(
        input_tokens=83 + 348 + 415 + 546 + 679,
        output_tokens=30 + 190 + 10 + 40 + 10 + 105 + 10 + 106 + 65 + 235,
        reasoning_tokens=190 + 40 + 105 + 106 + 235,
        requests=5,
    )
    for sent, expected in zip(server.bodies, recorded, strict=True):
        assert essentials(sent) == essentials(expected)
    server.assert_all_served()


# --- thinking -----------------------------------------------------------------------------------------------


@tool
def dummy() -> None:
    return None


THOUGHTS_ON = ModelSettings(extra={"generationConfig": {"thinkingConfig": {"includeThoughts": True}}})


async def test_thought_parts_are_thinking_and_both_go_back_on_the_next_turn_with_the_text_signature(
    replay: Replayer,
) -> None:
    server = await replay.serve("google/test_google_model_thinking_part.yaml")
    agent = Agent(
        provider(server, stream=False), tools=[dummy], system="You are a helpful assistant.", settings=THOUGHTS_ON
    )
    events, first = await run_agent(agent, "How do I cross the street?")

    answers = [i.response_json()["candidates"][0]["content"]["parts"] for i in server.cassette.interactions]
    assert [line.split("(")[0] for line in compact(events)] == [
        "RunStarted",
        "TurnStarted",
        "ThinkingStarted",
        "Thinking",
        "ThinkingEnded",
        "Text",
        "TurnCompleted",
        "RunCompleted",
    ]  # fmt: skip  (the answer's text ends the thought)
    assert first.messages[-1].parts == (
        Thinking(answers[0][0]["text"], None, GEMINI),
        Text(answers[0][1]["text"], {"origin": "gemini", "thoughtSignature": answers[0][1]["thoughtSignature"]}),
    )
    assert first.usage == Usage(input_tokens=29, output_tokens=736 + 1001, reasoning_tokens=1001, requests=1)

    _, second = await run_agent(
        agent, "Considering the way to cross the street, analogously, how do I cross the river?", first.messages
    )
    assert second.text == answers[1][1]["text"]
    assert server.bodies[1]["contents"][1] == {
        "role": "model",
        "parts": [
            {"text": answers[0][0]["text"], "thought": True},
            {"text": answers[0][1]["text"], "thoughtSignature": answers[0][1]["thoughtSignature"]},
        ],
    }
    assert server.bodies[1]["generationConfig"] == {"thinkingConfig": {"includeThoughts": True}}
    for sent, recorded in zip(server.bodies, recorded_request_bodies(server.cassette), strict=True):
        assert essentials(sent) == essentials(recorded)
    server.assert_all_served()


async def test_streamed_thought_summaries_come_before_the_answer_as_thinking(replay: Replayer) -> None:
    server = await replay.serve("google/test_google_model_thinking_part_iter.yaml")
    agent = Agent(
        provider(server, stream=True), tools=[dummy], system="You are a helpful assistant.", settings=THOUGHTS_ON
    )
    events, result = await run_agent(agent, "How do I cross the street?")

    expected = recorded_turn(server.cassette.interactions[0])
    assert [line.split("(")[0] for line in compact(events)] == [
        "RunStarted",
        "TurnStarted",
        "ThinkingStarted",
        "Thinking*4",
        "ThinkingEnded",
        "Text*19",
        "TurnCompleted",
        "RunCompleted",
    ]  # fmt: skip  (four thought summaries make one block, ended by the answer's text)
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == expected.thinking
    assert result.text == expected.text
    assert expected.thinking.startswith("**Clarifying User Goals**")
    thinking, text = result.messages[-1].parts
    assert isinstance(thinking, Thinking)
    assert (thinking.signature, thinking.provider_data) == (None, GEMINI)
    assert isinstance(text, Text)
    assert text.provider_data is not None
    assert text.provider_data["thoughtSignature"].startswith("CiIB0e2Kb6Syj1a961EfbWv4W5C8RgAA/hGleV9VYJtnJFh4")
    assert result.usage == Usage(input_tokens=34, output_tokens=469 + 787, reasoning_tokens=787, requests=1)
    assert essentials(server.bodies[0]) == essentials(recorded_request_bodies(server.cassette)[0])
    server.assert_all_served()


async def test_a_history_written_by_another_provider_continues_without_its_thinking(replay: Replayer) -> None:
    """A conversation started elsewhere (Anthropic thinking with its signature) continues on Gemini: the
    foreign thinking is not sent, the text is."""
    server = await replay.serve("google/test_google_model.yaml")
    history = (
        Message.user("Hi"),
        Message("assistant", (Thinking("Greet back.", "anthropic-signature", {"origin": "anthropic"}), Text("Hello."))),
    )
    _, result = await run_agent(Agent(provider(server, stream=False), system="You are a chatbot."), "Hello!", history)
    assert result.text == "Hello! How can I help you today?"
    assert server.bodies[0]["contents"] == [
        {"role": "user", "parts": [{"text": "Hi"}]},
        {"role": "model", "parts": [{"text": "Hello."}]},
        {"role": "user", "parts": [{"text": "Hello!"}]},
    ]
    assert parts_of(result.messages[2]) == ["Thinking('Greet back.')", "Text('Hello.')"]  # kept in the transcript


DEDICATED = {
    "google/test_google_instructions_only_with_tool_calls.yaml",
    "google/test_google_model.yaml",
    "google/test_google_model_iter_stream.yaml",
    "google/test_google_model_retry.yaml",
    "google/test_google_model_stream.yaml",
    "google/test_google_model_thinking_part.yaml",
    "google/test_google_model_thinking_part_iter.yaml",
    "google/test_google_streaming_tool_call_thought_signature.yaml",
    "google/test_model_name_suggestion[google].yaml",
}
"""The cassettes with a dedicated test above."""
