"""Sessions: a conversation kept between runs, and the small protocol every store implements.

The contract, for every store (memory, files, SQLite; the conformance suite in ``tests/sessions`` holds
each to it):

- ``save`` is atomic: after it returns the new version is stored; if it fails or the process dies while it
  runs, the store holds the previous version or the new one, never a mix. Saving a session again replaces
  it (last write wins); saving a longer version of the same transcript is the normal way to append.
- ``save`` refuses a transcript that is not valid (see :func:`validate_session`) before touching storage,
  so a stored session always loads.
- ``load`` returns exactly what was saved (messages equal, usage, model, title, timestamps), except that two
  user messages in a row are merged into one (see :func:`validate_session`). An unknown id raises
  :class:`SessionNotFound`; corrupt or truncated data raises :class:`~tether.errors.SessionInvalid` naming
  the file or row and the problem, and never touches other sessions.
- ``delete`` is idempotent: deleting an unknown id does nothing.
- Blocking I/O never runs on the event loop: the file and SQLite stores do theirs in a worker thread.
  Cancelling the awaiting task does not stop a write already handed to the thread; it still ends in the
  old or the new version.
- Session ids are short, safe as file names and checked by every store (:func:`check_session_id`).

Storage failures that are not about the data (disk full, permission denied, a database locked by another
process) propagate as the ``OSError`` or ``sqlite3.OperationalError`` they are.

Timestamps are timezone-aware UTC :class:`~datetime.datetime` values with microseconds: they compare and
sort correctly, print readably, and round-trip through every store exactly.
"""

from __future__ import annotations

import dataclasses
import re
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

from tether.errors import SessionInvalid
from tether.messages import Message, ToolResult, open_tool_calls, transcript_problems
from tether.usage import Usage


def utc_now() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Session:
    """A stored conversation: its transcript, what it cost so far, and what it is about.

    ``created_at`` and ``updated_at`` are aware datetimes, normalized to UTC; a naive one is refused
    (``ValueError``), since its moment is unknown. ``usage`` is the total over every run of the session.
    """

    id: str
    messages: tuple[Message, ...] = ()
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    """The ``provider:model`` string the session last ran with."""
    title: str = ""
    created_at: datetime = field(default_factory=utc_now)
    updated_at: datetime = field(default_factory=utc_now)

    def __post_init__(self) -> None:
        if type(self.messages) is not tuple:
            object.__setattr__(self, "messages", tuple(self.messages))
        for name in ("created_at", "updated_at"):
            value = getattr(self, name)
            if not isinstance(value, datetime) or value.utcoffset() is None:
                raise ValueError(f"Session.{name} must be a timezone-aware datetime, not {value!r}")
            if value.tzinfo is not UTC:
                object.__setattr__(self, name, value.astimezone(UTC))

    @classmethod
    def new(
        cls,
        *,
        model: str = "",
        title: str = "",
        messages: Iterable[Message] = (),
        usage: Usage = Usage(),  # noqa: B008 - Usage is frozen
        id: str | None = None,  # noqa: A002 - the field's name
    ) -> Session:
        """A new session with a fresh id (:func:`new_session_id`), created now."""
        now = utc_now()
        return cls(
            id=id if id is not None else new_session_id(),
            messages=tuple(messages),
            usage=usage,
            model=model,
            title=title,
            created_at=now,
            updated_at=now,
        )

    def updated(
        self,
        *,
        messages: Iterable[Message] | None = None,
        usage: Usage | None = None,
        model: str | None = None,
        title: str | None = None,
    ) -> Session:
        """This session with the given fields replaced and ``updated_at`` set to now."""
        return dataclasses.replace(
            self,
            messages=self.messages if messages is None else tuple(messages),
            usage=self.usage if usage is None else usage,
            model=self.model if model is None else model,
            title=self.title if title is None else title,
            updated_at=utc_now(),
        )


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """What ``SessionStore.list()`` shows of a session, without loading its messages."""

    id: str
    title: str
    model: str
    created_at: datetime
    updated_at: datetime
    message_count: int


class SessionNotFound(SessionInvalid):
    """No session has this id in the store (``code`` stays ``session_invalid``; ``details['session_id']``)."""


