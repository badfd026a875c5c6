"""Typed output on the four wire protocols (and Gemini's at Vertex AI), over real HTTP on 127.0.0.1, in each of
the three modes.

Request bodies are checked against each API reference: Chat Completions ``response_format`` (``json_schema`` with
``strict``, or ``json_object``), Responses ``text.format`` (``json_schema`` or ``json_object``), Anthropic
``output_config.format`` (``json_schema``; JSON mode has no field there, the prompt alone asks), Gemini
``generationConfig`` (``responseMimeType: application/json`` and ``responseJsonSchema``). Answers are each API's
documented whole-answer forms (a message's text, or a function call), served by ``tests/wire/replay.py``'s server
from cassettes built here; the Chat Completions native answer is also replayed from a recording
(``openai_compatible/test_ollama_local_native_output_uses_json_schema.yaml``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from tests.providers.vertex_servers import fixed_credentials
from tests.wire import replay as wire
from tests.wire.replay import Cassette, Interaction, Replayer, ReplayServer
from tether import Agent, Limits, StopReason
from tether.errors import InvalidOutput
from tether.providers.anthropic import AnthropicProvider
from tether.providers.base import Provider
from tether.providers.bedrock import BedrockProvider
from tether.providers.gemini import GeminiProvider
from tether.providers.http import RetryPolicy
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.openai_responses import OpenAIResponsesProvider
from tether.providers.registry import PROFILES
from tether.providers.vertex import VertexProvider

replay = wire.replay
NO_RETRY = RetryPolicy(max_retries=0)
VERTEX_ROOT = "/v1/projects/p/locations/us-central1/publishers/google"


class CityLocation(BaseModel):
    city: str
    country: str


class Weather(BaseModel):
    city: str
    celsius: float


SCHEMA = {
    "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
    "required": ["city", "country"],
    "type": "object",
}
STRICT = {**SCHEMA, "additionalProperties": False}
VALID = {"city": "Paris", "country": "France"}
INVALID = {"city": "Paris"}


# --- each API's answers, as its reference documents them ----------------------------------------------------


def chat_text(text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 8, "total_tokens": 28},
    }  # fmt: skip


def chat_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return {**chat_text(""), "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}


def responses_text(text: str) -> dict[str, Any]:
    content = [{"type": "output_text", "text": text, "annotations": []}]
    item = {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant", "content": content}
    return {
        "id": "resp_1", "object": "response", "status": "completed", "model": "gpt-4o", "output": [item],
        "usage": {"input_tokens": 20, "output_tokens": 8, "total_tokens": 28},
    }  # fmt: skip


def responses_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    item = {
        "type": "function_call", "id": "fc_1", "call_id": "call_1", "name": name,
        "arguments": json.dumps(arguments), "status": "completed",
    }  # fmt: skip
    return {**responses_text(""), "output": [item]}


def anthropic_text(text: str) -> dict[str, Any]:
    return {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 20, "output_tokens": 8},
    }  # fmt: skip


def anthropic_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    block = {"type": "tool_use", "id": "toolu_1", "name": name, "input": arguments}
    return {**anthropic_text(""), "content": [block], "stop_reason": "tool_use"}


def gemini_text(text: str) -> dict[str, Any]:
    return {
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 8, "totalTokenCount": 28},
        "modelVersion": "gemini-2.5-flash",
    }


def gemini_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    part = {"functionCall": {"name": name, "args": arguments}}
    return {**gemini_text(""), "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}]}


def bedrock_text(text: str) -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}}, "stopReason": "end_turn",
        "usage": {"inputTokens": 20, "outputTokens": 8, "totalTokens": 28},
    }  # fmt: skip


def bedrock_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    block = {"toolUse": {"toolUseId": "tooluse_1", "name": name, "input": arguments}}
    return {
        **bedrock_text(""),
        "output": {"message": {"role": "assistant", "content": [block]}},
        "stopReason": "tool_use",
    }


class Protocol:
    """One wire protocol: its endpoint, its answers, its provider, and where its body asks for the output."""

    def __init__(
        self,
        name: str,
        path: str,
        text: Callable[[str], dict[str, Any]],
        call: Callable[[str, dict[str, Any]], dict[str, Any]],
        provider: Callable[[str], Provider],
        native: Callable[[dict[str, Any]], Any],
        prompted: Callable[[dict[str, Any]], Any],
        system: Callable[[dict[str, Any]], str],
        tool_names: Callable[[dict[str, Any]], list[str]],
    ) -> None:
        self.name, self.path, self.text, self.call, self.provider = name, path, text, call, provider
        self.native, self.prompted, self.system, self.tool_names = native, prompted, system, tool_names


PROTOCOLS = [
    Protocol(
        "openai-chat", "/v1/chat/completions", chat_text, chat_call,
        lambda url: OpenAIChatProvider("gpt-4o", base_url=f"{url}/v1", api_key="k", stream=False, retry=NO_RETRY),
        native=lambda body: body["response_format"],
        prompted=lambda body: body["response_format"],
        system=lambda body: body["messages"][0]["content"],
        tool_names=lambda body: [t["function"]["name"] for t in body.get("tools", [])],
    ),
    Protocol(
        "openai-responses", "/v1/responses", responses_text, responses_call,
        lambda url: OpenAIResponsesProvider("gpt-4o", base_url=f"{url}/v1", api_key="k", stream=False, retry=NO_RETRY),
        native=lambda body: body["text"],
        prompted=lambda body: body["text"],
        system=lambda body: body["instructions"],
        tool_names=lambda body: [t["name"] for t in body.get("tools", [])],
    ),
    Protocol(
        "anthropic", "/v1/messages", anthropic_text, anthropic_call,
        lambda url: AnthropicProvider(
            "claude-sonnet-4-5", base_url=f"{url}/v1", api_key="k", stream=False, retry=NO_RETRY, prompt_cache="off"
        ),
        native=lambda body: body["output_config"],
        prompted=lambda body: body.get("output_config"),
        system=lambda body: body["system"],
        tool_names=lambda body: [t["name"] for t in body.get("tools", [])],
    ),
    Protocol(
        "gemini", "/v1beta/models/gemini-2.5-flash:generateContent", gemini_text, gemini_call,
        lambda url: GeminiProvider(
            "gemini-2.5-flash", base_url=f"{url}/v1beta", api_key="k", stream=False, retry=NO_RETRY
        ),
        native=lambda body: body["generationConfig"],
        prompted=lambda body: body["generationConfig"],
        system=lambda body: body["systemInstruction"]["parts"][0]["text"],
        tool_names=lambda body: [d["name"] for t in body.get("tools", []) for d in t["functionDeclarations"]],
    ),
    Protocol(
        "bedrock", "/model/amazon.nova-pro-v1/converse", bedrock_text, bedrock_call,
        lambda url: BedrockProvider(
            "amazon.nova-pro-v1", region="us-east-1", base_url=url, api_key="k", environ={}, stream=False,
            retry=NO_RETRY,
        ),
        native=lambda body: body["outputConfig"],
        prompted=lambda body: body.get("outputConfig"),
        system=lambda body: body["system"][0]["text"],
        tool_names=lambda body: [t["toolSpec"]["name"] for t in body.get("toolConfig", {}).get("tools", [])],
    ),
    Protocol(  # Gemini's protocol at Vertex AI's route, with a bearer token
        "vertex", f"{VERTEX_ROOT}/models/gemini-2.5-flash:generateContent", gemini_text, gemini_call,
        lambda url: VertexProvider(
            "gemini-2.5-flash", project="p", location="us-central1", base_url=url,
            credentials=fixed_credentials(), stream=False, retry=NO_RETRY,
        ),
        native=lambda body: body["generationConfig"],
        prompted=lambda body: body["generationConfig"],
        system=lambda body: body["systemInstruction"]["parts"][0]["text"],
        tool_names=lambda body: [d["name"] for t in body.get("tools", []) for d in t["functionDeclarations"]],
    ),
]  # fmt: skip

NATIVE_FORMS = {
    "openai-chat": {"type": "json_schema", "json_schema": {"name": "CityLocation", "schema": STRICT, "strict": True}},
    "openai-responses": {"format": {"type": "json_schema", "name": "CityLocation", "schema": STRICT, "strict": True}},
    "anthropic": {"format": {"type": "json_schema", "schema": STRICT}},
    "gemini": {"responseMimeType": "application/json", "responseJsonSchema": STRICT},
    "bedrock": {"textFormat": {"type": "json_schema", "structure": {"jsonSchema": {
        "schema": json.dumps(STRICT, separators=(",", ":")), "name": "CityLocation"}}}},
    "vertex": {"responseMimeType": "application/json", "responseJsonSchema": STRICT},
}  # fmt: skip
PROMPTED_FORMS = {
    "openai-chat": {"type": "json_object"},
    "openai-responses": {"format": {"type": "json_object"}},
    "anthropic": None,
    "gemini": {"responseMimeType": "application/json"},
    "bedrock": None,
    "vertex": {"responseMimeType": "application/json"},
}


async def serve(replayer: Replayer, protocol: Protocol, answers: list[dict[str, Any]]) -> ReplayServer:
    headers = (("content-type", "application/json"),)
    interactions = tuple(
        Interaction("POST", f"http://127.0.0.1{protocol.path}", None, 200, "OK", headers, json.dumps(answer).encode())
        for answer in answers
    )
    return await replayer.serve(Cassette(f"{protocol.name}-output", interactions))


def ids(protocols: list[Protocol]) -> list[str]:
    return [p.name for p in protocols]


# --- the three modes ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=ids(PROTOCOLS))
async def test_tool_mode_retries_an_invalid_call_and_ends_with_the_valid_one(
    replay: Replayer, protocol: Protocol
) -> None:
    server = await serve(
        replay, protocol, [protocol.call("final_result", INVALID), protocol.call("final_result", VALID)]
    )
    agent = Agent(protocol.provider(server.url), output_type=CityLocation, output_mode="tool")
    result = await agent.run("What is the capital of France?")
    assert result.stop_reason == StopReason.COMPLETE, result.detail
    assert result.output == CityLocation(city="Paris", country="France")
    first, second = (request.body for request in server.requests)
    assert protocol.tool_names(first) == ["final_result"]
    assert "country: required field is missing" in json.dumps(second), "the errors went back to the model"


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=ids(PROTOCOLS))
async def test_native_mode_sends_the_schema_as_the_api_documents_and_retries(
    replay: Replayer, protocol: Protocol
) -> None:
    server = await serve(replay, protocol, [protocol.text(json.dumps(INVALID)), protocol.text(json.dumps(VALID))])
    agent = Agent(protocol.provider(server.url), output_type=CityLocation, output_mode="native")
    result = await agent.run("What is the capital of France?")
    assert result.output == CityLocation(city="Paris", country="France"), result.detail
    first, second = (request.body for request in server.requests)
    assert protocol.native(first) == NATIVE_FORMS[protocol.name]
    assert protocol.tool_names(first) == [], "no output tool in native mode"
    assert "country: required field is missing" in json.dumps(second)


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=ids(PROTOCOLS))
async def test_prompted_mode_puts_the_schema_in_the_instructions_with_json_mode(
    replay: Replayer, protocol: Protocol
) -> None:
    server = await serve(replay, protocol, [protocol.text(f"```json\n{json.dumps(VALID)}\n```")])
    agent = Agent(
        protocol.provider(server.url), system="Answer briefly.", output_type=CityLocation, output_mode="prompted"
    )
    result = await agent.run("What is the capital of France?")
    assert result.output == CityLocation(city="Paris", country="France"), result.detail
    [body] = (request.body for request in server.requests)
    assert protocol.prompted(body) == PROMPTED_FORMS[protocol.name]
    system = protocol.system(body)
    assert system.startswith("Answer briefly.\n\nGive your final answer as one JSON object")
    assert '"required": ["city", "country"]' in system


# --- unions and giving up -----------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=ids(PROTOCOLS))
async def test_a_union_is_offered_as_one_output_tool_per_member(replay: Replayer, protocol: Protocol) -> None:
    server = await serve(replay, protocol, [protocol.call("final_result_Weather", {"city": "Oslo", "celsius": -3})])
    agent: Agent[None, CityLocation | Weather] = Agent(
        protocol.provider(server.url), output_type=[CityLocation, Weather]
    )
    result = await agent.run("Weather in Oslo?")
    assert result.output == Weather(city="Oslo", celsius=-3)
    [body] = (request.body for request in server.requests)
    assert protocol.tool_names(body) == ["final_result_CityLocation", "final_result_Weather"]


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=ids(PROTOCOLS))
async def test_invalid_output_after_the_retries_carries_the_last_answer(replay: Replayer, protocol: Protocol) -> None:
    server = await serve(replay, protocol, [protocol.text("Paris, I think."), protocol.text(json.dumps(INVALID))])
    agent = Agent(
        protocol.provider(server.url), output_type=CityLocation, output_mode="native", limits=Limits(output_retries=1)
    )
    result = await agent.run("What is the capital of France?")
    assert result.stop_reason == StopReason.INVALID_OUTPUT
    assert result.output is None
    assert result.text == json.dumps(INVALID)
    assert isinstance(result.error, InvalidOutput)
    assert result.error.errors == ("country: required field is missing",)


async def test_a_recorded_native_answer_from_an_openai_compatible_server(replay: Replayer) -> None:
    server = await replay.serve("openai_compatible/test_ollama_local_native_output_uses_json_schema.yaml")
    provider = OpenAIChatProvider(
        "qwen3:0.6b", profile=PROFILES["ollama"], base_url=f"{server.url}/v1", stream=False, retry=NO_RETRY
    )
    result = await Agent(provider, output_type=CityLocation, output_mode="native").run("What is the capital of France?")
    assert result.output == CityLocation(city="Paris", country="France")
    [body] = (request.body for request in server.requests)
    recorded: dict[str, Any] = server.cassette.interactions[0].request_body["response_format"]
    assert recorded["type"] == "json_schema"
    assert recorded["json_schema"]["name"] == "CityLocation", "the recorded request asked as ours does"
    assert body["response_format"] == NATIVE_FORMS["openai-chat"]
