"""The typed readers of provider JSON."""

from __future__ import annotations

from typing import Any

import pytest

from tether.errors import InvalidResponse
from tether.providers.wire import as_count, as_object, malformed


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


def test_absent_reads_as_empty_and_a_wrong_type_names_the_field() -> None:
    assert as_object(None, "p", "x") == {}
    with pytest.raises(InvalidResponse) as raised:
        as_object("s", "p", "choices[0]")
    assert raised.value.details == {"field": "choices[0]"}
