"""Anthropic answers of every documented shape, replayed over loopback HTTP through our provider and Agent.

The cassettes of ``tests/fixtures/shapes/anthropic/`` were written from the Messages API reference (see
``tests/fixtures/shapes/README-anthropic-google.md``): an answer that arrives whole inside
``message_start``, compaction, server tools with their results and citations, ``container_upload``,
redacted thinking, the stop reasons, an in-band ``error`` event, and fields of the wrong type. Each test
pins what the provider makes of one shape, and what it sends back on the next request.
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
from tether.errors import ProviderUnavailable
from tether.events import StreamEnd, ThinkingDelta
from tether.messages import Message, Thinking
from tether.providers.anthropic import AnthropicProvider
from tether.providers.anthropic_stream import AnthropicDecoder
from tether.providers.base import ModelSettings, Request
from tether.providers.http import RetryPolicy
from tether.tools.base import tool
from tether.usage import Usage

replay = wire.replay
"""The replay fixture (assigned, not imported, so that ruff does not read the test parameters as redefinitions)."""

SHAPES = Path(__file__).resolve().parent.parent / "fixtures" / "shapes" / "anthropic"
NO_RETRY = RetryPolicy(max_retries=0)


def provider(server: ReplayServer, *, stream: bool = True) -> AnthropicProvider:
    return AnthropicProvider(
        "claude-sonnet-4-5", base_url=server.base_url, api_key="test-key", stream=stream, retry=NO_RETRY
    )


async def serve(replay: Replayer, name: str) -> ReplayServer:
    return await replay.serve(SHAPES / name, chunk_size=37)


def ask(text: str, *history: Message, **settings: Any) -> Request:
    return Request((*history, Message.user(text)), settings=ModelSettings(extra=settings))


# --- a whole answer inside message_start ---------------------------------------------------------------------


async def test_an_answer_whole_in_message_start_keeps_its_tool_call_and_stop_reason_then_reads_what_follows(
    replay: Replayer,
) -> None:
    server = await serve(replay, "message_start_whole_programmatic_tool_call.yaml")
    asked: list[str] = []

    @tool
    def query_database(sql: str) -> str:
        """Run a read-only SQL query."""
        asked.append(sql)
        return "3"

    events, result = await run_agent(Agent(provider(server), tools=[query_database]), "How many orders are there?")
    assert compact(events) == [
        "RunStarted",
        "TurnStarted(1)",
        'Text*2("I\'ll count the rows from code. Waiting for the query.")',
        "TurnCompleted(1)",
        "ToolCall(query_database)",
        "ToolResult(query_database -> 3)",
        "TurnStarted(2)",
        "Text('There are 3 orders.')",
        "TurnCompleted(2)",
        "RunCompleted(complete)",
    ]
    assert asked == ["SELECT count(*) FROM orders"]
    assert parts_of(result.messages[1]) == [
        'Text("I\'ll count the rows from code.")',
        "ToolCall(toolu_01PTC, query_database, {'sql': 'SELECT count(*) FROM orders'})",
        "Text(' Waiting for the query.')",
    ]
    assert result.usage == Usage(input_tokens=240, output_tokens=97, requests=2)
    # The code execution that made the call goes back before it, where it came, and the answer's text
    # around it is cut where the block was.
    sent = server.bodies[1]["messages"][1]["content"]
    assert [block["type"] for block in sent] == ["text", "server_tool_use", "tool_use", "text"]
    assert sent[0]["text"] == "I'll count the rows from code."
    assert sent[1]["id"] == "srvtoolu_01PTC"
    assert sent[2]["caller"] == {"type": "code_execution_20250825", "tool_id": "srvtoolu_01PTC"}
    assert sent[3]["text"] == " Waiting for the query."
    assert server.bodies[1]["messages"][2]["content"][0]["tool_use_id"] == "toolu_01PTC"
    server.assert_all_served()


def test_a_message_start_that_carries_a_stop_reason_finishes_the_turn_without_a_message_delta() -> None:
    decoder = AnthropicDecoder()
    message = {
        "id": "m",
        "model": "claude-x",
        "content": [{"type": "text", "text": "Done."}],
        "stop_reason": "end_turn",
    }
    events = decoder.feed({"type": "message_start", "message": message}) + decoder.end()
    got = streamed(events)
    assert (got.text, got.finish) == ("Done.", "stop")


# --- compaction ------------------------------------------------------------------------------------------------


async def test_a_compaction_block_keeps_its_streamed_content_and_goes_back_unchanged(replay: Replayer) -> None:
    server = await serve(replay, "compaction_stream.yaml")
    agent = Agent(
        provider(server),
        settings=ModelSettings(extra={"context_management": {"edits": [{"type": "compact_20260112"}]}}),
    )
    _, first = await run_agent(agent, "What is the capital of France?")
    assert first.text == "Paris is the capital of France."  # the summary is not the answer
    summary = "Summary: the user is planning a trip to France and asked about cities."
    assert first.messages[-1].provider_data == {
        "origin": "anthropic",
        "server_blocks": [{"anchor": [0, 0], "block": {"type": "compaction", "content": summary}}],
    }
    _, second = await run_agent(agent, "How many people live there?", history=first.messages)
    assert second.text == "About 2.1 million people."
    assert server.bodies[1]["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "compaction", "content": summary},
            {"type": "text", "text": "Paris is the capital of France."},
        ],
    }
    server.assert_all_served()


@pytest.mark.parametrize(
    ("start", "deltas", "kept"),
    [
        ({"content": None}, [], {"content": None}),  # a failed compaction: null, never ""
        ({"content": "Whole."}, [], {"content": "Whole."}),
        (
            {"content": None},
            [{"content": "a"}, {"content": "b", "encrypted_content": "e1"}, {"encrypted_content": "e2"}],
            {"content": "ab", "encrypted_content": "e2"},
        ),
    ],
)
def test_a_compaction_block_is_kept_as_the_api_wants_it_back(
    start: dict[str, Any], deltas: list[dict[str, Any]], kept: dict[str, Any]
) -> None:
    decoder = AnthropicDecoder()
    decoder.feed({"type": "message_start", "message": {"id": "m", "model": "c"}})
    decoder.feed({"type": "content_block_start", "index": 0, "content_block": {"type": "compaction", **start}})
    for delta in deltas:
        decoder.feed({"type": "content_block_delta", "index": 0, "delta": {"type": "compaction_delta", **delta}})
    decoder.feed({"type": "content_block_stop", "index": 0})
    decoder.feed({"type": "message_delta", "delta": {"stop_reason": "compaction"}})
    end = decoder.end()[-1]
    assert isinstance(end, StreamEnd)
    assert end.finish_reason == "other"
    assert end.provider_data == {
        "origin": "anthropic",
        "server_blocks": [{"anchor": [0, 0], "block": {"type": "compaction", **kept}}],
    }


# --- server tools ----------------------------------------------------------------------------------------------


async def test_web_search_blocks_citations_and_pings_are_kept_and_a_pause_turn_resumes_with_them(
    replay: Replayer,
) -> None:
    server = await serve(replay, "web_search_pause_turn_stream.yaml")
    model = provider(server)
    first = await collect(model, ask("What happened in Paris today?"))
    got = streamed(first)
    assert (got.text, got.calls, got.finish) == ("Let me search.There is a parade.", (), "other")
    end = first[-1]
    assert isinstance(end, StreamEnd)
    assert end.provider_data is not None
    kept = end.provider_data["server_blocks"]
    assert [entry["anchor"] for entry in kept] == [[0, 14], [0, 14]]
    assert kept[0]["block"] == {
        "type": "server_tool_use",
        "id": "srvtoolu_01WEB",
        "name": "web_search",
        "input": {"query": "Paris news today"},
    }
    assert kept[1]["block"]["type"] == "web_search_tool_result"
    assert kept[1]["block"]["content"][0]["encrypted_content"] == "EqgfCioIARgBIiQ3YTAwMjY1Mi"

    paused = Message("assistant", (Message.assistant(got.text).parts[0],), end.provider_data)
    second = streamed(await collect(model, ask("Go on.", Message.user("What happened in Paris today?"), paused)))
    assert second.text == "It starts at noon."
    sent = server.bodies[1]["messages"][1]["content"]
    assert sent == [
        {"type": "text", "text": "Let me search."},
        kept[0]["block"],
        kept[1]["block"],
        {"type": "text", "text": "There is a parade."},
    ]
    server.assert_all_served()


async def test_code_execution_results_and_a_container_upload_are_kept_in_order_from_a_whole_answer(
    replay: Replayer,
) -> None:
    server = await serve(replay, "code_execution_whole.yaml")
    agent = Agent(provider(server, stream=False))
    _, first = await run_agent(agent, "Sum the numbers in data.csv.")
    assert first.text == "I'll read the file.The sum is 42."
    assert first.usage == Usage(
        input_tokens=300, output_tokens=70, cache_read_tokens=5, cache_write_tokens=10, requests=1
    )
    recorded = server.cassette.interactions[0].response_json()["content"]
    _, second = await run_agent(agent, "Are you sure?", history=first.messages)
    assert second.text == "Yes, 42."
    assert server.bodies[1]["messages"][1]["content"] == recorded  # every block back, unchanged, in order
    server.assert_all_served()


# --- thinking, refusal, stop reasons -----------------------------------------------------------------------------


async def test_redacted_thinking_is_kept_for_replay_and_a_refusal_is_a_content_filter(replay: Replayer) -> None:
    server = await serve(replay, "redacted_thinking_refusal_stream.yaml")
    events = await collect(provider(server), ask("Explain something risky."))
    signed = [event for event in events if isinstance(event, ThinkingDelta) and event.signature]
    assert [(event.signature, event.provider_data) for event in signed] == [
        ("EqQBCkYIBxgCKkBsig0", {"origin": "anthropic"}),
        (
            "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP",
            {"origin": "anthropic", "redacted": True},
        ),
    ]
    got = streamed(events)
    assert (got.text, got.finish) == ("I can't help with that.", "content_filter")
    server.assert_all_served()
    redacted = Thinking("", signed[1].signature, signed[1].provider_data)
    body = provider(server).request_body(ask("ok", Message("assistant", (redacted,))))
    assert body["messages"][0]["content"] == [{"type": "redacted_thinking", "data": signed[1].signature}]


@pytest.mark.parametrize(
    ("reason", "finish"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("tool_use", "tool_calls"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("refusal", "content_filter"),
        ("pause_turn", "other"),
        ("compaction", "other"),
        ("a_reason_added_later", "other"),
    ],
)
def test_every_stop_reason_maps_onto_a_finish_reason(reason: str, finish: str) -> None:
    message = {"id": "m", "model": "c", "content": [{"type": "text", "text": "x"}], "stop_reason": reason}
    end = AnthropicDecoder().whole(message)[-1]
    assert isinstance(end, StreamEnd)
    assert end.finish_reason == finish


async def test_an_error_event_in_the_stream_is_the_provider_error_it_names(replay: Replayer) -> None:
    server = await serve(replay, "error_event_stream.yaml")
    with pytest.raises(ProviderUnavailable, match="Overloaded"):
        await collect(provider(server), ask("Hello?"))


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
