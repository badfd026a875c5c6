"""The older configuration layout: files written for the agent CLI that tether replaces, read key by key.

:data:`RENAMES` is the one table of that layout: each older key, the tether key it is read as, and how its
value converts. Loading reads such a file through it (:func:`read`, called for every file), and
``tether config migrate`` rewrites the file with it (:mod:`tether.config.migrate`).

The contract
------------
* **Key by key, in place.** Each older key found is read as its tether key before validation. A problem
  with its value names the key as written (``runtime.max_steps``) and its line, as a tether key's would.
* **Units.** Milliseconds become seconds exactly (1500 -> 1.5). A value that is not a number > 0 is passed
  on unconverted, so that the schema refuses it under the older key (or, ``"off"``/``false``, reads no limit).
* **Nothing picked silently.** An older key and the tether key it stands for, both set in one file, are an
  error naming both. A file may otherwise mix the two layouts.
* **Nothing else is read.** The older sections tether has no counterpart for (``[llm]``, ``[policy]``) may
  hold only the keys of the table; any other key there is an error naming it and its line, and an unknown key
  anywhere else is refused by the schema as always.
* **Said once.** :func:`notice` is the one line that tells the user a file was read this way.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from tether.config.issues import Loc, dotted
from tether.config.schema import Config

EACH = "[]"
"""In a key of :data:`RENAMES`: every element of the list named before it (``mcp.servers[]``)."""


def unchanged(value: Any) -> Any:
    """The value as written."""
    return value


def milliseconds(value: Any) -> Any:
    """Milliseconds -> seconds, exactly (1500 -> 1.5); anything but a finite number > 0 stays as written."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0:
        return float(Decimal(repr(value)) / 1000)
    return value


def _pattern(key: str) -> tuple[str, ...]:
    """``"mcp.servers[].tool_timeout"`` -> ``("mcp", "servers", "[]", "tool_timeout")``."""
    parts: list[str] = []
    for part in key.split("."):
        if part.endswith(EACH):
            parts += [part[: -len(EACH)], EACH]
        else:
            parts.append(part)
    return tuple(parts)


@dataclass(frozen=True, slots=True)
class Rename:
    """One key of the older layout and the tether key it is read as."""

    old: str
    """Dotted, with ``[]`` after a list's name for each of its elements."""
    new: str
    convert: Callable[[Any], Any] = unchanged
    unit: str = ""
    """What the conversion does, for people (``"ms -> s"``); empty when the value is unchanged."""

    @property
    def old_path(self) -> tuple[str, ...]:
        return _pattern(self.old)

    @property
    def new_path(self) -> tuple[str, ...]:
        return _pattern(self.new)


RENAMES: tuple[Rename, ...] = (
    Rename("runtime.default_model", "runtime.model"),
    Rename("runtime.max_steps", "runtime.limits.max_turns"),
    Rename("runtime.turn_timeout_ms", "runtime.limits.run_timeout", milliseconds, "ms -> s"),
    Rename("llm.retry_max", "runtime.retries"),
    Rename("llm.stream_default", "cli.stream"),
    Rename("policy.deny_tools", "tools.deny"),
    Rename("mcp.servers[].tool_timeout_ms", "mcp.servers[].tool_timeout", milliseconds, "ms -> s"),
)
"""The older layout, key by key. Keys it had that are not here have no equivalent in tether."""

OLDER_SECTIONS = tuple(dict.fromkeys(r.old_path[0] for r in RENAMES if r.old_path[0] not in Config.model_fields))
"""Top-level tables of the older layout only (``llm``, ``policy``)."""


@dataclass(frozen=True, slots=True)
class Move:
    """One older key found in a file: where it is written, where tether reads it, the value tether reads."""

    rename: Rename
    old: Loc
    new: Loc
    written: Any
    """The value as the file writes it."""
    value: Any
    """The value as tether reads it (converted)."""


