"""Wire shapes the OpenAI APIs and compatible servers send, replayed over loopback HTTP through our providers.

The cassettes of ``tests/fixtures/shapes/openai_*/`` are written from the API references (that folder's README
names the page behind each file), since these shapes are not in the recorded traffic. Each test pins what the
shape exists for: every event type of a Responses stream handled or ignored with the answer told once; items
keyed by ``output_index`` for a server that gives every event a new ``item_id``; text sent only in ``.done``
events; ``response.incomplete`` / ``response.failed`` / ``error``; Gemini's thought signature in a tool call's
``extra_content`` kept and sent back; Chat Completions' refusal, legacy ``function_call``, current chunk fields
and vLLM's usage chunk without choices.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.wire import replay as wire
from tests.wire.events import Call, Streamed, collect, compact, run_agent, streamed
from tests.wire.replay import Cassette, Replayer, ReplayServer, recorded_request_bodies
from tether import Agent, Limits, tool
from tether.errors import ProviderUnavailable, RateLimited
from tether.events import LlmEvent, StreamEnd, TextDelta
from tether.loop.accumulator import StreamAccumulator
from tether.messages import Message, Text, Thinking, ToolCall
from tether.providers.base import Request
from tether.providers.http import RetryPolicy
from tether.providers.openai_chat import OpenAIChatProvider, encode_message
from tether.providers.openai_chat_stream import ChatDecoder
from tether.providers.openai_responses import ORIGIN, OpenAIResponsesProvider
from tether.providers.openai_responses_stream import ResponsesDecoder
from tether.providers.registry import PROFILES
from tether.usage import Usage

replay = wire.replay

SHAPES = Path(__file__).resolve().parent.parent / "fixtures" / "shapes"
NO_RETRY = RetryPolicy(max_retries=0)
GENERATED_ID = re.compile(r"call_[0-9a-f]{24}")
ASK = Request((Message.user("hi"),))
"""What we send does not matter to these answers (the server replays them whatever we ask)."""


def chat(server: ReplayServer, profile: str = "openai", *, stream: bool = True) -> OpenAIChatProvider:
    body = server.cassette.interactions[0].request_body
    return OpenAIChatProvider(
        body["model"], profile=PROFILES[profile], base_url=server.base_url, api_key="k", stream=stream, retry=NO_RETRY
    )


def responses(server: ReplayServer) -> OpenAIResponsesProvider:
    body = server.cassette.interactions[0].request_body
    return OpenAIResponsesProvider(body["model"], base_url=server.base_url, api_key="k", retry=NO_RETRY)


def accumulate(events: list[LlmEvent]) -> Message:
    accumulator = StreamAccumulator()
    for event in events:
        accumulator.add(event)
    return accumulator.finish().message


def shape(name: str) -> Path:
    return SHAPES / name


def test_every_written_shape_has_a_test_here() -> None:
    files = {f"{p.parent.name}/{p.name}" for p in SHAPES.glob("openai_*/*.yaml")}
    malformed = {name for name in files if "malformed" in name}  # the run-level tests of test_openai_hostile.py
    assert files == TESTED | malformed


TESTED = {
    "openai_chat/refusal_stream.yaml",
    "openai_chat/current_chunk_fields_stream.yaml",
    "openai_chat/content_filter_whole.yaml",
    "openai_chat/legacy_function_call_stream.yaml",
    "openai_responses/every_event_stream.yaml",
    "openai_responses/text_only_in_done_events_stream.yaml",
    "openai_responses/incomplete_max_output_tokens_stream.yaml",
    "openai_responses/incomplete_content_filter_stream.yaml",
    "openai_responses/failed_stream.yaml",
    "openai_responses/error_event_stream.yaml",
    "openai_responses/refusal_stream.yaml",
    "openai_responses/reasoning_text_stream.yaml",
    "openai_compatible/gemini_thought_signature_stream.yaml",
    "openai_compatible/gemini_thought_signature_whole.yaml",
    "openai_compatible/responses_new_item_id_per_event_stream.yaml",
    "openai_compatible/vllm_usage_chunk_without_choices_stream.yaml",
}


# --- Chat Completions ------------------------------------------------------------------------------------------


async def test_a_streamed_chat_refusal_is_text_marked_as_a_refusal(replay: Replayer) -> None:
    server = await replay.serve(shape("openai_chat/refusal_stream.yaml"))
    events = await collect(chat(server), ASK)
    assert [e for e in events if isinstance(e, TextDelta)] == [
        TextDelta("I'm sorry, ", {"refusal": True}),
        TextDelta("I can't help with that.", {"refusal": True}),
    ]
    assert accumulate(events).parts == (Text("I'm sorry, I can't help with that.", {"refusal": True}),)
    assert events[-1] == StreamEnd("stop", Usage(input_tokens=14, output_tokens=9))


async def test_the_fields_chat_chunks_carry_today_leave_text_call_and_usage_intact(replay: Replayer) -> None:
    """``obfuscation``, ``service_tier``, ``logprobs``, ``annotations``, ``usage: null`` on every chunk and the
    usage chunk with no choices."""
    server = await replay.serve(shape("openai_chat/current_chunk_fields_stream.yaml"))
    got = streamed(await collect(chat(server), ASK))
    assert got == Streamed(
        "gpt-4o-2024-08-06",
        "Let me check.",
        "",
        (Call("call_shape1", "get_weather", '{"city": "Paris"}'),),
        "tool_calls",
        Usage(input_tokens=1200 - 1024, output_tokens=25, cache_read_tokens=1024),
        "",
    )


async def test_a_whole_chat_answer_stopped_by_the_content_filter_finishes_so(replay: Replayer) -> None:
    server = await replay.serve(shape("openai_chat/content_filter_whole.yaml"))
    events = await collect(chat(server, stream=False), ASK)
    assert streamed(events).finish == "content_filter"
    assert accumulate(events).parts == ()


async def test_the_deprecated_function_call_is_read_as_one_tool_call(replay: Replayer) -> None:
    server = await replay.serve(shape("openai_chat/legacy_function_call_stream.yaml"))
    got = streamed(await collect(chat(server), ASK))
    ((call_id, name, arguments),) = [(c.id, c.name, c.arguments) for c in got.calls]
    assert GENERATED_ID.fullmatch(call_id)
    assert (name, arguments, got.finish) == ("get_weather", '{"city":"Paris"}', "tool_calls")


async def test_vllm_usage_chunk_without_choices_is_read_for_its_usage(replay: Replayer) -> None:
    server = await replay.serve(shape("openai_compatible/vllm_usage_chunk_without_choices_stream.yaml"))
    got = streamed(await collect(chat(server, "vllm"), ASK))
    assert (got.thinking, got.text, got.finish) == ("Greet briefly.", "Hi!", "stop")
    assert got.usage == Usage(input_tokens=10, output_tokens=7)


# --- Gemini's thought signature over Chat Completions ------------------------------------------------------------


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return "sunny"


@pytest.mark.parametrize(
    ("cassette", "stream"),
    [
        ("openai_compatible/gemini_thought_signature_stream.yaml", True),
        ("openai_compatible/gemini_thought_signature_whole.yaml", False),
    ],
)
async def test_gemini_thought_signature_in_extra_content_is_kept_and_sent_back_unchanged(
    replay: Replayer, cassette: str, stream: bool
) -> None:
    server = await replay.serve(shape(cassette))
    agent = Agent(chat(server, "openai-compatible", stream=stream), tools=[get_weather])
    events, result = await run_agent(agent, "Weather in Paris?")

    assert compact(events)[-3:] == [
        "Text*2('It is sunny in Paris.')" if stream else "Text('It is sunny in Paris.')",
        "TurnCompleted(2)",
        "RunCompleted(complete)",
    ]
    extra = {"google": {"thought_signature": "CiQB0e2Kb-shape-thought-signature-A1=="}}
    (call,) = result.messages[1].parts
    assert call == ToolCall(
        "function-call-shape1",
        "get_weather",
        {"city": "Paris"},
        '{"city":"Paris"}',
        {"origin": "openai-compatible", "extra_content": extra},
    )
    follow_up = server.bodies[1]["messages"]
    assert follow_up == recorded_request_bodies(server.cassette)[1]["messages"]
    assert follow_up[1]["tool_calls"][0]["extra_content"] == extra
    server.assert_all_served()


def test_a_thought_signature_goes_back_only_to_a_server_of_the_profile_that_sent_it() -> None:
    """Another server (OpenAI's own API refuses unknown fields) gets the call without it."""
    extra = {"google": {"thought_signature": "sig"}}
    message = Message(
        "assistant", (ToolCall("c1", "f", {}, "{}", {"origin": "openai-compatible", "extra_content": extra}),)
    )
    (same,) = encode_message(message, "openai-compatible")
    (other,) = encode_message(message, "openai")
    assert same["tool_calls"][0]["extra_content"] == extra
    assert "extra_content" not in other["tool_calls"][0]


def test_a_thought_signature_that_arrives_after_its_call_started_is_kept_on_the_message() -> None:
    decoder = ChatDecoder(PROFILES["openai-compatible"])
    extra = {"google": {"thought_signature": "late"}}
    events = decoder.feed(
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "f"}}]}}]}
    )
    events += decoder.feed(
        {
            "choices": [
                {"delta": {"tool_calls": [{"index": 0, "extra_content": extra, "function": {"arguments": "{}"}}]}}
            ]
        }
    )
    events += decoder.feed({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]})
    message = accumulate(events + decoder.end())
    (encoded,) = encode_message(message, "openai-compatible")
    assert encoded["tool_calls"][0]["extra_content"] == extra


