"""Recorded OpenAI Chat Completions traffic, replayed over loopback HTTP through our provider and our Agent.

Every cassette of ``tests/fixtures/wire/openai_chat/`` and ``openai_compatible/`` (real answers of OpenAI,
Gemini's OpenAI endpoint, DeepSeek, Ollama, Groq and OpenRouter, recorded by pydantic-ai) is served by
``tests/wire/replay.py``. Two kinds of tests:

* generic tests replay every recorded request of every cassette through ``OpenAIChatProvider`` and check
  the events against a plain reading of the recorded answer (``tests/wire/openai_chat.py``) and the body we
  send against the recorded one; again with streams cut into 1-byte reads, and with whole answers sent to
  requests that asked for a stream;
* one test (or more) per cassette pins the behaviour the recording exists for, with a compact snapshot of the
  events and of the ``RunResult``: conversations with tool calls run through ``Agent`` with real tools.

The replay server answers with the recording whatever we send, so every test also asserts what we sent.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.wire import replay as wire
from tests.wire.events import Call, Streamed, collect, compact, parts_of, run_agent, shape, streamed
from tests.wire.openai_chat import essentials, messages_essentials, recorded_turn, request_from
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
from tether.errors import ProviderError, RateLimited, ToolError
from tether.events import TextDelta, ToolCallStart
from tether.messages import Message, Thinking
from tether.providers.base import ModelSettings, Request, ToolDefinition
from tether.providers.http import RetryPolicy
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.registry import PROFILES
from tether.tools.base import Done, Tool, tool
from tether.usage import Usage

replay = wire.replay
"""The replay fixture (assigned, not imported, so that ruff does not read the test parameters as redefinitions)."""

FOLDERS = ("openai_chat", "openai_compatible")
CASSETTES = [name for folder in FOLDERS for name in cassette_files(folder)]

NO_RETRY = RetryPolicy(max_retries=0)
"""Each request is answered once: a retry would take the next recorded interaction, and the 599 of an
unexpected request would be retried after real back-off waits."""
RETRY_AT_ONCE = RetryPolicy(max_retries=2, base_delay=0.0, max_delay=0.0)
"""Retries without waiting, to show which failures are retried: a retry takes the next recorded interaction
for the path, or gets the replay server's 599 when there is none."""

PROFILE_BY_HOST = {
    "api.openai.com": "openai",
    "api.deepseek.com": "deepseek",
    "ollama.com": "ollama",
    "localhost:11434": "ollama",
    "generativelanguage.googleapis.com": "openai-compatible",
    "api.groq.com": "groq",
    "openrouter.ai": "openrouter",
}
"""The profile for the server each cassette was recorded against."""

ERROR_CODES = {400: "bad_request", 404: "bad_request", 429: "rate_limited"}
GENERATED_ID = re.compile(r"call_[0-9a-f]{24}")


# --- helpers ------------------------------------------------------------------------------------------------


def prefix_key(system: str = "", *tools: str) -> str:
    """The ``prompt_cache_key`` of a run without a session: a digest of its system prompt and tools' names."""
    digest = hashlib.sha256(system.encode())
    for name in tools:
        digest.update(b"\0" + name.encode())
    return "tether-" + digest.hexdigest()[:32]


def provider(server: ReplayServer, *, stream: bool, retry: RetryPolicy = NO_RETRY) -> OpenAIChatProvider:
    """``OpenAIChatProvider`` with the profile of the server the cassette was recorded against and its model,
    pointed at the replay server."""
    first = server.cassette.interactions[0]
    profile = PROFILES[PROFILE_BY_HOST[urlsplit(first.uri).netloc]]
    model = first.request_body["model"]
    return OpenAIChatProvider(
        model, profile=profile, base_url=server.base_url, api_key="test-key", stream=stream, retry=retry
    )


# --- every cassette, every interaction ------------------------------------------------------------------------


def test_the_replay_tests_cover_exactly_the_copied_cassettes() -> None:
    """A cassette added to the folders must get a dedicated test here (the generic one runs on it already)."""
    assert set(CASSETTES) == DEDICATED


def in_recorded_terms(got: Streamed, expected: Streamed) -> Streamed:
    """Our turn written as :func:`recorded_turn` reads the recording: a generated id where the server sent an
    empty one becomes ``""``, and cached prompt tokens count as input again (tether's ``input_tokens``
    excludes them, the recorded ``prompt_tokens`` includes them)."""
    assert len(got.calls) == len(expected.calls), (got.calls, expected.calls)
    calls = tuple(
        Call("" if not want.id and GENERATED_ID.fullmatch(call.id) else call.id, call.name, call.arguments)
        for call, want in zip(got.calls, expected.calls, strict=True)
    )
    usage = Usage(
        input_tokens=got.usage.input_tokens + got.usage.cache_read_tokens,
        output_tokens=got.usage.output_tokens,
        reasoning_tokens=got.usage.reasoning_tokens,
    )
    return Streamed(got.model, got.text, got.thinking, calls, got.finish, usage, got.shape)


