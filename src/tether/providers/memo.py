"""A request body built from kept JSON: what a request costs grows with the new messages, not the whole history.

Each wire protocol keeps every message's JSON (or the pieces its messages are assembled from) in a
:class:`~tether.message_memo.MessageMemo`, and its tools' JSON in a :class:`ToolsMemo` while its requests offer
the same definitions; :func:`fill_slots` puts both into the rest of the body, encoded on its own with a slot
standing for each, and kept in an :class:`OptionsMemo` while the requests ask for the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tether import jsoncodec
from tether.providers.base import Request, ToolDefinition

SLOT = "\x00history\x00"
"""Stands for the messages in a body encoded without them (no JSON a caller builds holds a NUL there)."""
SLOT_JSON = b'"\\u0000history\\u0000"'
"""How either JSON backend writes :data:`SLOT`."""
TOOLS_SLOT = "\x00tools\x00"
"""Stands for the tools in a body encoded without them."""
TOOLS_SLOT_JSON = b'"\\u0000tools\\u0000"'
"""How either JSON backend writes :data:`TOOLS_SLOT`."""


class ToolsMemo:
    """One provider's tools as JSON, kept while its requests offer the same definitions: a run offers the same
    ones every turn, and with dozens of tools (an MCP server's) their schemas are most of a first request. A
    tool's definition is read-only once made (its schema included), so the same definitions encode the same."""

    __slots__ = ("_json", "_tools")

    def __init__(self) -> None:
        self._tools: tuple[ToolDefinition, ...] = ()
        self._json = b""

    def json(self, tools: tuple[ToolDefinition, ...], encode: Callable[[tuple[ToolDefinition, ...]], Any]) -> bytes:
        """``encode(tools)`` as JSON, encoded again only when ``tools`` are not the last call's definitions."""
        kept = self._tools
        if kept is not tools and (len(kept) != len(tools) or any(a is not b for a, b in zip(kept, tools, strict=True))):
            self._json = jsoncodec.dumps_bytes(encode(tools))
            self._tools = tools
        return self._json


class OptionsMemo:
    """What a body holds besides its history (model, tools, tool choice, settings), as JSON, kept while the
    requests ask for the same: a run's do, every turn. Kept against the request's tools and settings (the same
    objects), tool choice, parallel-calls flag, JSON schema (the same object) and whatever else the provider's
    body depends on (``also``: its system prompt, say); never for settings with ``extra`` fields, a dict a
    caller may change in place between requests."""

    __slots__ = ("_json", "_key")

    def __init__(self) -> None:
        self._key: tuple[Any, ...] | None = None
        self._json = b""

    def json(self, request: Request, encode: Callable[[Request], bytes], also: object = None) -> bytes:
        """``encode(request)``, or what it gave for the last request that asked for the same."""
        settings, key = request.settings, self._key
        if (
            key is not None
            and key[0] is request.tools
            and key[1] is settings
            and key[2] == request.tool_choice
            and key[3] == request.parallel_tool_calls
            and key[4] is request.json_schema
            and key[5] == also
            and not settings.extra
        ):
            return self._json
        text = encode(request)
        if not settings.extra:
            self._key = (
                request.tools,
                settings,
                request.tool_choice,
                request.parallel_tool_calls,
                request.json_schema,
                also,
            )
            self._json = text
        return text


class RoleJoiner:
    """A conversation's items as JSON, consecutive messages of one role joined into one item: the APIs that want
    roles to alternate (Anthropic's messages, Gemini's contents) get one item a turn.

    Each message comes with its parts' JSON and its item alone (its parts under ``opening[role]``, kept with
    it): a message after one of the other role, as in most requests, adds its kept item and nothing is built."""

    __slots__ = ("_last", "_merged", "_opening", "items", "role")

    def __init__(self, opening: dict[str, bytes]) -> None:
        self._opening = opening
        """Per role: the JSON an item of that role starts with, up to its parts' list (``]}`` closes it)."""
        self.items: list[bytes] = []
        self.role = ""
        """The role of the last item (``""`` before the first)."""
        self._last = b""
        """The parts of the last message added."""
        self._merged: list[bytes] | None = None
        """The parts of each message in the last item, once it holds two."""

    def add(self, role: str, parts: bytes, alone: bytes) -> None:
        """A message of ``role`` with something to send: ``parts`` and its item ``alone``."""
        if role != self.role:
            self.items.append(alone)
            self.role, self._merged = role, None
        else:
            merged = self._merged
            if merged is None:
                merged = self._merged = [self._last]
            merged.append(parts)
            self.items[-1] = self._opening[role] + b",".join(merged) + b"]}"
        self._last = parts

    def json(self) -> bytes:
        return b"[" + b",".join(self.items) + b"]"


def fill_slots(key: str, encoded: bytes, history: bytes, tools: bytes | None = None) -> bytes:
    """``encoded`` (a body whose first key, ``key``, holds :data:`SLOT`, and whose second, ``"tools"``, holds
    :data:`TOOLS_SLOT` when ``tools`` is given) with ``history`` (the messages' JSON) and ``tools`` (their JSON)
    in the slots. The slots are found where they must be, at the start, never looked for in the rest (which may
    hold any text, the slots' included): a caller leaves them to a setting's ``extra`` never."""
    opening = b'{"' + key.encode() + b'":'
    prefix = opening + SLOT_JSON + (b',"tools":' + TOOLS_SLOT_JSON if tools is not None else b"")
    if not encoded.startswith(prefix):
        raise AssertionError(f"the body does not start with its slots: {encoded[: len(prefix)]!r}")
    rest = encoded[len(prefix) :]
    return b"".join((opening, history, b',"tools":', tools, rest)) if tools is not None else opening + history + rest
