"""``calculate``: exact arithmetic, for models that cannot do it in their heads (small ones cannot add).

The expression is parsed with :mod:`ast` and only numbers, ``+ - * / // % **``, unary signs and parentheses are
evaluated: nothing is executed, no name is looked up. Integers stay exact; ``/`` is exact too (a fraction that
is whole is an integer; otherwise a decimal). Powers and results are bounded, so a call cannot take the
process's time or memory. The argument's schema allows only the characters of arithmetic (:data:`PATTERN`), so
a model that generates under a grammar (the embedded one) cannot wander off into prose inside the string; the
rest is read kindly: ``×``, ``÷`` and ``^`` are ``*``, ``/`` and ``**``.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from fractions import Fraction
from typing import Annotated

from pydantic import Field

from tether.errors import ToolError
from tether.tools.base import Tool

_NUMBER = r"-?[0-9]+([.][0-9]+)?([eE]-?[0-9]+)?"  # [.], not \.: llama.cpp's grammar has no such escape
_OPERAND = rf" *\(* *{_NUMBER} *\)*"
PATTERN = rf"^{_OPERAND}( *(\*\*|//|[-+*/%^]){_OPERAND})* *$"
"""What an expression may look like: numbers (``12``, ``-3.5``, ``1e6``) between operators, with parentheses and
spaces. A grammar-bound model (the embedded one) writes under it, so it cannot start with an operator or wander into
prose inside the string; the parentheses' balance is checked when the expression is read."""
MAX_EXPRESSION = 500
"""Characters of an expression."""
MAX_DIGITS = 1_000
"""Digits of any number met on the way (an operand, an intermediate result)."""
MAX_EXPONENT = 10_000

_BINARY: dict[type[ast.operator], Callable[[Fraction, Fraction], Fraction]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: lambda a, b: Fraction(a // b),
    ast.Mod: operator.mod,
}


def calculate(expression: Annotated[str, Field(pattern=PATTERN, max_length=MAX_EXPRESSION)]) -> str:
    """Evaluate an arithmetic expression exactly, e.g. 12 * (3 + 4) or 2 ** 10 / 3.

    Args:
        expression: Numbers with + - * / // % ** and parentheses.
    """
    text = _normalized(expression)
    if len(text) > MAX_EXPRESSION:
        raise ToolError(f"The expression is longer than {MAX_EXPRESSION} characters.")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise ToolError(
            f"Not an arithmetic expression: {expression!r}. Use numbers, + - * / // % ** and ( )."
        ) from None
    return _shown(_value(tree.body))


def calculator_tool() -> Tool:
    """The ``calculate`` tool: read-only (it changes nothing), safe to run concurrently and again."""
    return Tool.from_function(calculate, read_only=True, concurrent=True, timeout=5.0)


def _normalized(expression: str) -> str:
    return expression.replace("×", "*").replace("÷", "/").replace("^", "**").replace("−", "-").strip()


def _value(node: ast.expr) -> Fraction:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        if not math.isfinite(node.value):
            raise ToolError(f"The number {ast.unparse(node)} is too large.")
        return _checked(Fraction(node.value))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd | ast.USub):
        value = _value(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Pow):
            return _checked(_power(left, right))
        function = _BINARY.get(type(node.op))
        if function is None:
            raise ToolError(f"The operator {type(node.op).__name__} is not supported.")
        if isinstance(node.op, ast.Div | ast.FloorDiv | ast.Mod) and right == 0:
            raise ToolError("Division by zero.")
        return _checked(function(left, right))
    raise ToolError(f"Only numbers and arithmetic are allowed, not {ast.unparse(node)!r}.")


def _power(base: Fraction, exponent: Fraction) -> Fraction:
    if exponent.denominator != 1:
        root = float(base) ** float(exponent)
        if isinstance(root, complex):
            raise ToolError("A fractional power of a negative number is not a real number.")
        return Fraction(root)
    if abs(exponent) > MAX_EXPONENT or (abs(base) > 1 and abs(exponent) * len(str(abs(base.numerator))) > MAX_DIGITS):
        raise ToolError(f"The power is too large (results are kept under {MAX_DIGITS} digits).")
    if base == 0 and exponent < 0:
        raise ToolError("Division by zero.")
    return base ** int(exponent)


def _checked(value: Fraction) -> Fraction:
    if max(len(str(abs(value.numerator))), len(str(value.denominator))) > MAX_DIGITS:
        raise ToolError(f"A number in the calculation has more than {MAX_DIGITS} digits.")
    return value


def _shown(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return repr(float(value))