@pytest.mark.parametrize("name", CASSETTES)
async def test_every_recorded_answer_decodes_as_recorded_and_every_request_is_encoded_as_recorded(
    replay: Replayer, name: str
) -> None:
    server = await replay.serve(name)
    for index, interaction in enumerate(server.cassette.interactions):
        recorded = interaction.request_body
        request = request_from(recorded)
        chat_provider = provider(server, stream=bool(recorded.get("stream")))
        if interaction.status >= 400:
            with pytest.raises(ProviderError) as caught:
                await collect(chat_provider, request)
            assert caught.value.code == ERROR_CODES[interaction.status]
            assert caught.value.status == interaction.status
            assert (caught.value.provider_message or "").startswith(interaction.response_json()["error"]["message"])
        else:
            expected = recorded_turn(interaction)
            assert in_recorded_terms(streamed(await collect(chat_provider, request)), expected) == expected
        assert essentials(server.requests[index].body) == essentials(recorded)
        assert server.requests[index].headers["authorization"] == "Bearer test-key"
    server.assert_all_served()


STREAMED = streamed_cassettes(CASSETTES)
WHOLE = whole_cassettes(CASSETTES)


@pytest.mark.parametrize("name", STREAMED)
async def test_a_recorded_stream_sent_one_byte_at_a_time_decodes_the_same(replay: Replayer, name: str) -> None:
    """Lines, events, JSON and multi-byte characters (DeepSeek's emoji) split across reads change nothing."""
    server = await replay.serve(name, chunk_size=1)
    for interaction in server.cassette.interactions:
        request = request_from(interaction.request_body)
        expected = recorded_turn(interaction)
        assert in_recorded_terms(streamed(await collect(provider(server, stream=True), request)), expected) == expected
    server.assert_all_served()


@pytest.mark.parametrize("name", WHOLE)
async def test_a_whole_answer_to_a_streamed_request_is_read_as_one_chunk(replay: Replayer, name: str) -> None:
    """A server that ignores ``stream: true`` and answers with one JSON completion (the recorded ones) is
    read the same as when we asked for a whole answer."""
    server = await replay.serve(name)
    for interaction in server.cassette.interactions:
        request = request_from(interaction.request_body)
        expected = recorded_turn(interaction)
        assert in_recorded_terms(streamed(await collect(provider(server, stream=True), request)), expected) == expected
    assert all(body["stream"] is True for body in server.bodies)
    server.assert_all_served()


# --- openai_chat ---------------------------------------------------------------------------------------------


async def test_a_whole_text_answer_gives_its_text_stop_and_usage(replay: Replayer) -> None:
    server = await replay.serve("openai_chat/test_openai_instructions.yaml")
    agent = Agent(provider(server, stream=False), system="You are a helpful assistant.")
    events, result = await run_agent(agent, "What is the capital of France?")

    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "Text('The capital of France is Paris.')",
        "TurnCompleted(1)",
        "RunCompleted(complete)",
    ]
    assert (result.text, result.stop_reason, result.turns) == ("The capital of France is Paris.", "complete", 1)
    assert result.usage == Usage(input_tokens=24, output_tokens=8, requests=1)
    (sent,) = server.bodies
    assert sent == {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "What is the capital of France?"},
        ],
        "stream": False,
        "prompt_cache_key": prefix_key("You are a helpful assistant."),
    }
    # pydantic-ai also sent "n": 1, the server's default, and no cache key; nothing else differs.
    recorded = {k: v for k, v in recorded_request_bodies(server.cassette)[0].items() if k != "n"}
    assert {**recorded, "prompt_cache_key": prefix_key("You are a helpful assistant.")} == sent


async def test_a_streamed_answer_reads_usage_from_the_final_usage_only_chunk(replay: Replayer) -> None:
    server = await replay.serve("openai_chat/test_dbos_agent_run_stream.yaml")
    events = await collect(provider(server, stream=True), Request((Message.user("What is the capital of Mexico?"),)))

    got = streamed(events)
    assert got.shape == "start text*8 end"  # the first chunk's empty content gives no event
    assert [e.text for e in events if isinstance(e, TextDelta)] == [
        "The", " capital", " of", " Mexico", " is", " Mexico", " City", ".",
    ]  # fmt: skip
    assert (got.model, got.finish, got.calls) == ("gpt-4o-2024-08-06", "stop", ())
    # The finish_reason chunk has "usage": null; the numbers come from the next chunk, with "choices": [].
    assert got.usage == Usage(input_tokens=14, output_tokens=8)
    assert essentials(server.bodies[0]) == essentials(recorded_request_bodies(server.cassette)[0])
    assert server.bodies[0]["stream_options"] == {"include_usage": True}


