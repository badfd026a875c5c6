"""Messages and parts: JSON round trips (property-based), corrupt input, helpers and transcript validity."""

from __future__ import annotations

import gc
import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.errors import SessionInvalid
from tether.messages import (
    Message,
    Part,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
    messages_from_json,
    messages_from_jsonable,
    messages_to_json,
    messages_to_jsonable,
    open_tool_calls,
    transcript_problems,
)

# --- strategies ---------------------------------------------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(max_size=8), json_values, max_size=4)
provider_data = st.none() | json_objects

parts: st.SearchStrategy[Part] = st.one_of(
    st.builds(Text, text=st.text(), provider_data=provider_data),
    st.builds(Thinking, text=st.text(), signature=st.none() | st.text(), provider_data=provider_data),
    st.builds(
        ToolCall,
        id=st.text(),
        name=st.text(),
        arguments=st.none() | json_objects,
        raw_arguments=st.none() | st.text(),
        provider_data=provider_data,
    ),
    st.builds(
        ToolResult,
        call_id=st.text(),
        name=st.text(),
        content=st.text(),
        is_error=st.booleans(),
        code=st.none() | st.text(),
    ),
)
messages = st.builds(
    Message,
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    parts=st.lists(parts, max_size=5).map(tuple),
    provider_data=provider_data,
)
histories = st.lists(messages, max_size=6)


def assert_parts_are_tuples(history: list[Message]) -> None:
    for message in history:
        assert type(message.parts) is tuple


# --- round trips --------------------------------------------------------------------------------------------


@settings(deadline=None)  # the first example pays for building the pydantic adapter
@given(histories)
def test_any_history_round_trips_through_json_text(history: list[Message]) -> None:
    restored = messages_from_json(messages_to_json(history))
    assert restored == history
    assert_parts_are_tuples(restored)


@settings(deadline=None)
@given(histories)
def test_any_history_round_trips_through_json_bytes(history: list[Message]) -> None:
    assert messages_from_json(messages_to_json(history).encode()) == history


@settings(deadline=None)
@given(histories)
def test_any_history_round_trips_through_jsonable_dicts(history: list[Message]) -> None:
    restored = messages_from_jsonable(messages_to_jsonable(history))
    assert restored == history
    assert_parts_are_tuples(restored)


@settings(deadline=None)
@given(histories)
def test_jsonable_form_is_plain_json_that_survives_the_json_module(history: list[Message]) -> None:
    reparsed = json.loads(json.dumps(messages_to_jsonable(history)))
    assert messages_from_jsonable(reparsed) == history


def test_round_trip_keeps_unparseable_tool_call_raw_and_none_arguments() -> None:
    history = [Message("assistant", (ToolCall("c1", "add", None, raw_arguments='{"a": 1'),))]
    (restored,) = messages_from_json(messages_to_json(history))
    (call,) = restored.tool_calls
    assert call.arguments is None
    assert call.raw_arguments == '{"a": 1'


def test_round_trip_keeps_part_kinds_apart_when_fields_overlap() -> None:
    # Text and Thinking both have only ``text``: the ``kind`` tag must decide, not the shape.
    history = [Message("assistant", (Thinking("why"), Text("what"), Thinking("more", signature="sig")))]
    (restored,) = messages_from_json(messages_to_json(history))
    assert [type(p) for p in restored.parts] == [Thinking, Text, Thinking]


# --- corrupt input ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "location"),
    [
        ("not json", "(top level)"),
        ('{"role": "user", "parts": []}', "(top level)"),
        ('[{"role": "robot", "parts": []}]', "0.role"),
        ('[{"role": "user", "parts": "hello"}]', "0.parts"),
        ('[{"role": "user"}]', "0.parts"),
        ('[{"role": "user", "parts": [{"kind": "image", "url": "x"}]}]', "0.parts.0"),
        ('[{"role": "user", "parts": [{"text": "no kind"}]}]', "0.parts.0"),
        ('[{"role": "user", "parts": [{"kind": "text"}]}]', "0.parts.0"),
        (
            '[{"role": "user", "parts": []}, {"role": "assistant", "parts": '
            '[{"kind": "tool_call", "id": "c", "name": "n", "arguments": [1, 2]}]}]',
            "1.parts.0",
        ),
        (b"\xff\xfe\x00", "(top level)"),
    ],
)
def test_malformed_json_raises_session_invalid_naming_the_location(data: str | bytes, location: str) -> None:
    with pytest.raises(SessionInvalid) as caught:
        messages_from_json(data, source="session s1")
    assert caught.value.code == "session_invalid"
    assert "session s1" in str(caught.value)
    assert f"at {location}" in str(caught.value)


