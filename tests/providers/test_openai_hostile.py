"""The OpenAI decoders against answers of the wrong shape: a typed error naming the field, never a crash.

Real recorded answers (``tests/fixtures/wire/``) and the shapes written from the API references
(``tests/fixtures/shapes/``) are the seeds: hypothesis takes one chunk, event or body, replaces the value at one
random path with a value of another JSON type (or deletes it), and feeds the whole answer to the decoder,
called directly (not under the ``wire.decoded`` net, so a raw ``TypeError`` would fail the test). The decoder
either gives events whose every field has its Python type, which the accumulator folds and the session codec
stores and reads back, or raises ``InvalidResponse``. The only other outcomes allowed are ``TransportError``
when the mutation hit the payload that finished the answer (a stream without its end), and, for a seed that
is itself an in-band error (``response.failed``, an ``error`` event), the ``ProviderError`` its fields name.

At the end, whole runs over loopback HTTP show that a malformed answer ends a run as ``invalid_response``,
with a detail that names the field and no exception name or traceback in it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.wire import replay as wire
from tests.wire.replay import Cassette, Replayer
from tether import Agent, tool
from tether.errors import InvalidResponse, ProviderError, TransportError
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
from tether.limits import Limits
from tether.loop.accumulator import StreamAccumulator
from tether.messages import Message, messages_from_jsonable, messages_to_jsonable
from tether.providers.http import RetryPolicy
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.openai_chat_stream import ChatDecoder
from tether.providers.openai_responses import OpenAIResponsesProvider
from tether.providers.openai_responses_stream import ResponsesDecoder
from tether.providers.registry import PROFILES
from tether.sessions.codec import dumps
from tether.usage import Usage

replay = wire.replay

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
SHAPES = FIXTURES / "shapes"
FINISHES = frozenset({"stop", "length", "tool_calls", "content_filter", "error", "other"})
Path_ = tuple[str | int, ...]


# --- the seeds: every recorded or written answer ------------------------------------------------------------


def _answers(folders: tuple[str, ...], endpoint: str) -> list[tuple[str, bool, tuple[Any, ...]]]:
    """(name, streamed, payloads) of every successful answer at ``endpoint`` in the cassettes of ``folders``."""
    answers = []
    for folder in folders:
        for file in sorted((FIXTURES / folder).glob("*.yaml")):
            for number, interaction in enumerate(Cassette.load(file).interactions):
                if interaction.status != 200 or not interaction.path.endswith(endpoint):
                    continue
                name = f"{folder}/{file.name}#{number}"
                if interaction.is_event_stream:
                    data = [json.loads(d) for d in interaction.events_data() if d.strip() and d != "[DONE]"]
                    answers.append((name, True, tuple(data)))
                else:
                    answers.append((name, False, (interaction.response_json(),)))
    return answers


@cache
def chat_answers() -> list[tuple[str, bool, tuple[Any, ...]]]:
    folders = ("wire/openai_chat", "wire/openai_compatible", "shapes/openai_chat", "shapes/openai_compatible")
    return _answers(folders, "/chat/completions")


@cache
def responses_answers() -> list[tuple[str, bool, tuple[Any, ...]]]:
    folders = ("wire/openai_responses", "shapes/openai_responses", "shapes/openai_compatible")
    answers = _answers(folders, "/responses")
    # The final response of every stream is a whole response too.
    finals = [
        (f"{name} (final response)", False, (payloads[-1]["response"],))
        for name, streamed, payloads in answers
        if streamed and payloads[-1].get("type") in ("response.completed", "response.incomplete")
    ]
    return answers + finals


def paths(value: Any, prefix: Path_ = ()) -> Iterator[Path_]:
    """Every path in a JSON value, the root included."""
    yield prefix
    if isinstance(value, dict):
        for key, inner in value.items():
            yield from paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from paths(inner, (*prefix, index))


@cache
def payload_paths(kind: str, answer: int, payload: int) -> tuple[Path_, ...]:
    answers = chat_answers() if kind == "chat" else responses_answers()
    return tuple(paths(answers[answer][2][payload]))


DELETE = object()
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(), st.text(max_size=6))
JSON_KINDS: dict[str, st.SearchStrategy[Any]] = {
    "null": st.none(),
    "bool": st.booleans(),
    "int": st.integers(-(2**40), 2**40),
    "float": st.floats(),
    "str": st.text(max_size=8),
    "list": st.lists(SCALARS, max_size=3),
    "object": st.dictionaries(st.text(max_size=6), SCALARS, max_size=3),
}


def kind_of(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "bool", int: "int", float: "float", str: "str", list: "list", dict: "object"}[type(value)]


def at(value: Any, path: Path_) -> Any:
    for step in path:
        value = value[step]
    return value


def mutated(value: Any, path: Path_, replacement: Any) -> Any:
    """A copy of ``value`` with the value at ``path`` replaced (or deleted, for :data:`DELETE`)."""
    if not path:
        return replacement
    copied = copy.deepcopy(value)
    parent = at(copied, path[:-1])
    if replacement is DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = replacement
    return copied


@st.composite
def mutations(draw: st.DrawFn, kind: str, streamed: bool) -> tuple[str, tuple[Any, ...], int, Path_, Any]:
    """(answer name, payloads with one mutated, which one, the path, the new value or DELETE)."""
    answers = chat_answers() if kind == "chat" else responses_answers()
    choices = [number for number, answer in enumerate(answers) if answer[1] is streamed]
    number = draw(st.sampled_from(choices))
    name, _, payloads = answers[number]
    which = draw(st.integers(0, len(payloads) - 1))
    path = draw(st.sampled_from(payload_paths(kind, number, which)))
    old = at(payloads[which], path)
    other_kinds = sorted(set(JSON_KINDS) - {kind_of(old)})
    if path and draw(st.integers(0, 5)) == 0:
        replacement = DELETE
    else:
        replacement = draw(JSON_KINDS[draw(st.sampled_from(other_kinds))])
    changed = list(payloads)
    changed[which] = mutated(payloads[which], path, replacement)
    return name, tuple(changed), which, path, replacement


# --- the oracle ---------------------------------------------------------------------------------------------


def assert_well_typed(events: list[LlmEvent]) -> None:
    """Every field of every event has its declared Python type; usage counts are non-negative integers."""
    for event in events:
        if isinstance(event, StreamStart):
            assert event.model is None or type(event.model) is str, event
            assert event.response_id is None or type(event.response_id) is str, event
        elif isinstance(event, TextDelta):
            assert type(event.text) is str, event
            assert event.provider_data is None or type(event.provider_data) is dict, event
        elif isinstance(event, ThinkingDelta):
            assert type(event.text) is str, event
            assert event.signature is None or type(event.signature) is str, event
            assert event.provider_data is None or type(event.provider_data) is dict, event
        elif isinstance(event, ToolCallStart):
            assert (type(event.id), type(event.name), type(event.index)) == (str, str, int), event
            assert event.id, event
            assert event.provider_data is None or type(event.provider_data) is dict, event
        elif isinstance(event, ToolCallDelta):
            assert (type(event.id), type(event.arguments_delta)) == (str, str), event
        elif isinstance(event, ToolCallEnd):
            assert type(event.id) is str, event
        else:
            assert isinstance(event, StreamEnd), event
            assert event.finish_reason in FINISHES, event
            for field in ("input_tokens", "output_tokens", "cache_read_tokens", "reasoning_tokens"):
                count = getattr(event.usage, field)
                assert type(count) is int, event
                assert count >= 0, event


def assert_storable(events: list[LlmEvent]) -> None:
    """The turn the events make folds, and its message goes through the session codec and back unchanged."""
    accumulator = StreamAccumulator()
    try:
        for event in events:
            accumulator.add(event)
    except InvalidResponse:
        return  # a contract break the loop reports as invalid_response (a call started twice, ...)
    message = accumulator.finish().message
    stored = json.loads(dumps(messages_to_jsonable([message])))
    assert messages_from_jsonable(stored) == [message]


def fails(decode: Callable[[], list[LlmEvent]]) -> bool:
    """Whether an answer is an in-band error (the seed before its mutation)."""
    try:
        decode()
    except ProviderError:
        return True
    return False


def check(decode: Callable[[], list[LlmEvent]], finishing: bool, error_seed: bool, where: str) -> None:
    """The decoder's outcome is one of the allowed ones (module docstring)."""
    invalid: InvalidResponse | None = None
    try:
        events = decode()
    except InvalidResponse as error:
        invalid = error
    except TransportError:
        assert finishing, f"{where}: a stream whose finish was intact ended as a transport error"
        return
    except ProviderError:
        assert error_seed, f"{where}: an answer that was not an error became one"
        return
    if invalid is not None:  # the decoder's own error names a field; the net's would name an exception
        assert "exception" not in invalid.details, f"{where}: the net caught it, not the decoder: {invalid}"
        return
    assert_well_typed(events)
    assert_storable(events)