async def test_parallel_whole_tool_calls_run_in_model_order_and_their_results_go_back_in_that_order(
    replay: Replayer, tmp_path: Path
) -> None:
    server = await replay.serve("openai_chat/test_dbos_agent_with_hitl_tool.yaml")
    (tmp_path / ".env").write_text("SECRET=1")

    @tool
    def create_file(path: str) -> str:
        (tmp_path / path).write_text("")
        return "Success"

    @tool
    def delete_file(path: str) -> bool:
        (tmp_path / path).unlink()
        return True

    agent = Agent(
        provider(server, stream=False),
        tools=[create_file, delete_file],
        system="Just call tools without asking for confirmation.",
    )
    events, result = await run_agent(agent, "Delete the file `.env` and create `test.txt`")

    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "TurnCompleted(1)",
        "ToolCall(delete_file)",
        "ToolResult(delete_file -> true)",
        "ToolCall(create_file)",
        "ToolResult(create_file -> Success)",
        "TurnStarted(2)",
        "Text('The file `.env` has been deleted and `test.txt` has been created successfully.')",
        "TurnCompleted(2)",
        "RunCompleted(complete)",
    ]
    assert not (tmp_path / ".env").exists()
    assert (tmp_path / "test.txt").exists()
    assert [parts_of(m) for m in result.messages[2:4]] == [
        [
            "ToolCall(call_jYdIdRZHxZTn5bWCq5jlMrJi, delete_file, {'path': '.env'})",
            "ToolCall(call_TmlTVWQbzrXCZ4jNsCVNbNqu, create_file, {'path': 'test.txt'})",
        ],
        ["ToolResult(call_jYdIdRZHxZTn5bWCq5jlMrJi, 'true')", "ToolResult(call_TmlTVWQbzrXCZ4jNsCVNbNqu, 'Success')"],
    ]
    assert result.usage == Usage(input_tokens=71 + 133, output_tokens=46 + 19, requests=2)
    # Our tools produce what pydantic-ai's did, so both requests match the recording in every field that
    # matters, tool definitions and the tool results' text and order included.
    for sent, recorded in zip(server.bodies, recorded_request_bodies(server.cassette), strict=True):
        assert essentials(sent) == essentials(recorded)
    server.assert_all_served()


async def test_a_tool_error_goes_back_to_the_model_which_calls_again_with_corrected_arguments(
    replay: Replayer,
) -> None:
    server = await replay.serve("openai_chat/test_dbos_agent_with_model_retry.yaml")

    @tool
    def get_weather_in_city(city: str) -> str:
        if city != "Mexico City":
            raise ToolError("Did you mean Mexico City?")
        return "sunny"

    agent = Agent(provider(server, stream=False), tools=[get_weather_in_city])
    events, result = await run_agent(agent, "What is the weather in CDMX?")

    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "TurnCompleted(1)",
        "ToolCall(get_weather_in_city)",
        "ToolResult(get_weather_in_city -> error:tool_failed)",
        "TurnStarted(2)",
        "TurnCompleted(2)",
        "ToolCall(get_weather_in_city)",
        "ToolResult(get_weather_in_city -> sunny)",
        "TurnStarted(3)",
        "Text('The weather in Mexico City is currently sunny.')",
        "TurnCompleted(3)",
        "RunCompleted(complete)",
    ]
    assert (result.text, result.stop_reason, result.turns) == (
        "The weather in Mexico City is currently sunny.",
        "complete",
        3,
    )
    assert result.usage == Usage(input_tokens=47 + 87 + 116, output_tokens=17 + 17 + 10, requests=3)
    second, third = server.bodies[1], server.bodies[2]
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_fFAB8MNL3tUdfNIIdsIJTo0H",
        "content": "Did you mean Mexico City?",
    }
    assert third["messages"][-2]["tool_calls"][0]["id"] == "call_hLYHO5lK5lmiukTZv6VQzz3x"
    assert third["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_hLYHO5lK5lmiukTZv6VQzz3x",
        "content": "sunny",
    }
    server.assert_all_served()


async def test_an_unknown_model_404_is_bad_request_with_the_providers_message_and_status(replay: Replayer) -> None:
    server = await replay.serve("openai_chat/test_model_name_suggestion[openai-chat].yaml")
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
    assert (error.code, error.status) == ("bad_request", 404)
    assert error.provider_message == "The model `gpt-5.2-proo` does not exist or you do not have access to it."
    assert error.details == {"provider_code": "model_not_found"}
    assert result.usage == Usage(requests=1)
    assert len(server.requests) == 1  # a 404 is not retried, even when retries are allowed
    assert server.bodies[0] == {
        "model": "gpt-5.2-proo",
        "messages": [{"role": "user", "content": "hello"}],
        "stream": False,
        "prompt_cache_key": prefix_key(),
    }


async def test_a_single_tool_call_round_trip_keeps_the_system_prompt_on_every_request(replay: Replayer) -> None:
    server = await replay.serve("openai_chat/test_openai_instructions_with_tool_calls_keep_instructions.yaml")

    @tool
    def get_temperature(city: str) -> float:
        return {"Tokyo": 20.0}[city]

    agent = Agent(provider(server, stream=False), tools=[get_temperature], system="You are a helpful assistant.")
    events, result = await run_agent(agent, "What is the temperature in Tokyo?")

    assert compact(events)[2:6] == [
        "TurnCompleted(1)",
        "ToolCall(get_temperature)",
        "ToolResult(get_temperature -> 20.0)",
        "TurnStarted(2)",
    ]
    assert result.text == "The temperature in Tokyo is currently 20.0 degrees Celsius."
    assert result.usage == Usage(input_tokens=50 + 75, output_tokens=15 + 15, requests=2)
    for sent, recorded in zip(server.bodies, recorded_request_bodies(server.cassette), strict=True):
        assert sent["messages"][0] == {"role": "system", "content": "You are a helpful assistant."}
        assert essentials(sent) == essentials(recorded)
    server.assert_all_served()