@runtime_checkable
class SessionStore(Protocol):
    """Where sessions are kept between runs. Four async methods; see the module docstring for the contract
    they share."""

    async def load(self, session_id: str) -> Session:
        """The session stored under ``session_id``.

        Raises :class:`SessionNotFound` for an unknown id, and ``SessionInvalid`` naming the file or row and
        the problem when the stored data is corrupt, truncated or not a valid transcript. Reads only; never
        repairs or deletes anything.
        """
        ...

    async def save(self, session: Session) -> None:
        """Store ``session``, replacing any version with the same id, atomically.

        A crash or error during the save leaves the previous version (or none, for a new session) or the
        new one, never a mix. Stores that keep messages apart write only what changed since the stored
        version. Raises ``SessionInvalid`` (and stores nothing) for an invalid id or transcript.
        """
        ...

    async def list(self) -> list[SessionSummary]:
        """A summary of every session, newest ``updated_at`` first (ties: higher id first).

        Messages are counted, not read: a session whose messages are damaged is listed, and ``load`` says
        what is wrong with it. An entry whose summary itself cannot be read is left out (and logged on the
        ``tether.sessions`` logger), so that one corrupt session does not hide the others.
        """
        ...

    async def delete(self, session_id: str) -> None:
        """Remove the session and everything stored with it. Idempotent: an unknown id is not an error.

        A crash during a delete leaves the session loadable or gone, never half removed.
        """
        ...


# --- ids ------------------------------------------------------------------------------------------------------

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def new_session_id() -> str:
    """A new id: the UTC time to the second and 32 random bits, ``20260315-142233-7f3a9c01``.

    Short enough to type, safe as a file name, and ids sort by creation time (to the second). Two ids made
    in the same second collide once in about 2**32 / n pairs; a host creating many sessions a second should
    pass its own ids (``uuid.uuid4().hex`` is a valid one) to ``Session.new(id=...)``.
    """
    return f"{utc_now():%Y%m%d-%H%M%S}-{secrets.token_hex(4)}"


def check_session_id(session_id: str) -> str:
    """``session_id`` itself if it is safe as a file name; otherwise ``SessionInvalid``.

    Allowed: 1 to 128 ASCII letters, digits, ``.``, ``_`` and ``-``, starting with a letter or digit — so no
    path separators, no ``..`` path, no hidden or temporary file names.
    """
    if not isinstance(session_id, str) or _ID.fullmatch(session_id) is None:
        raise SessionInvalid(
            f"session id {session_id!r} is not valid: use 1 to 128 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit",
            details={"session_id": session_id},
        )
    return session_id


# --- transcripts ------------------------------------------------------------------------------------------------


def validate_session(messages: Sequence[Message], source: str) -> tuple[Message, ...]:
    """The stored transcript checked, with runs of consecutive user messages merged into one.

    Valid, as :func:`~tether.messages.transcript_problems` says, with one allowance: tool calls of the last
    assistant message may have no result yet when nothing but their results follows (a run that stopped
    mid-turn; resuming closes them with ``cancelled`` results). So: system messages only at the start, the
    first other message from the user, every other call answered exactly once before the conversation
    goes on, no result without its call, results only in ``tool`` messages.

    Two user messages in a row (a run that failed before the model answered, then a new prompt) are merged,
    parts in order, since some providers refuse them; they are refused only when both carry different
    ``provider_data``, which cannot be merged without losing some. Problems raise ``SessionInvalid`` naming
    ``source`` and the message numbers as stored; nothing is changed in storage.
    """
    checked = list(messages)
    if checked and checked[-1].role in ("assistant", "tool") and (open_calls := open_tool_calls(checked)):
        checked.append(Message("tool", tuple(ToolResult(c.id, c.name, "") for c in open_calls)))
    if problems := transcript_problems(checked):
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise SessionInvalid(f"{source}: not a valid transcript: {'; '.join(problems[:3])}{more}")
    return _merge_consecutive_users(messages, source)


def _merge_consecutive_users(messages: Sequence[Message], source: str) -> tuple[Message, ...]:
    merged: list[Message] = []
    for i, message in enumerate(messages):
        previous = merged[-1] if merged else None
        if previous is None or message.role != "user" or previous.role != "user":
            merged.append(message)
            continue
        first, second = previous.provider_data, message.provider_data
        if first is not None and second is not None and first != second:
            raise SessionInvalid(
                f"{source}: not a valid transcript: message {i}: a second user message in a row, and both "
                "carry different provider_data, so they cannot be merged"
            )
        merged[-1] = Message("user", previous.parts + message.parts, first if first is not None else second)
    return tuple(merged) if len(merged) != len(messages) else tuple(messages)


def suggest_title(messages: Sequence[Message], limit: int = 60) -> str:
    """A title from the first user message: its text on one line, cut at ``limit`` characters."""
    for message in messages:
        if message.role == "user" and (text := " ".join(message.text.split())):
            return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
    return ""


def newest_first(summaries: Iterable[SessionSummary]) -> list[SessionSummary]:
    """Summaries in ``list()`` order: newest ``updated_at`` first, ties broken by id, higher first."""
    return sorted(summaries, key=lambda s: (s.updated_at, s.id), reverse=True)


def summary_of(session: Session) -> SessionSummary:
    return SessionSummary(
        session.id, session.title, session.model, session.created_at, session.updated_at, len(session.messages)
    )
