"""Gemini answers with fields of the wrong JSON type: a typed ``invalid_response``, never a crash; and tool
schemas of any JSON: a schema Gemini can read, never an exception.

Real recorded answers (``tests/fixtures/wire/google/``) are changed at one random path (see
:mod:`tests.providers.hostile`) and fed to :class:`GeminiDecoder` directly, without the net
(``wire.decoded``) the provider puts under it: the decoder itself must either produce events whose fields
have the right Python types, or raise ``InvalidResponse``. A stream may also end as a ``transport`` error when
the change removed every finish reason: Gemini's streams have no closing event, so such a stream cannot be
told from one that was cut. What the decoder lets through must also fold into a turn, store in a session and
go back out in the next request without an exception.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.providers.hostile import check_events, history_with, mutated, recorded_bodies, recorded_streams
from tether.errors import InvalidResponse, TransportError
from tether.events import LlmEvent, StreamEnd
from tether.providers.gemini import encode_contents, parse_usage
from tether.providers.gemini_schema import MAX_DEPTH, to_gemini_schema
from tether.providers.gemini_stream import GeminiDecoder

STREAMS = recorded_streams("google")
BODIES = recorded_bodies("google")
HOSTILE = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def a_stream_with_one_bad_field(draw: st.DrawFn) -> tuple[list[Any], str]:
    chunks = list(draw(st.sampled_from(STREAMS)))
    position = draw(st.integers(min_value=0, max_value=len(chunks) - 1))
    chunks[position], change = draw(mutated(chunks[position]))
    return chunks, f"chunk {position}: {change}"


def decode_stream(chunks: list[Any], *, live: bool = True) -> list[LlmEvent]:
    decoder = GeminiDecoder(live=live)
    out: list[LlmEvent] = []
    for chunk in chunks:
        out += decoder.feed(chunk)
    return out + decoder.end()


def test_the_recordings_hold_streams_and_whole_bodies() -> None:
    assert len(STREAMS) >= 3
    assert len(BODIES) >= 3
    for chunks in STREAMS:
        check_events(decode_stream(chunks))
    for body in BODIES:
        check_events(GeminiDecoder(live=False).whole(body))


@HOSTILE
@given(a_stream_with_one_bad_field(), st.booleans())
def test_a_stream_with_a_field_of_the_wrong_type_gives_typed_events_or_invalid_response(
    case: tuple[list[Any], str], live: bool
) -> None:
    chunks, _change = case
    cut: TransportError | None = None
    try:
        decoded = decode_stream(chunks, live=live)
    except InvalidResponse:
        return
    except TransportError as error:
        cut = error
    if cut is not None:
        assert "before finishing" in cut.message
        return
    turn = check_events(decoded)
    encode_contents(history_with(turn))


@HOSTILE
@given(st.sampled_from(BODIES).flatmap(mutated))
def test_a_whole_answer_with_a_field_of_the_wrong_type_gives_typed_events_or_invalid_response(
    case: tuple[Any, str],
) -> None:
    body, _change = case
    try:
        decoded = GeminiDecoder(live=False).whole(body)
    except InvalidResponse:
        return
    turn = check_events(decoded)
    encode_contents(history_with(turn))


# --- each field the decoder reads, named in the error ------------------------------------------------------


def answer(*parts: Any, **fields: Any) -> dict[str, Any]:
    candidate = {"content": {"role": "model", "parts": list(parts)}, "finishReason": "STOP", "index": 0}
    return {"candidates": [candidate], "modelVersion": "gemini-2.5-flash", **fields}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"candidates": {"content": {}}}, "candidates"),
        ({"candidates": ["text"]}, "candidates[0]"),
        ({"candidates": [{"index": "0"}]}, "candidates[0].index"),
        ({"candidates": [{"content": "hello"}]}, "candidates[0].content"),
        ({"candidates": [{"content": {"parts": {"text": "a"}}}]}, "candidates[0].content.parts"),
        ({"candidates": [{"content": {"parts": [None, 5]}}]}, "candidates[0].content.parts[1]"),
        ({"candidates": [{"finishReason": 1}]}, "candidates[0].finishReason"),
        ({"candidates": [{"finishReason": "SAFETY", "finishMessage": ["x"]}]}, "candidates[0].finishMessage"),
        (answer({"text": 42}), "candidates[0].content.parts[0].text"),
        (answer({"text": "a", "thought": "yes"}), "candidates[0].content.parts[0].thought"),
        (answer({"text": "a", "thoughtSignature": {"s": 1}}), "candidates[0].content.parts[0].thoughtSignature"),
        (answer({"functionCall": "weather(Paris)"}), "candidates[0].content.parts[0].functionCall"),
        (answer({"functionCall": {"name": ["weather"]}}), "candidates[0].content.parts[0].functionCall.name"),
        (answer({"functionCall": {"name": "w", "id": 7}}), "candidates[0].content.parts[0].functionCall.id"),
        (answer({"functionCall": {"name": "w", "args": [1]}}), "candidates[0].content.parts[0].functionCall.args"),
        (answer({"text": "a"}, modelVersion=2.5), "modelVersion"),
        (answer({"text": "a"}, responseId={"id": 1}), "responseId"),
        (answer({"text": "a"}, usageMetadata=[3]), "usageMetadata"),
        (answer({"text": "a"}, promptFeedback="SAFETY"), "promptFeedback"),
        (answer({"text": "a"}, promptFeedback={"blockReason": 1}), "promptFeedback.blockReason"),
    ],
)
def test_a_field_of_the_wrong_type_is_an_invalid_response_naming_it(body: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidResponse) as raised:
        GeminiDecoder(live=False).whole(body)
    assert raised.value.details["field"] == field
    assert field in raised.value.message


@pytest.mark.parametrize(
    ("count", "read"),
    [(-5, 0), (2.9, 2), ("17", 17), ("many", 0), (True, 0), ([3], 0), ({"n": 3}, 0), (None, 0)],
)
def test_a_usage_count_that_is_not_a_count_never_reaches_usage(count: Any, read: int) -> None:
    usage = parse_usage({"promptTokenCount": count, "candidatesTokenCount": count, "thoughtsTokenCount": 1})
    assert (usage.input_tokens, usage.output_tokens, usage.reasoning_tokens) == (read, read + 1, 1)
    end = GeminiDecoder().whole(answer({"text": "a"}, usageMetadata={"candidatesTokenCount": count}))[-1]
    assert isinstance(end, StreamEnd)
    assert type(end.usage.output_tokens) is int
    assert end.usage.output_tokens == read


def test_chunks_nested_in_lists_past_one_level_are_an_invalid_response_not_a_recursion() -> None:
    nested: Any = {"candidates": []}
    for _ in range(5000):
        nested = [nested]
    with pytest.raises(InvalidResponse, match="not a JSON object"):
        GeminiDecoder().feed(nested)


def test_a_whole_answer_without_any_finish_reason_is_invalid_not_a_cut_stream() -> None:
    body = {"candidates": [{"content": {"parts": [{"text": "hi"}]}}]}
    with pytest.raises(InvalidResponse, match="finishReason"):
        GeminiDecoder(live=False).whole(body)
    decoder = GeminiDecoder()
    decoder.feed(body)
    with pytest.raises(TransportError, match="before finishing"):
        decoder.end()


# --- tool schemas: any JSON a tool (or an MCP server) declares gives a schema Gemini can read ------------------

KEYWORDS = ["type", "properties", "required", "items", "prefixItems", "anyOf", "oneOf", "allOf", "$ref", "$defs"]
KEYWORDS += ["definitions", "enum", "const", "description", "format", "minimum", "exclusiveMinimum", "nullable"]
KEYWORDS += ["maxItems", "pattern", "default", "propertyOrdering", "a", "b"]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.sampled_from(["string", "integer", "object", "array", "null", "a", "b", "#/$defs/a", "#/definitions/b"]),
)
ANY_JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(KEYWORDS), inner, max_size=5),
    max_leaves=40,
)
GEMINI_KEYWORDS = {"type", "format", "description", "nullable", "enum", "properties", "required", "items", "anyOf"}
GEMINI_KEYWORDS |= {"minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties", "minimum"}
GEMINI_KEYWORDS |= {"maximum", "pattern", "default", "example", "propertyOrdering"}


def check_gemini_schema(node: Any, depth: int = 0) -> None:
    """A node of Gemini's Schema: known keywords only, each of the JSON type Gemini wants."""
    assert type(node) is dict, node
    assert set(node) <= GEMINI_KEYWORDS, node
    assert depth <= MAX_DEPTH + 1, depth
    if "type" in node:
        assert node["type"] in {"STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT"}
    for key in ("description", "pattern", "format"):
        assert type(node.get(key, "")) is str, node
    assert all(type(value) is str for value in node.get("enum", [])), node
    assert all(type(name) is str and name in node["properties"] for name in node.get("required", [])), node
    for child in node.get("properties", {}).values():
        check_gemini_schema(child, depth + 1)
    for child in node.get("anyOf", []):
        check_gemini_schema(child, depth + 1)
    if "items" in node:
        check_gemini_schema(node["items"], depth + 1)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(KEYWORDS), ANY_JSON, max_size=6))
