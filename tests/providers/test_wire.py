"""The typed readers of provider JSON."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from tether.errors import InvalidResponse
from tether.providers.wire import Shape, as_count, malformed


def test_a_wrong_value_nested_thousands_deep_is_quoted_briefly_not_by_recursion() -> None:
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    error = malformed("p", "choices", deep)
    assert error.code == "invalid_response"
    assert len(error.message) < 300
    assert "choices is list" in error.message


def test_counts_are_non_negative_integers_whatever_arrives() -> None:
    values = [5, -3, 2.9, "7", "x", True, None, float("nan"), float("inf"), [1]]
    assert [as_count(v) for v in values] == [5, 0, 2, 7, 0, 0, 0, 0, 0, 0]


class Inner(msgspec.Struct):
    text: str | None = None


class Outer(msgspec.Struct):
    choices: list[Inner] | None = None


SHAPE = Shape(Outer, "the chunk", renames={"text": "content"})


def test_absent_reads_as_empty_and_a_wrong_type_names_the_field() -> None:
    assert SHAPE.of({}, "p") == Outer()
    assert SHAPE.of_text(b'{"choices": [{"text": null}]}', "p") == Outer([Inner()])
    with pytest.raises(InvalidResponse) as raised:
        SHAPE.of({"choices": ["s"]}, "p")
    assert raised.value.details == {"field": "choices[0]"}
    assert "choices[0] is str 's'" in raised.value.message


def test_a_wrong_value_is_named_the_same_from_text_and_from_parsed_json_after_its_prefix() -> None:
    with pytest.raises(InvalidResponse) as from_text:
        SHAPE.of_text(b'{"choices": [{}, {"text": 5}]}', "p", "event")
    with pytest.raises(InvalidResponse) as from_data:
        SHAPE.of({"choices": [{}, {"text": 5}]}, "p", "event")
    for raised in (from_text, from_data):
        assert raised.value.details == {"field": "event.choices[1].content"}  # renamed as the shape says
    with pytest.raises(InvalidResponse, match="the chunk is list"):
        SHAPE.of_text(b"[1]", "p")
    with pytest.raises(InvalidResponse, match="sent an event that is not JSON"):
        SHAPE.of_text(b"{", "p")
