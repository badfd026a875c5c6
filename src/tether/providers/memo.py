"""A request body built from kept JSON: what a request costs grows with the new messages, not the whole history.

Each wire protocol keeps every message's JSON (or the pieces its messages are assembled from) in a
:class:`~tether.message_memo.MessageMemo` and each tool's JSON in a :class:`ToolsMemo`. The rest of a body is
encoded with a slot standing for the history and one for the tools; :func:`with_tools` fills the tools' in, and
the result is kept in an :class:`OptionsMemo` while the requests ask for the same; :func:`with_history` fills
the history in, every request.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
    """Each tool's JSON as one wire protocol writes it, kept per tool: a run offers the same tools every turn, an
    agent made afresh (per request, say) makes new definitions around the same tool's schema, and with dozens of
    tools (an MCP server's) their schemas are most of a first request. A tool is known by its schema object,
    name and description; a schema is read-only once its tool is made."""

    __slots__ = ("_encode", "_kept")

    def __init__(self, encode: Callable[[ToolDefinition], Any]) -> None:
        self._encode = encode
        """A tool as this protocol's JSON value (a dict)."""
        self._kept: dict[int, tuple[dict[str, Any], str, str, bytes]] = {}
        """``id(schema)`` -> the schema, the tool's name and description, and the tool's JSON."""

    def json(self, tools: Sequence[ToolDefinition]) -> bytes:
        """The tools as a JSON list, in order; each encoded now only if not seen before."""
        kept, texts = self._kept, []
        for tool in tools:
            schema = tool.parameters
            entry = kept.get(id(schema))
            if entry is None or entry[0] is not schema or entry[1] != tool.name or entry[2] != tool.description:
                if len(kept) >= MAX_KEPT_TOOLS:  # tools made afresh all the time, each with a new schema
                    kept.clear()
                entry = kept[id(schema)] = (
                    schema,
                    tool.name,
                    tool.description,
                    jsoncodec.dumps_bytes(self._encode(tool)),
                )
            texts.append(entry[3])
        return b"[" + b",".join(texts) + b"]"


MAX_KEPT_TOOLS = 1024
"""Tools a :class:`ToolsMemo` keeps; past this many, it starts over."""


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

    def joined(self) -> bytes:
        """The items' JSON, comma-joined."""
        return b",".join(self.items)


def with_tools(key: str, encoded: bytes, tools: Callable[[], bytes]) -> bytes:
    """``encoded`` (a body whose first key, ``key``, holds :data:`SLOT`) with ``tools()`` (the tools' JSON) in
    the tools' slot, when its second key, ``"tools"``, holds :data:`TOOLS_SLOT`; as it is when it does not (a
    setting's ``extra`` replaced the tools, or the provider left them out). The slots are found where they must
    be, at the start, never looked for in the rest, which may hold any text, the slots' included."""
    prefix = _openings(key)[1] + b',"tools":'
    if not encoded.startswith(prefix + TOOLS_SLOT_JSON):
        return encoded
    return b"".join((prefix, tools(), encoded[len(prefix) + len(TOOLS_SLOT_JSON) :]))


def with_history(key: str, encoded: bytes, items: bytes) -> bytes:
    """``encoded`` (a body whose first key, ``key``, holds :data:`SLOT`: a caller sends a setting's ``extra``
    that replaces the history as the dict has it instead) with the history in the slot: ``items``, its messages'
    JSON comma-joined, in a list. One copy of each: the body of a long run is mostly its history."""
    opening, prefix = _OPENINGS.get(key) or _openings(key)
    if not encoded.startswith(prefix):
        raise AssertionError(f"the body does not start with its history's slot: {encoded[: len(prefix)]!r}")
    return b"".join((opening, b"[", items, b"]", memoryview(encoded)[len(prefix) :]))


_OPENINGS: dict[str, tuple[bytes, bytes]] = {}
"""Per history key: a body's JSON up to the key's value, and up to the end of its slot."""


def _openings(key: str) -> tuple[bytes, bytes]:
    opening = b'{"' + key.encode() + b'":'
    made = _OPENINGS[key] = (opening, opening + SLOT_JSON)
    return made
