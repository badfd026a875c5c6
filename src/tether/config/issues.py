"""Configuration problems as people read them: which key, where it was set (file and line, variable or
flag), what is wrong, and for a misspelt key or value the name that was probably meant.

A validation error from pydantic has a location (``("runtime", "limits", "max_turns")``) and a terse
message; :func:`describe` turns it into ``runtime.limits.max_turns: must be a whole number >= 1, or "off",
not 0``, and the loader adds where that key was set.

Messages stay short whatever the file holds: at most :data:`MAX_ISSUES` problems are listed (then "and N
more"), and a long value or key is quoted by its start and its length.
"""

from __future__ import annotations

import difflib
import json
import re
import types
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import ErrorDetails

from tether.config.redact import Redactor
from tether.config.schema import Config
from tether.errors import ConfigInvalid

Loc = tuple[str | int, ...]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")

MAX_ISSUES = 20
"""Problems listed in one error; the rest are counted (``details["more"]``)."""
SHOWN = 60
"""Characters of a value or key that a message quotes."""

_TYPES = {
    "string_type": "must be a string",
    "int_type": "must be a whole number",
    "float_type": "must be a number",
    "bool_type": "must be true or false",
    "list_type": "must be a list",
    "dict_type": "must be a table",
    "model_type": "must be a table",
    "missing": "is required",
}


@dataclass(frozen=True, slots=True)
class Issue:
    """One problem: the key, what is wrong with it, and where it was set (``origin``, ``line``)."""

    key: str
    """The dotted key, as it would be written in the file (``mcp.servers[0].command``)."""
    message: str
    origin: str | None = None
    """The file, ``environment variable TETHER_...`` or ``command line``; ``None``: not set anywhere."""
    line: int | None = None
    """The line in ``origin`` when it is a file."""

    def __str__(self) -> str:
        where = self.origin or "defaults"
        if self.line is not None:
            where = f"{where} line {self.line}"
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"


def fail(issues: Sequence[Issue], *, more: int = 0) -> ConfigInvalid:
    """One ``ConfigInvalid`` for the problems, in file order: the first :data:`MAX_ISSUES` listed (as dicts in
    ``details["issues"]``), the others and ``more`` (problems found but not described) only counted
    (``details["more"]``)."""
    issues = sorted(issues, key=lambda issue: (issue.origin or "", issue.line or 0))
    more += max(0, len(issues) - MAX_ISSUES)
    issues = issues[:MAX_ISSUES]
    if len(issues) == 1 and not more:
        message = f"invalid configuration: {issues[0]}"
    else:
        message = "invalid configuration:\n" + "\n".join(f"  {issue}" for issue in issues)
        if more:
            message += f"\n  and {more} more problem{'s' if more > 1 else ''}"
    details = [{"key": i.key, "message": i.message, "origin": i.origin, "line": i.line} for i in issues]
    return ConfigInvalid(message, details={"issues": details, "more": more})


def dotted(loc: Sequence[str | int]) -> str:
    """``("mcp", "servers", 0, "id")`` -> ``mcp.servers[0].id``; keys that need quotes get them."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            key = part if len(part) <= SHOWN and _BARE_KEY.fullmatch(part) else quoted(part)
            text += f".{key}" if text else key
    return text or "(the whole file)"


def describe(error: ErrorDetails, redactor: Redactor) -> tuple[Loc, str]:
    """The location and a plain message for one pydantic error (the value shown only if not a secret)."""
    loc: Loc = tuple(error["loc"])
    kind = error["type"]
    if kind == "extra_forbidden":
        return loc, unknown_key(str(loc[-1]), known_keys(loc[:-1]))
    if kind == "literal_error":
        allowed = [str(value) for value in literal_values(loc)]
        message = f"must be one of {', '.join(repr(value) for value in allowed)}, not {show(error['input'], redactor)}"
        return loc, message + suggestion(error["input"], allowed)
    if kind == "value_error":
        message = str(error["ctx"]["error"]) if "ctx" in error else error["msg"]
        return loc, f"{message}, not {show(error['input'], redactor)}"
    if kind == "missing":
        return loc, "is required"
    message = _TYPES.get(kind, error["msg"])
    return loc, f"{message}, not {show(error['input'], redactor)}"


def quoted(text: str) -> str:
    """``text`` as TOML writes a string, cut to its first :data:`SHOWN` characters when longer."""
    if len(text) <= SHOWN:
        return json.dumps(text)
    return f'{json.dumps(text[:SHOWN])[:-1]}…" ({len(text)} characters)'


def _named(key: str) -> str:
    """A key as a message names it: ``repr``, cut like :func:`quoted`."""
    if len(key) <= SHOWN:
        return repr(key)
    return f"{repr(key[:SHOWN])[:-1]}…' ({len(key)} characters)"


def unknown_key(key: str, known: Iterable[str]) -> str:
    known = sorted(known)
    hint = suggestion(key, known)
    if hint:
        return f"unknown key {_named(key)}{hint}"
    if known:
        return f"unknown key {_named(key)} (known keys: {', '.join(known)})"
    return f"unknown key {_named(key)}"


def suggestion(word: object, choices: Iterable[str]) -> str:
    """``"; did you mean 'model'?"`` when one of ``choices`` is close to ``word``, else ``""``."""
    choices = list(choices)
    if not isinstance(word, str) or len(word) > 3 * max(map(len, choices), default=0):
        return ""  # too long to be within the cutoff of any choice
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def show(value: object, redactor: Redactor) -> str:
    """A value as a message quotes it: strings as TOML writes them, tables and lists by kind only."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        shown = redactor.text(value)
        return "a value that looks like a secret (not shown)" if shown != value else quoted(value)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "a list"
    return repr(value)


def annotation_at(loc: Sequence[str | int]) -> Any:
    """The schema's type at ``loc`` (``None`` when the location is not in the schema)."""
    annotation: Any = Config
    for part in loc:
        annotation = _unwrap_optional(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(str(part))
            if field is None:
                return None
            annotation = field.annotation
        elif get_origin(annotation) in (dict, list):
            annotation = get_args(annotation)[-1]
        else:
            return None
    return _unwrap_optional(annotation)


def known_keys(loc: Sequence[str | int]) -> list[str]:
    """The keys the table at ``loc`` may hold."""
    annotation = annotation_at(loc)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return list(annotation.model_fields)
    return []


def literal_values(loc: Sequence[str | int]) -> list[object]:
    annotation = annotation_at(loc)
    return list(get_args(annotation)) if get_origin(annotation) is Literal else []


def _unwrap_optional(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, types.UnionType):
        members = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(members) == 1:
            return members[0]
    return annotation