def chat_finishes(payload: Any) -> bool:
    choices = payload.get("choices") if isinstance(payload, dict) else None
    return any(isinstance(c, dict) and c.get("finish_reason") for c in choices or ())


def responses_finishes(payload: Any) -> bool:
    return isinstance(payload, dict) and payload.get("type") in ("response.completed", "response.incomplete")


# --- generated answers --------------------------------------------------------------------------------------

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(mutations("chat", streamed=True))
def test_a_chat_stream_with_one_field_of_the_wrong_type_is_typed_events_or_invalid_response(
    case: tuple[str, tuple[Any, ...], int, Path_, Any],
) -> None:
    name, payloads, which, path, _ = case
    original = {n: p for n, _, p in chat_answers()}[name]

    def decoding(chunks: tuple[Any, ...]) -> Callable[[], list[LlmEvent]]:
        def decode() -> list[LlmEvent]:
            decoder = ChatDecoder(PROFILES["openai-compatible"])
            return [event for payload in chunks for event in decoder.feed(payload)] + decoder.end()

        return decode

    where = f"{name} chunk {which} at {path}"
    check(decoding(payloads), chat_finishes(original[which]), fails(decoding(original)), where)


@SETTINGS
@given(mutations("chat", streamed=False))
def test_a_whole_chat_completion_with_one_field_of_the_wrong_type_is_typed_events_or_invalid_response(
    case: tuple[str, tuple[Any, ...], int, Path_, Any],
) -> None:
    name, (body,), _, path, _ = case
    check(lambda: ChatDecoder(PROFILES["openai"]).whole(body), True, False, f"{name} at {path}")