@dataclass
class Reading:
    """A file's data with its older keys read as tether's, and what that took."""

    data: dict[str, Any]
    moves: list[Move] = field(default_factory=list)
    problems: list[tuple[Loc, str]] = field(default_factory=list)
    """Key as written -> what is wrong: an older key whose tether key is set too, a key of an older section
    that has no equivalent. Those keys are left out of ``data``."""


def read(data: dict[str, Any], line: Callable[[Loc], int | None]) -> Reading:
    """``data`` (a file's parsed TOML, changed in place) with its older keys moved to tether's; ``line`` gives
    the line of a key as written, for the message about an older key and a tether key set together."""
    reading = Reading(data)
    for rename in RENAMES:
        for old in list(occurrences(data, rename.old_path)):
            _move(reading, rename, old, line)
    for section in OLDER_SECTIONS:
        table = data.get(section)
        if not isinstance(table, dict):
            continue  # absent, or not a table: the schema says "unknown key"
        known = " and ".join(r.old_path[1] for r in RENAMES if r.old_path[0] == section)
        for key in table:
            problem = f"unknown key: tether has no equivalent (of the older layout's [{section}] it reads {known})"
            reading.problems.append(((section, key), problem))
        del data[section]
    return reading


def occurrences(data: Any, pattern: tuple[str, ...], at: Loc = ()) -> Iterator[Loc]:
    """Every key path of ``data`` that ``pattern`` matches, in file order."""
    if not pattern:
        yield at
        return
    head, rest = pattern[0], pattern[1:]
    if head == EACH:
        if isinstance(data, list):
            for index, element in enumerate(data):
                yield from occurrences(element, rest, (*at, index))
    elif isinstance(data, dict) and head in data:
        yield from occurrences(data[head], rest, (*at, head))


def concrete(pattern: tuple[str, ...], old: Loc) -> Loc:
    """``pattern`` with its ``[]`` replaced by the list indexes of ``old`` (a path the other pattern matched)."""
    indexes = iter(part for part in old if isinstance(part, int))
    return tuple(next(indexes) if part == EACH else part for part in pattern)


def _move(reading: Reading, rename: Rename, old: Loc, line: Callable[[Loc], int | None]) -> None:
    new = concrete(rename.new_path, old)
    holder = _node(reading.data, old[:-1])
    parent = _parent(reading.data, new[:-1])
    if parent is None:
        return  # a value where tether wants a table: the schema refuses the older key, at its line
    key = str(new[-1])
    if key in parent:
        where = line(new)
        at = f", which line {where} sets too" if where is not None else ", which is set too"
        reading.problems.append((old, f"is the older name of {dotted(new)}{at}: keep one of them"))
        del holder[old[-1]]
        return
    written = holder.pop(old[-1])
    parent[key] = rename.convert(written)
    reading.moves.append(Move(rename, old, new, written, parent[key]))


def _node(data: Any, loc: Loc) -> Any:
    for part in loc:
        data = data[part]
    return data


def _parent(data: dict[str, Any], loc: Loc) -> dict[str, Any] | None:
    """The table at ``loc``, made when missing; ``None`` when a value that is not a table is in the way."""
    node: Any = data
    for part in loc:
        if isinstance(node, dict):
            node = node.setdefault(part, {}) if isinstance(part, str) else None
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            return None
    return node if isinstance(node, dict) else None


def renamed(moves: list[Move]) -> list[str]:
    """``"runtime.max_steps as runtime.limits.max_turns"`` per rename used, in table order."""
    used = dict.fromkeys(move.rename for move in moves)
    return [f"{r.old} as {r.new}{f' ({r.unit})' if r.unit else ''}" for r in used]


def notice(path: Path, moves: list[Move], *, named: bool) -> str:
    """The one line saying that ``path`` was read through the older layout; ``named``: the file must be named
    for ``tether config migrate`` to find it (it is not ``./agent.toml``)."""
    command = f"tether config migrate {shlex.quote(str(path))}" if named else "tether config migrate"
    return f"{path} uses the older layout; read {', '.join(renamed(moves))}; '{command}' rewrites it"