async def test_o1_mini_rejecting_the_system_role_is_bad_request_and_the_run_reports_it(replay: Replayer) -> None:
    server = await replay.serve("openai_chat/test_openai_o1_mini_system_role[system].yaml")
    agent = Agent(provider(server, stream=False, retry=RETRY_AT_ONCE), system="You are a helpful assistant.")
    events, result = await run_agent(agent, "Hello")

    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "TurnCompleted(1 rejected)",
        "CallFailed(1 bad_request -> stop)",
        "RunCompleted(error)",
    ]
    assert result.stop_reason == "error"
    assert result.degraded
    error = result.error
    assert isinstance(error, ProviderError)
    assert (error.code, error.status) == ("bad_request", 400)
    assert error.provider_message == "Unsupported value: 'messages[0].role' does not support 'system' with this model."
    assert error.details == {"provider_code": "unsupported_value"}
    assert "Unsupported value" in result.detail
    assert server.bodies[0]["messages"][0] == {"role": "system", "content": "You are a helpful assistant."}
    assert len(server.requests) == 1  # a 400 is not retried


async def test_a_streamed_tool_call_in_argument_fragments_then_a_streamed_answer(replay: Replayer) -> None:
    server = await replay.serve("openai_chat/test_run_stream_sync_streams_real_model.yaml")

    @tool
    def get_capital(country: str) -> str:
        return {"UK": "London"}[country]

    agent = Agent(provider(server, stream=True), tools=[get_capital])
    events, result = await run_agent(agent, "What is the capital of the UK? Use the tool, then answer.")

    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "TurnCompleted(1)",
        "ToolCall(get_capital)",
        "ToolResult(get_capital -> London)",
        "TurnStarted(2)",
        "Text*8('The capital of the UK is London.')",
        "TurnCompleted(2)",
        "RunCompleted(complete)",
    ]
    assert parts_of(result.messages[1]) == ["ToolCall(call_ZR5UUuTt3pf61kjwAJIYdVMj, get_capital, {'country': 'UK'})"]
    assert result.messages[1].tool_calls[0].raw_arguments == '{"country":"UK"}'
    assert result.usage == Usage(input_tokens=53 + 78, output_tokens=15 + 9, requests=2)
    assert server.bodies[1]["messages"][1:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_ZR5UUuTt3pf61kjwAJIYdVMj",
                    "type": "function",
                    "function": {"name": "get_capital", "arguments": '{"country":"UK"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_ZR5UUuTt3pf61kjwAJIYdVMj", "content": "London"},
    ]
    server.assert_all_served()


# --- the complex run: parallel streamed calls, a forced tool choice, a final-result tool ------------------------


def complex_agent_tools() -> list[Tool]:
    @tool
    def get_country() -> str:
        return "Mexico"

    @tool
    def get_product_name() -> str:
        return "Pydantic AI"

    @tool
    def get_weather(city: str) -> str:
        return "sunny" if city == "Mexico City" else "unknown"

    schema = recorded_request_bodies("openai_chat/test_complex_agent_run.yaml")[0]["tools"][-1]["function"]

    def final_result(arguments: dict[str, Any]) -> None:
        raise Done("\n".join(f"{answer['label']}: {answer['answer']}" for answer in arguments["answers"]))

    done = Tool.from_schema("final_result", schema["description"], schema["parameters"], final_result)
    return [get_weather, get_country, get_product_name, done]


COMPLEX_FINAL = (
    "Capital: The capital of Mexico is Mexico City.\n"
    "Weather: The weather in Mexico City is currently sunny.\n"
    "Product Name: The product name is Pydantic AI."
)


async def test_two_tool_calls_streamed_by_index_are_assembled_and_run_then_a_done_tool_ends_the_run(
    replay: Replayer,
) -> None:
    server = await replay.serve("openai_chat/test_complex_agent_run.yaml")
    # The recording forced a tool call on every turn; the Agent sends "auto", so the setting overrides it.
    agent = Agent(
        provider(server, stream=True),
        tools=complex_agent_tools(),
        settings=ModelSettings(extra={"tool_choice": "required"}),
    )
    events, result = await run_agent(agent, "Tell me: the capital of the country; the weather there; the product name")

    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "TurnCompleted(1)",
        "ToolCall(get_country)",
        "ToolResult(get_country -> Mexico)",
        "ToolCall(get_product_name)",
        "ToolResult(get_product_name -> Pydantic AI)",
        "TurnStarted(2)",
        "TurnCompleted(2)",
        "ToolCall(get_weather)",
        "ToolResult(get_weather -> sunny)",
        "TurnStarted(3)",
        "TurnCompleted(3)",
        "ToolCall(final_result)",
        f"ToolResult(final_result -> {COMPLEX_FINAL})",
        "RunCompleted(done_tool)",
    ]
    assert (result.text, result.stop_reason, result.turns) == (COMPLEX_FINAL, "done_tool", 3)
    assert parts_of(result.messages[1]) == [
        "ToolCall(call_q2UyBRP7eXNTzAoR8lEhjc9Z, get_country, {})",
        "ToolCall(call_b51ijcpFkDiTQG1bQzsrmtW5, get_product_name, {})",
    ]
    final_call = result.messages[5].tool_calls[0]
    assert (final_call.id, final_call.name) == ("call_CCGIWaMeYWmxOQ91orkmTvzn", "final_result")
    assert final_call.arguments is not None
    assert [answer["label"] for answer in final_call.arguments["answers"]] == ["Capital", "Weather", "Product Name"]
    assert result.usage == Usage(input_tokens=364 + 423 + 448, output_tokens=40 + 15 + 62, requests=3)

    # The results went back after the assistant message that called them, in its order, under its ids:
    # the recorded conversation, message for message.
    recorded = recorded_request_bodies(server.cassette)
    for sent, expected in zip(server.bodies, recorded, strict=True):
        assert messages_essentials(sent) == messages_essentials(expected)
        assert (sent["stream"], sent["stream_options"], sent["tool_choice"]) == (
            True,
            {"include_usage": True},
            "required",
        )
    # Our agent offers 4 of the 19 recorded tools (the ones the model called); each is sent as defined.
    assert [t["function"]["name"] for t in server.bodies[0]["tools"]] == [
        "get_weather", "get_country", "get_product_name", "final_result",
    ]  # fmt: skip
    server.assert_all_served()