@pytest.mark.parametrize(
    ("data", "location"),
    [
        ({"role": "user", "parts": []}, "(top level)"),
        (None, "(top level)"),
        ([1], "0"),
        ([{"role": "user", "parts": [{"kind": "audio"}]}], "0.parts.0"),
        ([{"role": "tool", "parts": [{"kind": "tool_result", "call_id": "c", "name": "n"}]}], "0.parts.0"),
    ],
)
def test_wrong_shapes_raise_session_invalid_naming_the_location(data: Any, location: str) -> None:
    with pytest.raises(SessionInvalid) as caught:
        messages_from_jsonable(data, source="stored.json")
    assert caught.value.code == "session_invalid"
    assert "stored.json" in str(caught.value)
    assert f"at {location}" in str(caught.value)


@settings(deadline=None)
@given(histories, st.data())
def test_truncated_json_raises_session_invalid(history: list[Message], data: st.DataObject) -> None:
    text = messages_to_json(history)
    cut = data.draw(st.integers(min_value=0, max_value=len(text) - 1))
    with pytest.raises(SessionInvalid):
        messages_from_json(text[:cut])


def test_deeply_nested_json_raises_session_invalid_not_recursion_error() -> None:
    with pytest.raises(SessionInvalid):
        messages_from_json("[" * 10_000)


# --- Message helpers ----------------------------------------------------------------------------------------

CALL_A = ToolCall("a", "read", {"path": "x"})
CALL_B = ToolCall("b", "grep", {"pattern": "y"})


def test_message_text_joins_text_parts_and_leaves_out_thinking() -> None:
    message = Message("assistant", (Thinking("secret plan"), Text("Hello, "), CALL_A, Text("world")))
    assert message.text == "Hello, world"


def test_message_tool_calls_and_results_pick_their_parts_in_order() -> None:
    calls = Message("assistant", (Text("x"), CALL_B, Thinking("t"), CALL_A))
    results = Message("tool", (ToolResult("b", "grep", "1"), Text("note"), ToolResult("a", "read", "2")))
    assert calls.tool_calls == (CALL_B, CALL_A)
    assert calls.tool_results == ()
    assert [r.call_id for r in results.tool_results] == ["b", "a"]
    assert results.tool_calls == ()


@pytest.mark.parametrize(
    ("message", "role"),
    [(Message.system("s"), "system"), (Message.user("u"), "user"), (Message.assistant("a"), "assistant")],
)
def test_role_constructors_make_one_text_part(message: Message, role: str) -> None:
    assert message.role == role
    assert message.parts == (Text(message.text),)
    assert message.text == role[0]


# --- open_tool_calls ----------------------------------------------------------------------------------------


def test_open_tool_calls_are_the_last_assistant_calls_without_results_in_model_order() -> None:
    history = [
        Message.user("go"),
        Message("assistant", (CALL_A, CALL_B, ToolCall("c", "ls", {}))),
        Message("tool", (ToolResult("b", "grep", "ok"),)),
    ]
    assert [c.id for c in open_tool_calls(history)] == ["a", "c"]


def test_open_tool_calls_is_empty_when_every_call_is_answered() -> None:
    history = [
        Message.user("go"),
        Message("assistant", (CALL_A, CALL_B)),
        Message("tool", (ToolResult("a", "read", "1"),)),
        Message("tool", (ToolResult("b", "grep", "2"),)),
    ]
    assert open_tool_calls(history) == []


def test_open_tool_calls_looks_only_at_the_last_assistant_message() -> None:
    history = [Message.user("go"), Message("assistant", (CALL_A,)), Message.assistant("done")]
    assert open_tool_calls(history) == []
    assert open_tool_calls([]) == []