def test_a_tool_schema_of_any_json_gives_a_gemini_schema_and_never_an_exception(schema: dict[str, Any]) -> None:
    translated = to_gemini_schema(schema)
    json.dumps(translated)
    check_gemini_schema(translated)


@pytest.mark.parametrize(
    "schema",
    [
        {"definitions": [1], "type": "object"},
        {"properties": {"a": {}}, "required": 5},
        {"properties": {"a": {}}, "required": [{"x": 1}, "a"]},
        {"$ref": "#/$defs/A", "$defs": {"A": [1]}},
        {"properties": {"a": {}}, "allOf": [{"allOf": [{"required": ["a", {"x": 1}]}]}]},
        {"type": "string", "description": 7, "minLength": "3", "propertyOrdering": [1]},
        {"required": None, "allOf": [{"properties": None}], "properties": {}},
        {"allOf": [{"required": 3}, {"required": ["a"]}], "properties": {"a": {}}},
    ],
)
def test_a_tool_schema_keyword_of_the_wrong_type_is_left_out(schema: dict[str, Any]) -> None:
    check_gemini_schema(to_gemini_schema(schema))


def test_a_tool_schema_nested_past_the_limit_ends_in_an_untyped_value() -> None:
    schema: dict[str, Any] = {}
    node = schema
    for _ in range(5000):
        node["items"] = {}
        node = node["items"]
    translated = to_gemini_schema(schema)
    depth = 0
    while "items" in translated:
        translated, depth = translated["items"], depth + 1
    assert depth == MAX_DEPTH + 1  # the root is at depth 0: the first node past the limit is the untyped one
    assert translated == {}