@SETTINGS
@given(mutations("responses", streamed=True))
def test_a_responses_stream_with_one_field_of_the_wrong_type_is_typed_events_or_invalid_response(
    case: tuple[str, tuple[Any, ...], int, Path_, Any],
) -> None:
    name, payloads, which, path, _ = case
    original = {n: p for n, _, p in responses_answers()}[name]

    def decoding(events: tuple[Any, ...]) -> Callable[[], list[LlmEvent]]:
        def decode() -> list[LlmEvent]:
            decoder = ResponsesDecoder()
            return [event for payload in events for event in decoder.feed(payload)] + decoder.end()

        return decode

    where = f"{name} event {which} at {path}"
    check(decoding(payloads), responses_finishes(original[which]), fails(decoding(original)), where)


@SETTINGS
@given(mutations("responses", streamed=False))
def test_a_whole_response_with_one_field_of_the_wrong_type_is_typed_events_or_invalid_response(
    case: tuple[str, tuple[Any, ...], int, Path_, Any],
) -> None:
    name, (body,), _, path, _ = case
    check(lambda: ResponsesDecoder().whole(body), False, False, f"{name} at {path}")


def test_the_seeds_cover_streams_and_whole_answers_of_both_apis() -> None:
    """The generated tests draw from every kind of answer (a folder emptied by mistake would hollow them)."""
    for answers in (chat_answers(), responses_answers()):
        assert any(streamed for _, streamed, _ in answers)
        assert any(not streamed for _, streamed, _ in answers)
    assert len(chat_answers()) >= 10
    assert len(responses_answers()) >= 10


# --- named examples -----------------------------------------------------------------------------------------