# --- Responses ---------------------------------------------------------------------------------------------------


def final_response(server: ReplayServer) -> dict[str, Any]:
    last = json.loads(server.cassette.interactions[0].events_data()[-1])
    response: dict[str, Any] = last["response"]
    return response


async def test_every_event_type_of_a_responses_stream_is_handled_or_ignored_and_the_answer_told_once(
    replay: Replayer,
) -> None:
    """Reasoning summary parts (with their ``.done`` events), a hosted web search, content parts, an annotation,
    the ``.done`` events after deltas, ``output_item.done`` with the whole items, and an event type the
    reference does not have yet."""
    server = await replay.serve(shape("openai_responses/every_event_stream.yaml"))
    events = await collect(responses(server), ASK)
    got = streamed(events)
    assert got == Streamed(
        "gpt-5-2025-08-07",
        "It is sunny in Paris [1].",
        "**Planning**\n\nSearch first.\n\nThen call the tool.",
        (Call("call_shape1", "get_weather", '{"city":"Paris"}'),),
        "tool_calls",
        Usage(input_tokens=320 - 128, output_tokens=180, cache_read_tokens=128, reasoning_tokens=64),
        "",
    )
    message = accumulate(events)
    summary = final_response(server)["output"][0]["summary"]
    assert message.parts == (
        Thinking(got.thinking, "gAAAA-shape-encrypted", {"origin": ORIGIN, "id": "rs_shape1", "summary": summary}),
        Text("It is sunny in Paris [1].", {"origin": ORIGIN, "id": "msg_shape1"}),
        ToolCall(
            "call_shape1", "get_weather", {"city": "Paris"}, '{"city":"Paris"}', {"origin": ORIGIN, "id": "fc_shape1"}
        ),
    )
    assert accumulate(ResponsesDecoder().whole(final_response(server))) == message


