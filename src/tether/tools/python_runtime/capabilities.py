"""The seven capabilities as the model sees them: names, descriptions, argument schemas, argument checks.

Arguments are checked here, not by the tool layer, so that a bad call is answered with the runtime's own
``invalid_args`` envelope like every other outcome: :func:`check_arguments` refuses a missing argument, an
unknown one and one of the wrong JSON type (a bool is not accepted where text is), listing each problem.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

ParamType = Literal["string", "boolean"]

_PYTHON_TYPES: dict[ParamType, type] = {"string": str, "boolean": bool}


@dataclass(frozen=True, slots=True)
class Param:
    """One argument of a capability."""

    name: str
    type: ParamType
    description: str
    default: Any = None
    """The value when the argument is left out; ``None``: the argument is required."""


@dataclass(frozen=True, slots=True)
class Capability:
    """One capability: what the model is told and which arguments it takes."""

    name: str
    description: str
    params: tuple[Param, ...] = ()
    read_only: bool = True

    def schema(self) -> dict[str, Any]:
        """The JSON Schema of the arguments."""
        properties: dict[str, Any] = {}
        for param in self.params:
            prop: dict[str, Any] = {"type": param.type, "description": param.description}
            if param.default is not None:
                prop["default"] = param.default
            properties[param.name] = prop
        required = [param.name for param in self.params if param.default is None]
        schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
        if required:
            schema["required"] = required
        return schema


class ArgumentsRejected(ValueError):
    """Arguments that do not fit a capability; ``problems`` names each one."""

    def __init__(self, capability: str, problems: list[str]) -> None:
        super().__init__(f"invalid arguments for {capability}: " + "; ".join(problems))
        self.problems = problems


def check_arguments(capability: Capability, arguments: Any) -> dict[str, Any]:
    """The arguments with defaults filled in, or :class:`ArgumentsRejected` listing every problem."""
    if not isinstance(arguments, Mapping):
        raise ArgumentsRejected(capability.name, [f"the arguments must be a JSON object, not {_kind(arguments)}"])
    known = {param.name: param for param in capability.params}
    problems = [f"unknown argument {str(name)[:60]!r}" for name in arguments if name not in known]
    values: dict[str, Any] = {}
    for name, param in known.items():
        if name not in arguments:
            if param.default is None:
                problems.append(f"missing required argument {name!r} ({param.type})")
            values[name] = param.default
            continue
        value = arguments[name]
        if not isinstance(value, _PYTHON_TYPES[param.type]):
            problems.append(f"argument {name!r} must be a {param.type}, not {_kind(value)}")
        values[name] = value
    if problems:
        raise ArgumentsRejected(capability.name, problems)
    return values


def capabilities(*, allow_eval: bool) -> dict[str, Capability]:
    """The capabilities offered, by name; ``eval_expr`` only when evaluation is allowed."""
    expr = Param("expr", "string", _EXPR_EVAL if allow_eval else _EXPR_PATH)
    what = "the value of a Python expression in the user's session" if allow_eval else "a variable or attribute"
    offered = [
        Capability(
            "list_globals",
            "List the variables defined in the user's Python session, with the type of each. Call this first "
            "to learn which names exist; never assume a variable exists without checking.",
            (Param("include_all", "boolean", "Also list modules and names starting with '_'.", False),),
        ),
        Capability("get_type", f"The type of {what}: its name, module and qualified name.", (expr,)),
        Capability("get_repr", f"The repr() of {what}, truncated when long.", (expr,)),
        Capability(
            "get_dir",
            f"The attribute and method names of {what} (dir()), truncated when many.",
            (expr, Param("include_dunder", "boolean", "Also list __dunder__ names.", False)),
        ),
        Capability("get_doc", f"The docstring of {what} (null when it has none).", (expr,)),
        Capability(
            "get_last_exception",
            "The last exception raised by the user's code in the session (type, message, traceback), or null "
            "when there was none. Call this to answer why something failed.",
        ),
    ]
    if allow_eval:
        offered.insert(
            5,
            Capability(
                "eval_expr",
                "Evaluate a Python expression in the user's session and return its repr and what it printed. "
                "It runs real code with a time limit and can change the session: prefer the other functions "
                "for looking, and never evaluate anything with side effects the user did not ask for.",
                (Param("expr", "string", "A Python expression (not a statement), e.g. \"df['price'].mean()\"."),),
                read_only=False,
            ),
        )
    return {capability.name: capability for capability in offered}


_EXPR_EVAL = (
    "A Python expression evaluated in the user's session, usually a name or attribute path like 'df' or "
    "'client.session'. It is evaluated, so avoid calls with side effects."
)
_EXPR_PATH = (
    "A variable name or a dotted attribute path like 'df' or 'df.columns'. Expressions are not evaluated: "
    "no calls, subscripts or operators."
)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    for kind, python in (("boolean", bool), ("string", str), ("number", (int, float)), ("array", list)):
        if isinstance(value, python):
            return kind
    return "an object" if isinstance(value, Mapping) else type(value).__name__