def chunk(delta: dict[str, Any], finish: str | None = None, **more: Any) -> dict[str, Any]:
    return {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **more}


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        (chunk({"content": 5}), "choices[0].delta.content"),
        (chunk({"content": {"text": "hi"}}), "choices[0].delta.content"),
        (chunk({"reasoning_content": ["a"]}), "choices[0].delta.reasoning_content"),
        (chunk({"refusal": True}), "choices[0].delta.refusal"),
        (chunk({"tool_calls": {"index": 0}}), "choices[0].delta.tool_calls"),
        (chunk({"tool_calls": ["call"]}), "choices[0].delta.tool_calls[0]"),
        (chunk({"tool_calls": [{"index": "0", "function": {"name": "f"}}]}), "choices[0].delta.tool_calls[0].index"),
        (
            chunk({"tool_calls": [{"index": 0, "function": {"name": 7}}]}),
            "choices[0].delta.tool_calls[0].function.name",
        ),
        (
            chunk({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": [1]}}]}),
            "choices[0].delta.tool_calls[0].function.arguments",
        ),
        (chunk({"tool_calls": [{"index": 0, "id": 3, "function": {}}]}), "choices[0].delta.tool_calls[0].id"),
        (
            chunk({"tool_calls": [{"index": 0, "function": {"name": "f"}}, {"index": 1, "function": {"name": 5}}]}),
            "choices[0].delta.tool_calls[1].function.name",
        ),
        (
            chunk({"tool_calls": [{"index": 0, "function": {"name": "f"}, "extra_content": "sig"}]}),
            "choices[0].delta.tool_calls[0].extra_content",
        ),
        (chunk({"tool_calls": [{"index": 0, "function": "f"}]}), "choices[0].delta.tool_calls[0].function"),
        (chunk({"function_call": {"name": 7}}), "choices[0].delta.function.name"),
        (chunk({"function_call": {"name": "f", "arguments": 1.5}}), "choices[0].delta.function.arguments"),
        (chunk({}, finish=["stop"]), "choices[0].finish_reason"),  # type: ignore[arg-type]
        (chunk("hello"), "choices[0].delta"),  # type: ignore[arg-type]
        ({"choices": "none"}, "choices"),
        ({"choices": [], "model": {"name": "m"}}, "model"),
        ({"choices": [], "usage": [1, 2]}, "usage"),
        ({"choices": [], "usage": {"prompt_tokens_details": 3}}, "usage.prompt_tokens_details"),
    ],
)
def test_a_chat_field_of_the_wrong_type_is_an_invalid_response_naming_it(bad: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidResponse) as caught:
        ChatDecoder(PROFILES["openai"]).feed(bad)
    assert caught.value.details == {"field": field}
    assert field in caught.value.message


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"type": 5}, "event.type"),
        ({"type": "response.output_text.delta", "output_index": 0, "delta": 5}, "response.output_text.delta.delta"),
        (
            {"type": "response.output_text.delta", "output_index": "0", "delta": "x"},
            "response.output_text.delta.output_index",
        ),
        ({"type": "response.output_item.added", "item": "call"}, "response.output_item.added.item"),
        (
            {"type": "response.output_item.added", "output_index": 0, "item": {"type": "function_call", "name": 1}},
            "response.output_item.added.item.name",
        ),
        (
            {"type": "response.output_item.done", "output_index": 0, "item": {"type": "message", "content": {}}},
            "response.output_item.done.item.content",
        ),
        (
            {
                "type": "response.output_item.done",
                "item": {"type": "message", "content": [{"type": "output_text", "text": None}, 3]},
            },
            "response.output_item.done.item.content[1]",
        ),
        ({"type": "response.completed", "response": {"output": [], "usage": "many"}}, "response.usage"),
        ({"type": "response.completed", "response": {"output": [], "status": 1}}, "response.status"),
        ({"type": "response.completed", "response": {"output": {"0": {}}}}, "response.output"),
    ],
)
def test_a_responses_field_of_the_wrong_type_is_an_invalid_response_naming_it(bad: dict[str, Any], field: str) -> None:
    decoder = ResponsesDecoder()
    decoder.feed({"type": "response.created", "response": {"id": "r", "model": "m"}})
    with pytest.raises(InvalidResponse) as caught:
        decoder.feed(bad)
    assert caught.value.details == {"field": field}