async def test_a_server_that_gives_every_event_a_new_item_id_tells_the_answer_once(replay: Replayer) -> None:
    server = await replay.serve(shape("openai_compatible/responses_new_item_id_per_event_stream.yaml"))
    events = await collect(responses(server), ASK)
    got = streamed(events)
    assert (got.text, got.calls, got.finish) == (
        "Checking the weather.",
        (Call("call_shape8", "get_weather", '{"city":"Paris"}'),),
        "tool_calls",
    )
    assert [type(part) for part in accumulate(events).parts] == [Text, ToolCall]


def test_a_server_that_numbers_every_item_zero_tells_each_item_once() -> None:
    """``output_item.added`` at an index whose item is done starts a new item."""
    message = {"type": "message", "id": "m1", "content": [{"type": "output_text", "text": "Looking."}]}
    call = {"type": "function_call", "id": "f1", "call_id": "c1", "name": "f", "arguments": "{}"}
    decoder = ResponsesDecoder()
    stream = [
        {"type": "response.created", "response": {"id": "r", "model": "m"}},
        {"type": "response.output_item.added", "output_index": 0, "item": {**message, "content": []}},
        {"type": "response.output_text.delta", "output_index": 0, "item_id": "m1", "delta": "Looking."},
        {"type": "response.output_item.done", "output_index": 0, "item": message},
        {"type": "response.output_item.added", "output_index": 0, "item": {**call, "arguments": ""}},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "item_id": "f1", "delta": "{}"},
        {"type": "response.output_item.done", "output_index": 0, "item": call},
        {"type": "response.completed", "response": {"status": "completed", "output": [message, call]}},
    ]
    got = streamed([event for data in stream for event in decoder.feed(data)] + decoder.end())
    assert (got.text, got.calls, got.finish) == ("Looking.", (Call("c1", "f", "{}"),), "tool_calls")