async def test_the_first_complex_turn_streams_both_calls_with_their_own_ids_and_indexes(replay: Replayer) -> None:
    server = await replay.serve("openai_chat/test_complex_agent_run.yaml")
    tools = tuple(ToolDefinition(t.name, t.description, t.parameters) for t in complex_agent_tools())
    request = Request((Message.user("Tell me"),), tools=tools, tool_choice="required")
    events = await collect(provider(server, stream=True), request)

    starts = [(e.id, e.name, e.index) for e in events if isinstance(e, ToolCallStart)]
    assert starts == [
        ("call_q2UyBRP7eXNTzAoR8lEhjc9Z", "get_country", 0),
        ("call_b51ijcpFkDiTQG1bQzsrmtW5", "get_product_name", 1),
    ]
    assert shape(events) == "start call-start call-delta call-start call-delta call-end*2 end"
    got = streamed(events)
    assert got.calls == (
        Call("call_q2UyBRP7eXNTzAoR8lEhjc9Z", "get_country", "{}"),
        Call("call_b51ijcpFkDiTQG1bQzsrmtW5", "get_product_name", "{}"),
    )
    assert (got.finish, got.usage) == ("tool_calls", Usage(input_tokens=364, output_tokens=40))


def interleaved(cassette: Cassette) -> Cassette:
    """The first interaction of the complex run with its two calls' chunks interleaved.

    The recording streams call 0 whole, then call 1, but the protocol lets chunks of several calls interleave;
    only ``index`` tells them apart (arguments chunks carry no id). Here call 1 starts before call 0's
    arguments arrive, and each call's arguments come in two pieces that alternate with the other call's.
    """
    first = cassette.interactions[0]
    lines = first.body.decode().split("\n\n")
    template = json.loads(lines[1].removeprefix("data: "))

    def chunk(call: dict[str, Any]) -> str:
        body = {**template, "choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": None}]}
        return "data: " + json.dumps(body)

    def start(index: int, call_id: str, name: str) -> str:
        return chunk({"index": index, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}})

    def piece(index: int, text: str) -> str:
        return chunk({"index": index, "function": {"arguments": text}})

    country, product = "call_q2UyBRP7eXNTzAoR8lEhjc9Z", "call_b51ijcpFkDiTQG1bQzsrmtW5"
    middle = [
        start(0, country, "get_country"),
        start(1, product, "get_weather"),
        piece(0, "{"),
        piece(1, '{"city": "Mex'),
        piece(0, "}"),
        piece(1, 'ico City"}'),
    ]
    body = "\n\n".join([lines[0], *middle, *lines[5:]]).encode()
    changed = Interaction(first.method, first.uri, first.request_body, first.status, first.reason, first.headers, body)
    return Cassette(cassette.name + " (interleaved)", (changed,))


async def test_tool_calls_whose_chunks_interleave_are_told_apart_by_index(replay: Replayer) -> None:
    cassette = interleaved(Cassette.load("openai_chat/test_complex_agent_run.yaml"))
    server = await replay.serve(cassette, chunk_size=50)
    events = await collect(provider(server, stream=True), Request((Message.user("Tell me"),)))

    assert shape(events) == "start call-start*2 call-delta*4 call-end*2 end"
    assert streamed(events).calls == (
        Call("call_q2UyBRP7eXNTzAoR8lEhjc9Z", "get_country", "{}"),
        Call("call_b51ijcpFkDiTQG1bQzsrmtW5", "get_weather", '{"city": "Mexico City"}'),
    )


