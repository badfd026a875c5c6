"""Each message's wire form, made once: what a request costs grows with the new messages, not the whole history.

A run sends its whole history every turn and the history only grows: at turn 60 a provider that encoded every
message afresh would encode some 120 messages to send two new ones, and a long run's steps would cost more and
more. A :class:`MessageMemo` keeps what one wire protocol made of a message (its JSON, or the pieces a body is
assembled from) for as long as the message object lives: messages are frozen, so what they encode to does not
change, and a message that dies takes its entry with it (the entry is the weak reference itself: one object a
message, no callback or key object of its own).

Entries are per ``origin`` too, the provider (profile) a message goes to, where what is sent depends on it (a
Chat tool call's ``extra_content`` goes back to the server that wrote it only); a message sent to another one is
encoded again for it. Each protocol module keeps one memo, and builds a body by putting the messages' kept JSON,
and its tools' (:class:`ToolsMemo`), into the rest of the body encoded on its own (:func:`encode_body`).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from tether import jsoncodec
from tether.messages import Message
from tether.providers.base import ToolDefinition

T = TypeVar("T")

SLOT = "\x00history\x00"
"""Stands for the messages in a body encoded without them (no JSON a caller builds holds a NUL there)."""
SLOT_JSON = b'"\\u0000history\\u0000"'
"""How either JSON backend writes :data:`SLOT`."""
TOOLS_SLOT = "\x00tools\x00"
"""Stands for the tools in a body encoded without them."""
TOOLS_SLOT_JSON = b'"\\u0000tools\\u0000"'
"""How either JSON backend writes :data:`TOOLS_SLOT`."""


class _Entry(weakref.ref):  # type: ignore[type-arg]
    """A message's wire form; the weak reference to the message is the entry itself."""

    __slots__ = ("key", "origin", "value")
    key: int
    origin: str
    value: object


class MessageMemo(Generic[T]):
    """Per message object (and origin): what one wire protocol made of it, as the module docstring says."""

    __slots__ = ("_forget", "entries")

    def __init__(self) -> None:
        self.entries: dict[int, _Entry] = {}
        """``id(message)`` -> its entry; read directly where a body is built, for the lookup inline."""
        entries = self.entries

        def forget(entry: _Entry) -> None:
            """The message died: drop its entry (unless its id already holds a newer message's)."""
            if entries.get(entry.key) is entry:
                del entries[entry.key]

        self._forget = forget

    def get(self, message: Message, origin: str = "") -> T | None:
        """What was kept for ``message`` sent to ``origin``, or ``None``."""
        entry = self.entries.get(id(message))
        if entry is not None and entry() is message and entry.origin == origin:
            return entry.value  # type: ignore[return-value]
        return None

    def put(self, message: Message, origin: str, value: T) -> T:
        """Keep ``value`` for ``message`` sent to ``origin`` (replacing what its id held) and return it."""
        entry = _Entry(message, self._forget)
        entry.key, entry.origin, entry.value = id(message), origin, value
        self.entries[entry.key] = entry
        return value

    def __len__(self) -> int:
        return len(self.entries)


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


def encode_body(key: str, body: dict[str, Any], history: bytes, tools: bytes | None = None) -> bytes:
    """``body`` encoded with ``history`` (the messages' JSON) as the value of its first key, ``key``, which holds
    :data:`SLOT`, and ``tools`` (their JSON) as the value of its second, ``"tools"``, which then holds
    :data:`TOOLS_SLOT`. The slots are found where they must be, at the start, never looked for in the rest
    (which may hold any text, the slots' included): a caller leaves them to a setting's ``extra`` never."""
    encoded = jsoncodec.dumps_bytes(body)
    opening = b'{"' + key.encode() + b'":'
    prefix = opening + SLOT_JSON + (b',"tools":' + TOOLS_SLOT_JSON if tools is not None else b"")
    if not encoded.startswith(prefix):
        raise AssertionError(f"the body does not start with its slots: {encoded[: len(prefix)]!r}")
    rest = encoded[len(prefix) :]
    return b"".join((opening, history, b',"tools":', tools, rest)) if tools is not None else opening + history + rest
