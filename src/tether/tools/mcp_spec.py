"""What a valid MCP server entry is: the one set of rules that ``MCPServerConfig`` (the library),
``[[mcp.servers]]`` (``agent.toml``) and ``MCPTools`` (a list of servers) all apply.

The rules
---------
* **Id.** 1-32 letters, digits, ``_`` or ``-`` (it prefixes tool names, so no dots or spaces), unique among
  the servers.
* **Transport.** ``"stdio"``: tether starts ``command`` (required) with ``args``, ``env`` and ``cwd``;
  ``"http"``: tether reaches ``url`` (required, ``http://`` or ``https://``) with ``headers``. A setting of the
  other transport is an error, not silently ignored.
* **Timeouts.** ``tool_timeout`` and ``connect_timeout`` are finite numbers of seconds > 0 (not booleans).

Each rule answers with the field it is about and a message that reads after the field's name
(``url is required for transport 'http'``); callers add where the entry is (its id, or its place in a file).
This module imports nothing heavy: the configuration checks it without the ``mcp`` package.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from typing import Literal

from tether.errors import ConfigInvalid
from tether.limits import is_number

__all__ = [
    "HTTP_ONLY",
    "SERVER_ID",
    "STDIO_ONLY",
    "TRANSPORTS",
    "MCPServerConfig",
    "duplicate_ids",
    "id_problem",
    "server_problems",
    "timeout_problem",
]

SERVER_ID = re.compile(r"[A-Za-z0-9_-]{1,32}")
"""What an MCP server id looks like."""
TRANSPORTS = ("stdio", "http")
STDIO_ONLY = ("command", "args", "env", "cwd")
"""Settings of a stdio server only."""
HTTP_ONLY = ("url", "headers")
"""Settings of an http server only."""
TIMEOUTS = ("tool_timeout", "connect_timeout")


def id_problem(value: object) -> str | None:
    """What is wrong with ``value`` as a server id, or ``None``."""
    if isinstance(value, str) and SERVER_ID.fullmatch(value):
        return None
    return "must be 1-32 letters, digits, '_' or '-'"


def timeout_problem(value: object) -> str | None:
    """What is wrong with ``value`` as ``tool_timeout`` or ``connect_timeout``, or ``None``."""
    return None if is_number(value) and value > 0 else "must be a number > 0"


def server_problems(transport: object, given: Mapping[str, object]) -> list[tuple[str, str]]:
    """``(field, problem)`` for each transport rule an entry breaks; ``given`` holds the settings the entry
    sets (a setting left at its default is not in it)."""
    if transport not in TRANSPORTS:
        return [("transport", f"must be 'stdio' or 'http', not {transport!r}")]
    if transport == "stdio":
        problems = [] if given.get("command") else [("command", "is required for transport 'stdio'")]
        return problems + [(key, "is only for transport 'http'") for key in HTTP_ONLY if key in given]
    url = given.get("url")
    problems = []
    if url is None:
        problems.append(("url", "is required for transport 'http'"))
    elif not (isinstance(url, str) and url.startswith(("http://", "https://"))):
        problems.append(("url", "must be an http:// or https:// URL"))
    return problems + [(key, "is only for transport 'stdio'") for key in STDIO_ONLY if key in given]


@dataclass(frozen=True, slots=True)
class MCPServerConfig:
    """How to reach one MCP server. ``transport="stdio"`` needs ``command``; ``"http"`` needs ``url``."""

    id: str
    """Names the server in messages and in prefixed tool names: 1-32 of ``[A-Za-z0-9_-]``, unique."""
    transport: Literal["stdio", "http"] = "stdio"
    """``stdio``: tether starts ``command`` and speaks over its stdin/stdout. ``http``: streamable HTTP."""
    command: str | None = None
    """The executable (looked up on ``PATH``, or a path relative to ``cwd``)."""
    args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment variables for the server; values may use ``${VAR}`` from the host's environment."""
    cwd: str | PathLike[str] | None = None
    url: str | None = None
    """The streamable-HTTP endpoint, e.g. ``http://127.0.0.1:8000/mcp``."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """HTTP headers sent with every request; values may use ``${VAR}``."""
    tool_timeout: float = 300.0
    """Seconds one tool call may take; overrides ``Limits.tool_timeout`` for this server's tools."""
    connect_timeout: float = 60.0
    """Seconds to start the server, handshake and list its tools (and to list them again)."""
    prefix: bool = False
    """Always name this server's tools ``<id>__<name>``, not only when their names clash."""

    def __post_init__(self) -> None:
        where = f"MCP server {self.id!r}"
        if isinstance(self.args, str):
            raise ConfigInvalid(f"{where}: args must be a list of strings, not one string")
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "env", dict(self.env))
        object.__setattr__(self, "headers", dict(self.headers))
        problems = [("id", problem)] if (problem := id_problem(self.id)) else []
        problems += server_problems(self.transport, self._given())
        problems += [(name, p) for name in TIMEOUTS if (p := timeout_problem(getattr(self, name)))]
        if problems:
            raise ConfigInvalid(f"{where}: " + "; ".join(f"{name} {problem}" for name, problem in problems))

    def _given(self) -> dict[str, object]:
        """The transport settings this entry sets (not left empty)."""
        values = {name: getattr(self, name) for name in (*STDIO_ONLY, *HTTP_ONLY)}
        return {name: value for name, value in values.items() if value is not None and value != () and value != {}}


def duplicate_ids(ids: Iterable[str]) -> list[tuple[int, str]]:
    """``(index, problem)`` for each server whose id an earlier one has."""
    first: dict[str, int] = {}
    problems: list[tuple[int, str]] = []
    for index, server_id in enumerate(ids):
        if server_id in first:
            problems.append((index, f"{server_id!r} is already the id of servers[{first[server_id]}]"))
        first.setdefault(server_id, index)
    return problems