# --- openai_compatible -------------------------------------------------------------------------------------------


async def test_tool_calls_with_an_empty_id_get_a_generated_id_that_their_results_answer(replay: Replayer) -> None:
    server = await replay.serve("openai_compatible/test_compatible_api_with_tool_calls_without_id.yaml")
    assert server.base_url.endswith("/v1beta/openai")

    @tool
    def get_current_time() -> str:
        """Get the current time."""
        return "Noon"

    agent = Agent(provider(server, stream=False), tools=[get_current_time])
    events, result = await run_agent(agent, "What is the current time?")

    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "TurnCompleted(1)",
        "ToolCall(get_current_time)",
        "ToolResult(get_current_time -> Noon)",
        "TurnStarted(2)",
        "Text('The current time is Noon.')",
        "TurnCompleted(2)",
        "RunCompleted(complete)",
    ]
    (call,) = result.messages[1].tool_calls
    assert GENERATED_ID.fullmatch(call.id), call.id
    assert result.messages[2].tool_results[0].call_id == call.id
    assistant, answer = server.bodies[1]["messages"][1:]
    assert assistant["tool_calls"][0]["id"] == call.id
    assert answer == {"role": "tool", "tool_call_id": call.id, "content": "Noon"}
    assert result.usage == Usage(input_tokens=35 + 66, output_tokens=12 + 6, requests=2)
    for sent, recorded in zip(server.bodies, recorded_request_bodies(server.cassette), strict=True):
        assert essentials(sent)["tools"] == essentials(recorded)["tools"]
    server.assert_all_served()


async def test_deepseek_reasoning_content_in_a_whole_answer_becomes_thinking(replay: Replayer) -> None:
    server = await replay.serve("openai_compatible/test_deepseek_model_thinking_part.yaml")
    assert server.base_url == server.url  # DeepSeek's API has no /v1 prefix
    (interaction,) = server.cassette.interactions
    message = interaction.response_json()["choices"][0]["message"]
    events, result = await run_agent(Agent(provider(server, stream=False)), "How do I cross the street?")

    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "ThinkingStarted",
        f"Thinking({message['reasoning_content']!r})",
        "ThinkingEnded",
        f"Text({message['content']!r})",
        "TurnCompleted(1)",
        "RunCompleted(complete)",
    ]
    assert parts_of(result.messages[-1]) == [
        "Thinking('Okay, the user is asking how to cross th')",
        "Text('Crossing the street safely involves care')",
    ]
    assert result.text == message["content"]
    assert result.usage == Usage(input_tokens=12, output_tokens=789, reasoning_tokens=415, requests=1)


async def test_minimax_sends_the_output_limit_in_the_field_its_api_reference_names(replay: Replayer) -> None:
    """MiniMax's reference deprecates ``max_tokens`` in favour of ``max_completion_tokens``; the field of its old
    ChatCompletion Pro API (``tokens_to_generate``) is not sent. The answer is DeepSeek's recording: any
    Chat Completions answer does, the request is what is checked."""
    server = await replay.serve("openai_compatible/test_deepseek_model_thinking_part.yaml")
    agent = Agent(
        "minimax:MiniMax-M2", base_url=server.base_url, api_key="test-key", settings=ModelSettings(max_tokens=300)
    )
    result = await agent.run("How do I cross the street?")

    assert result.stop_reason == "complete"
    (body,) = server.bodies
    assert body["max_completion_tokens"] == 300
    assert not {"max_tokens", "tokens_to_generate"} & set(body)
    assert body["model"] == "MiniMax-M2"
    assert server.requests[0].path == "/chat/completions"
    assert server.requests[0].headers["authorization"] == "Bearer test-key"


async def test_deepseek_streamed_reasoning_content_becomes_thinking_deltas_before_the_text(replay: Replayer) -> None:
    server = await replay.serve("openai_compatible/test_deepseek_model_thinking_stream.yaml", chunk_size=7)
    events, result = await run_agent(Agent(provider(server, stream=True)), "Hello")

    lines = compact(events)
    assert lines[:2] == ["RunStarted", "TurnStarted(1)"]
    assert lines[2] == "ThinkingStarted"
    assert lines[3].startswith('Thinking*198(\'Hmm, the user just said "Hello".')
    assert lines[4:] == [
        "ThinkingEnded",  # the first delta of the answer's text ends the reasoning
        "Text*11('Hello there! 😊 How can I help you today?')",
        "TurnCompleted(1)",
        "RunCompleted(complete)",
    ]
    thinking, _ = result.messages[-1].parts
    assert isinstance(thinking, Thinking)
    assert thinking.text.endswith("If they're just being polite, they might not reply further - and that's okay too.")
    assert result.text == "Hello there! 😊 How can I help you today?"
    # Usage and finish come in the same chunk as the last (empty) content delta.
    assert result.usage == Usage(input_tokens=6, output_tokens=212, reasoning_tokens=198, requests=1)
    assert server.bodies[0]["stream_options"] == {"include_usage": True}