async def test_text_sent_only_in_done_events_is_told_once(replay: Replayer) -> None:
    server = await replay.serve(shape("openai_responses/text_only_in_done_events_stream.yaml"))
    events = await collect(responses(server), ASK)
    assert [e for e in events if isinstance(e, TextDelta)] == [
        TextDelta("Paris.", {"origin": ORIGIN, "id": "msg_shape2"})
    ]
    assert streamed(events).usage == Usage(input_tokens=14, output_tokens=3)


@pytest.mark.parametrize(
    ("cassette", "finish", "text"),
    [
        ("openai_responses/incomplete_max_output_tokens_stream.yaml", "length", "The history of Paris begins"),
        ("openai_responses/incomplete_content_filter_stream.yaml", "content_filter", "Here is how"),
    ],
)
async def test_an_incomplete_response_keeps_its_text_and_finishes_for_its_reason(
    replay: Replayer, cassette: str, finish: str, text: str
) -> None:
    server = await replay.serve(shape(cassette))
    agent = Agent(responses(server), limits=Limits(answer_continuations=0))  # one recorded answer: no call after it
    events, result = await run_agent(agent, "Tell me.")
    got = streamed(await collect(responses(await replay.serve(shape(cassette))), ASK))
    assert (got.text, got.finish) == (text, finish)
    assert result.text == text
    assert result.finish_reason == finish
    assert compact(events)[2] == f"Text*2({text!r})"


async def test_a_failed_response_is_raised_as_the_error_its_code_names(replay: Replayer) -> None:
    server = await replay.serve(shape("openai_responses/failed_stream.yaml"))
    with pytest.raises(ProviderUnavailable) as caught:
        await collect(responses(server), ASK)
    assert caught.value.provider_message == "The model failed to generate a response."


async def test_an_error_event_is_raised_as_the_error_its_code_names(replay: Replayer) -> None:
    server = await replay.serve(shape("openai_responses/error_event_stream.yaml"))
    with pytest.raises(RateLimited) as caught:
        await collect(responses(server), ASK)
    assert caught.value.provider_message == "Rate limit reached for gpt-4o. Please try again in 2s."


async def test_a_streamed_responses_refusal_is_told_once_marked_as_a_refusal(replay: Replayer) -> None:
    server = await replay.serve(shape("openai_responses/refusal_stream.yaml"))
    message = accumulate(await collect(responses(server), ASK))
    assert message.parts == (
        Text("I'm sorry, I can't help with that.", {"origin": ORIGIN, "id": "msg_shape6", "refusal": True}),
    )


async def test_reasoning_text_and_its_content_parts_are_thinking_told_once(replay: Replayer) -> None:
    server = await replay.serve(shape("openai_responses/reasoning_text_stream.yaml"))
    got = streamed(await collect(responses(server), ASK))
    assert (got.thinking, got.text, got.finish) == ("The user asks for 2+2. That is 4.", "4", "stop")
    assert got.usage == Usage(input_tokens=30, output_tokens=20, reasoning_tokens=12)


def test_the_shapes_are_vcr_cassettes_the_replay_server_reads() -> None:
    for file in SHAPES.glob("openai_*/*.yaml"):
        cassette = Cassette.load(file)
        assert cassette.interactions, file
        assert all(i.status == 200 and i.request_body for i in cassette.interactions), file


def test_text_and_reasoning_told_only_by_done_events_survive_a_final_response_without_output() -> None:
    """A server that streams no deltas and leaves the final response's ``output`` empty: the ``.done`` events
    are the only place the answer is."""
    decoder = ResponsesDecoder()
    stream = [
        {"type": "response.created", "response": {"id": "r", "model": "m"}},
        {"type": "response.reasoning_summary_text.done", "output_index": 0, "summary_index": 0, "text": "Plan."},
        {
            "type": "response.reasoning_summary_part.done",
            "output_index": 0,
            "summary_index": 1,
            "part": {"type": "summary_text", "text": "Check."},
        },
        {
            "type": "response.content_part.done",
            "output_index": 1,
            "content_index": 0,
            "part": {"type": "output_text", "text": "Hi. "},
        },
        {"type": "response.output_text.done", "output_index": 1, "content_index": 1, "text": "Bye."},
        {"type": "response.output_text.done", "output_index": 1, "content_index": 1, "text": "Bye."},
        {"type": "response.completed", "response": {"status": "completed", "output": []}},
    ]
    got = streamed([event for data in stream for event in decoder.feed(data)] + decoder.end())
    assert (got.thinking, got.text) == ("Plan.\n\nCheck.", "Hi. Bye.")
