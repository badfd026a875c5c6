"""What a message encodes to, made once per message object: what a long run pays for its history each turn.

A run sends its whole history every turn and saves it after every turn, and the history only grows: at turn 60
a provider that encoded every message afresh would encode some 120 messages to send two new ones, and a session
store that wrote every message afresh would do the same to save them. A :class:`MessageMemo` keeps what one
consumer made of a message (a wire protocol's JSON, a store's row) for as long as the message object lives:
messages are frozen, so what they encode to does not change, and a message that dies takes its entry with it
(the entry is the weak reference itself: one object a message, no callback or key object of its own).

Entries are per ``origin`` too, where what is made depends on more than the message (a Chat tool call's
``extra_content`` goes back to the server that wrote it only); a message made for another origin is made again.
The consumers keep one memo each: every wire protocol (``providers/memo.py`` builds bodies from them) and the
session stores' codec (``sessions/codec.py``).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from tether.messages import Message

T = TypeVar("T")


class _Entry(weakref.ref):  # type: ignore[type-arg]
    """What was made of a message; the weak reference to the message is the entry itself."""

    __slots__ = ("key", "origin", "value")
    key: int
    origin: str
    value: object


class MessageMemo(Generic[T]):
    """Per message object (and origin): what one consumer made of it, as the module docstring says."""

    __slots__ = ("_entries", "_forget")

    def __init__(self) -> None:
        self._entries: dict[int, _Entry] = {}
        """``id(message)`` -> its entry."""
        entries = self._entries

        def forget(entry: _Entry) -> None:
            """The message died: drop its entry (unless its id already holds a newer message's)."""
            if entries.get(entry.key) is entry:
                del entries[entry.key]

        self._forget = forget

    def values(self, messages: Iterable[Message], make: Callable[[Message, int], T], origin: str = "") -> list[T]:
        """What was made of each of ``messages`` for ``origin``, in order; ``make(message, position)`` makes (and
        the memo keeps) what was not. The lookup is written into this loop: most of a request's or a save's
        messages are known, and a call per message would cost more than the lookup."""
        made: list[T] = []
        find = self._entries.get
        for position, message in enumerate(messages):
            entry = find(id(message))
            if entry is not None and entry() is message and entry.origin == origin:
                made.append(entry.value)  # type: ignore[arg-type]
            else:
                made.append(self.put(message, origin, make(message, position)))
        return made

    def put(self, message: Message, origin: str, value: T) -> T:
        """Keep ``value`` for ``message`` and ``origin`` (replacing what its id held) and return it."""
        entry = _Entry(message, self._forget)
        entry.key, entry.origin, entry.value = id(message), origin, value
        self._entries[entry.key] = entry
        return value

    def __len__(self) -> int:
        return len(self._entries)