async def test_ollama_reasoning_becomes_thinking_and_a_done_tool_answers_a_follow_up(replay: Replayer) -> None:
    server = await replay.serve("openai_compatible/test_ollama_cloud_tool_output.yaml")
    schema = recorded_request_bodies(server.cassette)[0]["tools"][0]["function"]
    answers: list[dict[str, Any]] = []

    def final_result(arguments: dict[str, Any]) -> None:
        answers.append(arguments)
        raise Done(f"{arguments['city']}, {arguments['country']}")

    tools = [Tool.from_schema("final_result", schema["description"], schema["parameters"], final_result)]
    agent = Agent(provider(server, stream=False), tools=tools)

    events, first = await run_agent(agent, "What is the capital of France?")
    reasoning = server.cassette.interactions[0].response_json()["choices"][0]["message"]["reasoning"]
    assert reasoning.startswith('We need to answer question: "What is the capital of France?"')
    assert compact(events)[2:6] == ["ThinkingStarted", f"Thinking({reasoning!r})", "ThinkingEnded", "Text('Paris.')"]
    assert parts_of(first.messages[-1]) == ["Thinking('We need to answer question: \"What is the')", "Text('Paris.')"]
    assert (first.text, first.stop_reason) == ("Paris.", "complete")

    # pydantic-ai wanted JSON and said so in a user message; a host continues the conversation the same way.
    follow_up = recorded_request_bodies(server.cassette)[1]["messages"][2]["content"]
    events, second = await run_agent(agent, follow_up, history=first.messages)
    lines = compact(events)
    assert lines[2] == "ThinkingStarted"
    assert lines[3].startswith('Thinking(\'The conversation: user asked "What is the capital of France?"')
    assert lines[4:] == [
        "ThinkingEnded",
        "TurnCompleted(1)",
        "ToolCall(final_result)",
        "ToolResult(final_result -> Paris, France)",
        "RunCompleted(done_tool)",
    ]
    assert (second.text, second.stop_reason) == ("Paris, France", "done_tool")
    assert answers == [{"city": "Paris", "country": "France"}]
    assert (
        parts_of(second.messages[-2])[1]
        == "ToolCall(call_o2vnpxrw, final_result, {'city': 'Paris', 'country': 'France'})"
    )
    assert second.usage == Usage(input_tokens=206, output_tokens=194, requests=1)
    for sent, recorded in zip(server.bodies, recorded_request_bodies(server.cassette), strict=True):
        assert essentials(sent) == essentials(recorded)
    server.assert_all_served()


async def test_ollama_structured_output_keeps_reasoning_as_thinking_and_sends_the_response_format(
    replay: Replayer,
) -> None:
    server = await replay.serve("openai_compatible/test_ollama_local_native_output_uses_json_schema.yaml")
    response_format = recorded_request_bodies(server.cassette)[0]["response_format"]
    agent = Agent(provider(server, stream=False), settings=ModelSettings(extra={"response_format": response_format}))
    events, result = await run_agent(agent, "What is the capital of France?")

    reasoning = server.cassette.interactions[0].response_json()["choices"][0]["message"]["reasoning"]
    assert reasoning.startswith("Okay, the user is asking for the capital of France.")
    assert compact(events)[2:5] == ["ThinkingStarted", f"Thinking({reasoning!r})", "ThinkingEnded"]
    assert compact(events)[5:] == [
        'Text(\'{ "city": "Paris", "country": "France" }\')',
        "TurnCompleted(1)",
        "RunCompleted(complete)",
    ]
    assert json.loads(result.text) == {"city": "Paris", "country": "France"}
    assert result.usage == Usage(input_tokens=136, output_tokens=15, requests=1)
    assert essentials(server.bodies[0]) == essentials(recorded_request_bodies(server.cassette)[0])
    assert "authorization" in server.requests[0].headers  # a key given to a local server is sent


async def test_openrouter_429_is_rate_limited_when_no_retry_is_allowed(replay: Replayer) -> None:
    """429 is retried by the HTTP layer; with ``max_retries=0`` one recorded 429 ends the run."""
    server = await replay.serve("openai_compatible/test_openrouter_errors_raised.yaml")
    agent = Agent(provider(server, stream=False, retry=RetryPolicy(max_retries=0)), system="Be helpful.")
    events, result = await run_agent(agent, "Tell me a joke.")

    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "TurnCompleted(1 rejected)",
        "CallFailed(1 rate_limited -> stop)",
        "RunCompleted(error)",
    ]
    assert result.stop_reason == "error"
    error = result.error
    assert isinstance(error, RateLimited)
    assert (error.code, error.status, error.retry_after) == ("rate_limited", 429, None)
    # OpenRouter's own message says little; the upstream reason in error.metadata.raw is kept after it.
    assert (error.provider_message or "").startswith("Provider returned error: ")
    assert "temporarily rate-limited upstream" in (error.provider_message or "")
    assert len(server.requests) == 1
    assert server.unserved == [1, 2]


