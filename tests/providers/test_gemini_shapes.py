"""Gemini answers of every documented shape, replayed over loopback HTTP through our provider and Agent.

The cassettes of ``tests/fixtures/shapes/google/`` were written from the Gemini API reference (see
``tests/fixtures/shapes/README-anthropic-google.md``): code execution parts, inline and file data, function
calls with and without an id, a blocked prompt, every ``usageMetadata`` field, and fields of the wrong type.
Each test pins what the provider makes of one shape, and what it sends back on the next request.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.providers.hostile import assert_a_malformed_answer_ends_the_run_as_invalid_response
from tests.wire import replay as wire
from tests.wire.events import collect, compact, parts_of, run_agent, streamed
from tests.wire.replay import Replayer, ReplayServer
from tether import Agent
from tether.events import StreamEnd, TextDelta, ToolCallStart
from tether.messages import Message, Text, Thinking, ToolCall
from tether.providers.base import Request
from tether.providers.gemini import GeminiProvider, encode_contents
from tether.providers.gemini_stream import GeminiDecoder
from tether.providers.http import RetryPolicy
from tether.tools.base import tool
from tether.usage import Usage

replay = wire.replay
"""The replay fixture (assigned, not imported, so that ruff does not read the test parameters as redefinitions)."""

SHAPES = Path(__file__).resolve().parent.parent / "fixtures" / "shapes" / "google"
NO_RETRY = RetryPolicy(max_retries=0)


def provider(server: ReplayServer, model: str = "gemini-2.5-flash", *, stream: bool = True) -> GeminiProvider:
    return GeminiProvider(model, base_url=server.base_url, api_key="test-key", stream=stream, retry=NO_RETRY)


async def serve(replay: Replayer, name: str) -> ReplayServer:
    return await replay.serve(SHAPES / name, chunk_size=41)


def ask(text: str, *history: Message) -> Request:
    return Request((*history, Message.user(text)))


# --- parts tether does not read are kept and go back in place ----------------------------------------------------


async def test_code_execution_parts_are_not_shown_and_go_back_where_they_were(replay: Replayer) -> None:
    server = await serve(replay, "code_execution_whole.yaml")
    events = await collect(provider(server, stream=False), ask("What is the sum of the first 50 primes?"))
    got = streamed(events)
    assert (got.text, got.calls, got.finish) == ("I'll compute it.The sum is 5117.", (), "stop")
    # every usageMetadata field read: cached prompt tokens apart, tool-use prompt tokens as input, thoughts
    # as output and reasoning
    assert got.usage == Usage(input_tokens=100 + 15, output_tokens=30 + 12, cache_read_tokens=20, reasoning_tokens=12)
    end = events[-1]
    assert isinstance(end, StreamEnd)
    recorded = server.cassette.interactions[0].response_json()["candidates"][0]["content"]["parts"]
    assert end.provider_data == {
        "origin": "gemini",
        "parts": [{"anchor": [0, 16], "part": recorded[1]}, {"anchor": [0, 16], "part": recorded[2]}],
    }
    answer = Message("assistant", (Text(got.text),), end.provider_data)
    assert encode_contents([answer]) == [{"role": "model", "parts": recorded}]
    server.assert_all_served()


async def test_inline_and_file_data_are_kept_with_their_signature_and_the_text_around_them_streams(
    replay: Replayer,
) -> None:
    server = await serve(replay, "inline_and_file_data_stream.yaml")
    model = provider(server, "gemini-3-pro-preview")
    events, result = await run_agent(Agent(model), "Draw a cat and cite the file.")
    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        "Text*2('Here is the cat: Done.')",
        "TurnCompleted(1)",
        "RunCompleted(complete)",
    ]
    assert result.usage == Usage(input_tokens=9, output_tokens=1300, requests=1)
    answer = result.messages[-1]
    assert parts_of(answer) == ["Text('Here is the cat: Done.')"]
    sent = encode_contents([answer])[0]["parts"]
    assert [sorted(part) for part in sent] == [["text"], ["inlineData", "thoughtSignature"], ["fileData"], ["text"]]
    assert sent[1]["thoughtSignature"] == "CiQBcsjafSIG"
    assert (sent[0]["text"], sent[3]["text"]) == ("Here is the cat:", " Done.")
    server.assert_all_served()


def test_kept_parts_go_back_between_the_thinking_and_calls_they_came_between() -> None:
    decoder = GeminiDecoder(live=False)
    parts: list[dict[str, Any]] = [
        {"text": "plan", "thought": True},
        {"executableCode": {"language": "PYTHON", "code": "print(1)"}},
        {"functionCall": {"id": "c1", "name": "f", "args": {}}, "thoughtSignature": "s1"},
        {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "1"}},
        {"text": "after"},
    ]
    events = decoder.whole({"candidates": [{"content": {"parts": parts}, "finishReason": "STOP"}]})
    end = events[-1]
    assert isinstance(end, StreamEnd)
    message = Message(
        "assistant",
        (
            Thinking("plan", None, {"origin": "gemini"}),
            ToolCall("c1", "f", {}, "{}", {"origin": "gemini", "thoughtSignature": "s1"}),
            Text("after"),
        ),
        end.provider_data,
    )
    assert encode_contents([message])[0]["parts"] == parts


def test_a_kept_part_entry_of_the_wrong_shape_in_a_stored_message_is_left_out() -> None:
    data = {
        "origin": "gemini",
        "parts": [
            {"anchor": "x", "part": {}},
            {"anchor": [0, 0]},
            "junk",
            {"anchor": [0, 0], "part": {"fileData": {}}},
        ],
    }
    assert encode_contents([Message("assistant", (Text("hi"),), data)])[0]["parts"] == [
        {"fileData": {}},
        {"text": "hi"},
    ]


# --- function calls ------------------------------------------------------------------------------------------------


async def test_function_calls_with_and_without_an_id_both_run_and_go_back_with_the_id_the_model_gave_or_none(
    replay: Replayer,
) -> None:
    server = await serve(replay, "function_calls_with_and_without_id_stream.yaml")
    cities: list[str] = []

    @tool
    def weather(city: str) -> str:
        """The weather in a city."""
        cities.append(city)
        return "sunny" if city == "Paris" else "rainy"

    model = provider(server, "gemini-3-pro-preview")
    events, result = await run_agent(Agent(model, tools=[weather]), "Weather in Paris and Rome?")
    assert cities == ["Paris", "Rome"]
    assert result.text == "Paris is sunny, Rome is rainy."
    calls = [part for part in result.messages[1].parts if isinstance(part, ToolCall)]
    assert calls[0].id == "fc_paris"
    assert calls[1].id.startswith("gemini_noid_")  # no id came: tether pairs the call and its result by its own
    assert [r.call_id for r in result.messages[2].tool_results] == ["fc_paris", calls[1].id]
    sent = server.bodies[1]["contents"]
    assert [part["functionCall"].get("id") for part in sent[1]["parts"]] == ["fc_paris", None]
    assert sent[1]["parts"][0]["thoughtSignature"] == "CpwBsigParis"
    assert [part["functionResponse"].get("id") for part in sent[2]["parts"]] == ["fc_paris", None]
    assert "ToolCall(weather)" in compact(events)
    server.assert_all_served()


# --- a blocked prompt, finish reasons ---------------------------------------------------------------------------


async def test_a_blocked_prompt_ends_the_turn_without_output_as_a_content_filter(replay: Replayer) -> None:
    server = await serve(replay, "prompt_blocked_whole.yaml")
    events = await collect(provider(server, stream=False), ask("Something forbidden."))
    assert not any(isinstance(event, TextDelta | ToolCallStart) for event in events)
    end = events[-1]
    assert isinstance(end, StreamEnd)
    assert (end.finish_reason, end.usage) == ("content_filter", Usage(input_tokens=12))


@pytest.mark.parametrize(
    ("reason", "finish"),
    [
        ("STOP", "stop"),
        ("MAX_TOKENS", "length"),
        ("LANGUAGE", "other"),
        ("OTHER", "other"),
        ("NO_IMAGE", "other"),
        ("IMAGE_OTHER", "other"),
        ("FINISH_REASON_UNSPECIFIED", "other"),
        ("A_REASON_ADDED_LATER", "other"),
    ],
)
def test_the_finish_reason_of_a_usable_answer_maps_onto_a_finish_reason(reason: str, finish: str) -> None:
    body = {"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": reason}]}
    end = GeminiDecoder(live=False).whole(body)[-1]
    assert isinstance(end, StreamEnd)
    assert end.finish_reason == finish


@pytest.mark.parametrize(
    ("reason", "finish"),
    [
        ("SAFETY", "content_filter"),
        ("RECITATION", "content_filter"),
        ("BLOCKLIST", "content_filter"),
        ("PROHIBITED_CONTENT", "content_filter"),
        ("SPII", "content_filter"),
        ("IMAGE_SAFETY", "content_filter"),
        ("IMAGE_PROHIBITED_CONTENT", "content_filter"),
        ("IMAGE_RECITATION", "content_filter"),
        ("MALFORMED_FUNCTION_CALL", "error"),
        ("UNEXPECTED_TOOL_CALL", "error"),
        ("TOO_MANY_TOOL_CALLS", "error"),
        ("MISSING_THOUGHT_SIGNATURE", "error"),
        ("MALFORMED_RESPONSE", "error"),
    ],
)
def test_a_blocked_or_failed_candidate_is_never_the_answer(reason: str, finish: str) -> None:
    body = {
        "candidates": [{"content": {"parts": [{"functionCall": {"name": "f"}}, {"text": "x"}]}, "finishReason": reason}]
    }
    events = GeminiDecoder(live=False).whole(body)
    assert not any(isinstance(event, TextDelta | ToolCallStart) for event in events)
    end = events[-1]
    assert isinstance(end, StreamEnd)
    assert end.finish_reason == finish


# --- fields of the wrong type end the run as invalid_response --------------------------------------------------


@pytest.mark.parametrize(
    ("name", "stream"), [("malformed_fields_stream.yaml", True), ("malformed_fields_whole.yaml", False)]
)
async def test_a_run_whose_answers_have_fields_of_the_wrong_type_ends_as_invalid_response(
    replay: Replayer, name: str, stream: bool
) -> None:
    server = await serve(replay, name)
    await assert_a_malformed_answer_ends_the_run_as_invalid_response(provider(server, stream=stream))
    server.assert_all_served()