@pytest.mark.parametrize(
    ("count", "read"),
    [(-5, 0), (2.9, 2), ("12", 12), ("many", 0), (True, 0), (None, 0), ([3], 0), (float("nan"), 0), (10**30, 10**30)],
)
def test_usage_counts_of_any_type_reach_usage_as_non_negative_integers(count: Any, read: int) -> None:
    chat = {
        "prompt_tokens": count,
        "completion_tokens": count,
        "completion_tokens_details": {"reasoning_tokens": count},
    }
    (end,) = ChatDecoder(PROFILES["openai"]).whole({"choices": [{"finish_reason": "stop"}], "usage": chat})[1:]
    assert isinstance(end, StreamEnd)
    assert end.usage == Usage(input_tokens=read, output_tokens=read, reasoning_tokens=read)
    responses = {"input_tokens": count, "output_tokens": count, "output_tokens_details": {"reasoning_tokens": count}}
    end = ResponsesDecoder().whole({"output": [], "usage": responses})[-1]
    assert isinstance(end, StreamEnd)
    assert end.usage == Usage(input_tokens=read, output_tokens=read, reasoning_tokens=read)


def test_arguments_sent_as_an_object_are_read_as_their_json_text() -> None:
    """Some servers send a call's arguments as an object, not as JSON text: the object is the arguments."""
    events = ChatDecoder(PROFILES["ollama"]).whole(
        {
            "choices": [
                {
                    "message": {"tool_calls": [{"function": {"name": "f", "arguments": {"x": 1}}}]},
                    "finish_reason": "tool_calls",
                }
            ]
        }
    )
    assert [e.arguments_delta for e in events if isinstance(e, ToolCallDelta)] == ['{"x": 1}']


# --- whole runs over loopback HTTP --------------------------------------------------------------------------


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return "sunny"


@pytest.mark.parametrize(
    ("cassette", "build", "field"),
    [
        (
            "openai_compatible/chat_malformed_tool_call_name.yaml",
            lambda url: OpenAIChatProvider(
                "m", profile=PROFILES["vllm"], base_url=url, retry=RetryPolicy(max_retries=0)
            ),
            "choices[0].delta.tool_calls[0].function.name",
        ),
        (
            "openai_compatible/responses_malformed_text_delta.yaml",
            lambda url: OpenAIResponsesProvider("m", base_url=url, retry=RetryPolicy(max_retries=0)),
            "response.output_text.delta.delta",
        ),
    ],
)
async def test_a_malformed_answer_ends_the_run_as_invalid_response_naming_the_field(
    replay: Replayer, cassette: str, build: Callable[[str], Any], field: str
) -> None:
    server = await replay.serve(SHAPES / cassette)
    agent = Agent(build(server.base_url), tools=[get_weather], limits=Limits(invalid_response_retries=1))
    result = await agent.run("Weather in Paris?")

    assert result.stop_reason == "invalid_response"
    assert result.error is None or getattr(result.error, "code", None) == "invalid_response"
    assert field in result.detail
    for word in ("Traceback", "TypeError", "AttributeError", "KeyError"):
        assert word not in result.detail
    assert [m.role for m in result.messages] == ["user"]  # nothing malformed was kept
    assert isinstance(result.messages[0], Message)
    server.assert_all_served()  # asked once and corrected once, as the limits say


def test_content_sent_as_a_list_of_parts_is_read_as_its_text_parts() -> None:
    """Some compatible servers send ``content`` as parts (text, and parts of their own such as thinking)."""
    parts = [{"type": "thinking", "thinking": [{"type": "text", "text": "hm"}]}, {"type": "text", "text": "Hi"}]
    events = ChatDecoder(PROFILES["openai-compatible"]).whole(
        {"choices": [{"message": {"content": parts}, "finish_reason": "stop"}]}
    )
    assert [e for e in events if isinstance(e, TextDelta)] == [TextDelta("Hi")]
    with pytest.raises(InvalidResponse, match=r"choices\[0\]\.message\.content\[0\]\.text"):
        ChatDecoder(PROFILES["openai"]).whole({"choices": [{"message": {"content": [{"type": "text", "text": 1}]}}]})


@pytest.mark.parametrize(
    "body",
    [
        {"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}]},
        {"id": "x", "choices": [{"index": 0, "message": {"content": "hi"}, "finish_reason": None}]},
        {"id": "x", "choices": []},
        {"chaos": "a foreign object"},
    ],
)
def test_a_whole_completion_without_a_finish_reason_is_malformed_not_a_broken_connection(body: Any) -> None:
    decoder = ChatDecoder(PROFILES["openai"])
    with pytest.raises(InvalidResponse):
        decoder.whole(body)