async def test_openrouter_429_is_retried_and_stays_rate_limited_when_every_attempt_gets_one(
    replay: Replayer,
) -> None:
    """pydantic-ai's client retried too: the recording holds three 429s, one per attempt. Two retries with
    no back-off (the recorded 429s carry no Retry-After) use them all, and the run still ends rate limited."""
    server = await replay.serve("openai_compatible/test_openrouter_errors_raised.yaml")
    agent = Agent(provider(server, stream=False, retry=RETRY_AT_ONCE), system="Be helpful.")
    _, result = await run_agent(agent, "Tell me a joke.")

    assert result.stop_reason == "error"
    assert isinstance(result.error, RateLimited)
    assert (result.error.code, result.error.status) == ("rate_limited", 429)
    assert len(server.requests) == 3
    assert server.bodies[0] == server.bodies[1] == server.bodies[2]
    server.assert_all_served()


async def test_groq_tool_use_failed_is_bad_request_and_a_continued_run_recovers(replay: Replayer) -> None:
    server = await replay.serve("openai_compatible/test_tool_use_failed_error.yaml")
    asked: list[str] = []

    @tool
    def get_something_by_name(name: str) -> str:
        asked.append(name)
        return f"Something with name: {name}"

    system = "Be concise. Never use pretty double quotes, just regular ones."
    prompt = recorded_request_bodies(server.cassette)[0]["messages"][1]["content"]
    agent = Agent(provider(server, stream=False, retry=RETRY_AT_ONCE), tools=[get_something_by_name], system=system)

    # Groq validated the model's arguments itself and refused them with a 400 carrying the failed generation.
    events, failed = await run_agent(agent, prompt)
    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "TurnCompleted(1 rejected)",
        "CallFailed(1 bad_request -> stop)",
        "RunCompleted(error)",
    ]
    assert failed.stop_reason == "error"
    error = failed.error
    assert isinstance(error, ProviderError)
    assert (error.code, error.status, error.details) == ("bad_request", 400, {"provider_code": "tool_use_failed"})
    assert error.provider_message is not None
    assert error.provider_message.startswith("Tool call validation failed: tool call validation failed: parameters")
    assert [m.role for m in failed.messages] == ["system", "user"]  # the refused turn is not in the transcript
    assert len(server.requests) == 1  # not retried: a retry would have taken the recorded recovery

    # pydantic-ai fed the failure back and asked again; a host does it by continuing the conversation.
    events, recovered = await run_agent(agent, "That call failed; try again with valid arguments.", failed.messages)
    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "ThinkingStarted",
        "Thinking('We need to call with correct param: name field. Use some name, e.g., \"test\".')",
        "ThinkingEnded",  # the tool call ends the reasoning
        "TurnCompleted(1)",
        "ToolCall(get_something_by_name)",
        "ToolResult(get_something_by_name -> Something with name: test)",
        "TurnStarted(2)",
        "ThinkingStarted",
        "Thinking('We need to respond to user request. They asked: \"Please call the ... tool with non-existent "
        'parameters to test error handling; on the second try you can use valid args". We already did that. '
        "Now we should respond concisely, maybe acknowledging the result. Use regular quotes.')",
        "ThinkingEnded",
        "Text('The first call failed due to missing and extra parameters, as expected. The second call succeeded "
        'and returned: "Something with name: test".\')',
        "TurnCompleted(2)",
        "RunCompleted(complete)",
    ]
    assert asked == ["test"]
    assert recovered.usage == Usage(
        input_tokens=301 + 80, output_tokens=52 + 96, cache_read_tokens=256, reasoning_tokens=22 + 59, requests=2
    )
    last = server.bodies[2]["messages"]
    assert last[-2]["tool_calls"][0]["id"] == "fc_311ba17b-89f9-48d3-8fd9-7e74a1264855"
    assert last[-1] == {
        "role": "tool",
        "tool_call_id": "fc_311ba17b-89f9-48d3-8fd9-7e74a1264855",
        "content": "Something with name: test",
    }
    server.assert_all_served()


DEDICATED = {
    "openai_chat/test_complex_agent_run.yaml",
    "openai_chat/test_dbos_agent_run_stream.yaml",
    "openai_chat/test_dbos_agent_with_hitl_tool.yaml",
    "openai_chat/test_dbos_agent_with_model_retry.yaml",
    "openai_chat/test_model_name_suggestion[openai-chat].yaml",
    "openai_chat/test_openai_instructions.yaml",
    "openai_chat/test_openai_instructions_with_tool_calls_keep_instructions.yaml",
    "openai_chat/test_openai_o1_mini_system_role[system].yaml",
    "openai_chat/test_run_stream_sync_streams_real_model.yaml",
    "openai_compatible/test_compatible_api_with_tool_calls_without_id.yaml",
    "openai_compatible/test_deepseek_model_thinking_part.yaml",
    "openai_compatible/test_deepseek_model_thinking_stream.yaml",
    "openai_compatible/test_ollama_cloud_tool_output.yaml",
    "openai_compatible/test_ollama_local_native_output_uses_json_schema.yaml",
    "openai_compatible/test_openrouter_errors_raised.yaml",
    "openai_compatible/test_tool_use_failed_error.yaml",
}
"""The cassettes with a dedicated test above."""
