"""The rules for a tool call's arguments: read from the model's text, bounded in depth, and why unusable.

This is where arguments come in, whatever the way (a provider's stream, a JSON action, a stored history), so
no later step (validation, the session's encoding, a provider's encoding of the next request) meets arguments
nested deeper than :data:`MAX_ARGUMENT_DEPTH`: such arguments are kept raw (``arguments=None``), cut to their
start, and answered ``invalid_arguments`` by the executor, which says why with :func:`arguments_problem`.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
from msgspec.structs import replace

from tether.messages import ToolCall

MAX_ARGUMENT_DEPTH = 64
"""Levels of objects and arrays a tool call's arguments may nest, the arguments object itself being the first.

Deeper arguments are not parsed: the call keeps ``arguments=None`` and the executor answers it with an
``invalid_arguments`` result saying why. Past this, every later step (validation, the session's encoding, the
providers' encoding of the next request) would otherwise need the interpreter's recursion to hold them."""
KEPT_RAW_ARGUMENTS = 1_000
"""Characters of too deeply nested raw arguments kept in the transcript (and sent back to the model)."""
TOO_DEEP_MARK = f" [arguments cut: nested more than {MAX_ARGUMENT_DEPTH} levels deep]"
"""Ends the raw arguments kept of a call whose arguments were too deeply nested."""


def loads(raw: str) -> Any:
    """The JSON value of a model's text, as Python's ``json`` reads it: ``msgspec`` reads what is standard JSON,
    and what it refuses is read again by ``json`` (which also takes ``NaN``, ``Infinity`` and a lone surrogate's
    escape, as models and their servers write them), so the value, or the error, is ``json``'s."""
    try:
        return _decode(raw)
    except msgspec.DecodeError:
        return json.loads(raw)


_decode = msgspec.json.decode


def read_arguments(raw: str) -> tuple[dict[str, Any] | None, str]:
    """Tool-call arguments as a dict (``None`` when ``raw`` is not a JSON object, or nests more than
    :data:`MAX_ARGUMENT_DEPTH` levels), and the raw text to keep: ``raw`` itself, or for arguments nested too
    deep its first :data:`KEPT_RAW_ARGUMENTS` characters and :data:`TOO_DEEP_MARK`. Empty means no arguments."""
    if not raw or raw.isspace():
        return {}, raw
    try:
        value = loads(raw)
    except RecursionError:  # deeper than the interpreter's recursion limit, so much deeper than ours
        return None, bounded_raw(raw)
    except ValueError:
        return None, raw
    if not isinstance(value, dict):
        return None, raw
    if raw.count("{") + raw.count("[") > MAX_ARGUMENT_DEPTH and nests_deeper(value, MAX_ARGUMENT_DEPTH):
        return None, bounded_raw(raw)
    return value, raw


def parse_arguments(raw: str) -> dict[str, Any] | None:
    """Tool-call arguments as a dict, or ``None`` when ``raw`` is not a JSON object or nests too deep
    (:func:`read_arguments`). Empty means no arguments."""
    return read_arguments(raw)[0]


def bounded_raw(raw: str) -> str:
    """What is kept of raw arguments nested too deep: the start, and :data:`TOO_DEEP_MARK`."""
    return raw[:KEPT_RAW_ARGUMENTS] + TOO_DEEP_MARK


def nests_deeper(value: Any, limit: int) -> bool:
    """Whether ``value`` has objects or arrays (dicts, lists, tuples) nested more than ``limit`` levels.

    Level by level, without recursion, so that any depth can be measured; a value reached twice in one level
    (shared) is walked once, and a cycle counts as too deep. About as fast as ``json.loads`` of the same data.
    """
    if not _is_container(value):
        return False
    level: list[Any] = [value]
    depth = 1
    while level:
        if depth > limit:
            return True
        below: dict[int, Any] = {}
        for item in level:
            for child in item.values() if isinstance(item, dict) else item:
                kind = type(child)
                if kind is dict or kind is list or (kind not in _LEAVES and _is_container(child)):
                    below[id(child)] = child
        level = list(below.values())
        depth += 1
    return False


_LEAVES = frozenset({str, int, float, bool, type(None)})


def _is_container(value: Any) -> bool:
    return isinstance(value, dict | list | tuple)


def bound_call(call: ToolCall) -> ToolCall:
    """``call`` itself, or, when its parsed arguments nest deeper than :data:`MAX_ARGUMENT_DEPTH`, the call
    without them (``arguments=None``) and with bounded raw text: for calls that come in already parsed (a
    stored history, a JSON action)."""
    if call.arguments is None or not nests_deeper(call.arguments, MAX_ARGUMENT_DEPTH):
        return call
    return replace(call, arguments=None, raw_arguments=bounded_raw(call.raw_arguments or ""))


def arguments_problem(raw: str | None) -> str:
    """Why the raw arguments of a call without parsed arguments cannot be used, in words for the model."""
    text = raw or ""
    too_deep = f"they are nested more than {MAX_ARGUMENT_DEPTH} levels deep (objects and arrays)"
    if text.endswith(TOO_DEEP_MARK):
        return too_deep
    try:
        value = json.loads(text)  # its error names the line and column, which the model can act on
    except RecursionError:
        return too_deep
    except ValueError as error:
        return f"they are not valid JSON ({error})"
    if not isinstance(value, dict):
        return f"they are a JSON {_json_kind(value)}, not an object"
    if nests_deeper(value, MAX_ARGUMENT_DEPTH):
        return too_deep
    return "they could not be read as a JSON object"


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null"
    return "boolean" if isinstance(value, bool) else "number"
