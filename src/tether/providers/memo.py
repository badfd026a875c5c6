"""What a request body is built from: each message's JSON and each tool's, made once and kept.

A run sends its whole history and its tools every turn. Each wire protocol keeps every message's JSON (or the
pieces its messages are assembled from) in a :class:`~tether.message_memo.MessageMemo` and each tool's JSON in a
:class:`ToolsMemo`, and builds its body as a dict whose history and tools are already JSON (:func:`json_list`:
``msgspec.Raw``, written into the body as it is): what a request costs grows with the new messages, not with the
whole history and every schema encoded again. The rest of a body (model, tool choice, settings) is a few keys,
encoded with it every request: there is one body builder per protocol, and nothing else to keep in step with it.

What is kept is kept at its size (:func:`exact`, :func:`joined_json`): ``msgspec.json.encode`` hands back its
growing buffer as it is, up to ~40% larger than the JSON in it, and a message's JSON lives as long as the message,
a body as long as its answer is awaited.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec

from tether.providers.base import Request, ToolDefinition


def exact(data: bytes) -> bytes:
    """``data`` in a bytes object of its own size (a copy: ``msgspec.json.encode``'s output may have room to
    spare, and ``bytes(data)`` or ``data[:]`` would hand back the same object)."""
    return bytes(memoryview(data))


def joined_json(items: Iterable[Any]) -> bytes:
    """Each item's JSON, comma-joined, at its size (a join of several makes a new bytes object; a join of one
    hands back the item itself)."""
    encoded = [msgspec.json.encode(item) for item in items]
    return exact(encoded[0]) if len(encoded) == 1 else b",".join(encoded)


def json_list(items: Sequence[bytes]) -> msgspec.Raw:
    """Items already JSON, as the JSON list of them that ``msgspec.json.encode`` writes into a body as it is."""
    return msgspec.Raw(b"[" + b",".join(items) + b"]")


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

    def json(self, tools: Sequence[ToolDefinition]) -> msgspec.Raw:
        """The tools as a JSON list, in order; each encoded now only if not seen before."""
        return json_list(self.items(tools))

    def items(self, tools: Sequence[ToolDefinition]) -> list[bytes]:
        """Each tool's JSON, in order (what :meth:`json` joins), for a body that marks one of them."""
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
                    msgspec.json.encode(self._encode(tool)),
                )
            texts.append(entry[3])
        return texts


MAX_KEPT_TOOLS = 1024
"""Tools a :class:`ToolsMemo` keeps; past this many, it starts over."""


def prompt_cache_key(request: Request) -> str:
    """OpenAI's ``prompt_cache_key`` for ``request``: requests with one key go to the same cache, so a conversation
    keeps reading what its earlier turns wrote instead of landing where its prefix was never seen. The run's session
    id (``Request.cache_key``) when it has one, else a digest of its stable prefix (the system prompt and the tools'
    names): the runs of one agent share a key. Over 64 characters (OpenAI's limit), a digest of it."""
    if (key := request.cache_key) is not None:
        return key if len(key) <= MAX_CACHE_KEY else "tether-" + hashlib.sha256(key.encode()).hexdigest()[:32]
    system, tools = request.system, request.tools
    kept = _PREFIX_KEY[0]
    if kept[0] is system and kept[1] is tools:  # the same agent's next turn: the same objects
        return kept[2]
    digest = hashlib.sha256((system or "").encode())
    for tool in tools:
        digest.update(b"\0" + tool.name.encode())
    key = "tether-" + digest.hexdigest()[:32]
    _PREFIX_KEY[0] = (system, tools, key)
    return key


MAX_CACHE_KEY = 64
_PREFIX_KEY: list[tuple[str | None, tuple[ToolDefinition, ...], str]] = [(None, (), "tether-" + "0" * 32)]
"""The last stable prefix's key, kept by identity of its system prompt and tools."""


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

    def json(self) -> msgspec.Raw:
        """The items as a JSON list."""
        return json_list(self.items)