# --- transcript_problems ------------------------------------------------------------------------------------


def result(call_id: str) -> ToolResult:
    return ToolResult(call_id, "tool", "ok")


@pytest.mark.parametrize(
    ("history", "expected"),
    [
        pytest.param([Message.assistant("hi")], "starts with 'assistant'", id="starts-with-assistant"),
        pytest.param([Message("tool", (result("a"),))], "starts with 'tool'", id="starts-with-tool"),
        pytest.param([Message.user("hi"), Message.system("late")], "system message after", id="system-after-start"),
        pytest.param([Message.user("hi"), Message("assistant", (CALL_A,))], "calls without results", id="call-at-end"),
        pytest.param(
            [Message.user("hi"), Message("assistant", (CALL_A,)), Message.user("again")],
            "calls without results before it",
            id="call-then-user",
        ),
        pytest.param(
            [Message.user("hi"), Message("assistant", (CALL_A,)), Message("tool", (result("zzz"),))],
            "unknown or answered call 'zzz'",
            id="result-for-unknown-call",
        ),
        pytest.param(
            [
                Message.user("hi"),
                Message("assistant", (CALL_A,)),
                Message("tool", (result("a"),)),
                Message("tool", (result("a"),)),
            ],
            "unknown or answered call 'a'",
            id="duplicate-result",
        ),
        pytest.param(
            [Message.user("hi"), Message("assistant", (CALL_A, result("a")))],
            "tool results in a 'assistant' message",
            id="result-in-assistant-message",
        ),
        pytest.param(
            [Message("user", (Text("hi"), result("a")))],
            "tool results in a 'user' message",
            id="result-in-user-message",
        ),
        pytest.param(
            [
                Message.user("hi"),
                Message("assistant", (CALL_A, ToolCall("a", "other", {}))),
                Message("tool", (result("a"), result("a"))),
            ],
            "duplicate tool call id 'a'",
            id="duplicate-call-id",
        ),
    ],
)
def test_transcript_problems_reports_each_kind_of_invalid_transcript(history: list[Message], expected: str) -> None:
    problems = transcript_problems(history)
    assert any(expected in problem for problem in problems), problems


@pytest.mark.parametrize(
    "history",
    [
        pytest.param([], id="empty"),
        pytest.param([Message.system("s"), Message.system("s2"), Message.user("hi")], id="systems-then-user"),
        pytest.param([Message.user("hi"), Message.assistant("hello")], id="plain-chat"),
        pytest.param(
            [
                Message.system("s"),
                Message.user("hi"),
                Message("assistant", (Thinking("t"), CALL_A, CALL_B)),
                Message("tool", (result("b"), result("a"))),
                Message.assistant("done"),
                Message.user("more"),
            ],
            id="parallel-calls-answered-in-one-tool-message",
        ),
        pytest.param(
            [
                Message.user("hi"),
                Message("assistant", (CALL_A, CALL_B)),
                Message("tool", (result("a"),)),
                Message("tool", (result("b"),)),
            ],
            id="calls-answered-in-separate-tool-messages",
        ),
    ],
)
def test_transcript_problems_accepts_valid_transcripts(history: list[Message]) -> None:
    assert transcript_problems(history) == []


# --- immutability -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [Text("t"), Thinking("t"), CALL_A, ToolResult("a", "read", "x"), Message.user("u")],
    ids=lambda v: type(v).__name__,
)
def test_parts_and_messages_are_frozen_and_slotted(value: msgspec.Struct) -> None:
    first_field = msgspec.structs.fields(value)[0].name
    with pytest.raises(AttributeError):
        setattr(value, first_field, "changed")
    assert not hasattr(value, "__dict__")
    assert "__slots__" in type(value).__dict__


@pytest.mark.parametrize("part", [Text("t"), Thinking("t"), CALL_A, ToolResult("a", "read", "x")], ids=repr)
def test_parts_are_never_tracked_by_the_cyclic_collector(part: object) -> None:
    """Parts hold JSON only: the collector never walks them, however many a long run's transcript holds."""
    assert not gc.is_tracked(part)
