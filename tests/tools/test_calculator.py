"""``calculate``: exact arithmetic, nothing executed, bounded; and the pattern that keeps a grammar-bound model's
argument to arithmetic."""

from __future__ import annotations

import re

import pytest

from tether.errors import ToolError
from tether.tools.calculator import PATTERN, calculate, calculator_tool


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("17 + 25", "42"), ("12 * (3 + 4)", "84"), ("2 ** 100", str(2**100)), ("10 / 4", "2.5"), ("9 / 3", "3"),
        ("7 // 2", "3"), ("7 % 4", "3"), ("-(3 - 5)", "2"), ("0.1 + 0.2", "0.30000000000000004"),
("6 × 7", "42"), ("84 ÷ 2", "42"), ("2^10", "1024"), ("1e3 + 1", "1001"),
        ("1/3 + 1/3 + 1/3", "1"),
    ],
)  # fmt: skip
def test_an_expression_is_evaluated_exactly(expression: str, value: str) -> None:
    assert calculate(expression) == value


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("__import__('os')", "Only numbers"), ("1 / 0", "Division by zero"), ("10 ** 100000", "too large"),
        ("9 ** 9 ** 9", "too large"), ("(-8) ** 0.5", "not a real number"), ("1 +", "Not an arithmetic expression"),
        ("x + 1", "Only numbers"), ("1e999", "too large"), ("True + 1", "Only numbers"),
    ],
)  # fmt: skip
def test_anything_but_bounded_arithmetic_is_refused_with_a_reason(expression: str, problem: str) -> None:
    with pytest.raises(ToolError, match=problem):
        calculate(expression)


def test_the_tool_is_read_only_and_its_argument_may_hold_only_arithmetic() -> None:
    tool = calculator_tool()
    assert tool.read_only
    schema = tool.parameters["properties"]["expression"]
    assert schema["pattern"] == PATTERN
    assert re.fullmatch(PATTERN, "17 + 25")
    assert not re.fullmatch(PATTERN, "17 + 25 } }\n\nThe output is:")
