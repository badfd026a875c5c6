"""Sessions: a conversation kept between runs, and the small protocol every store implements.

The contract, for every store (memory, files, SQLite, PostgreSQL; the conformance suite in ``tests/sessions`` holds
each to it):

- ``save`` is atomic: after it returns the new version is stored; if it fails or the process dies while it
  runs, the store holds the previous version or the new one, never a mix. Saving a session again replaces
  it (last write wins); saving a longer version of the same transcript is the normal way to append.
- ``save`` refuses a transcript that is not valid (see :func:`validate_session`), a title or model that is
  not text, or messages that do not read back once written (nesting too deep to encode), with
  ``SessionInvalid`` and before touching storage, so a stored session always loads. Usage counts that are
  out of range (negative, fractional, not numbers, past 2**63 - 1) are normalised (see
  :func:`normalized_usage`) rather than refused: usage is bookkeeping, and a run's transcript is not lost
  over it.
- ``load`` returns exactly what was saved (messages equal, usage, model, title, timestamps), except that two
  user messages in a row are merged into one (see :func:`validate_session`). An unknown id raises
  :class:`SessionNotFound`; corrupt, truncated or hostile data (wrong types, nesting too deep, invalid
  UTF-8, something that is not a regular file) raises :class:`~tether.errors.SessionInvalid` naming the
  file or row and the problem, and never touches other sessions. Usage counts stored out of range are
  normalised on load as on save, so they never make a session unusable.
- ``delete`` is idempotent: deleting an unknown id does nothing. After it, no file the store owns holds the
  session's text: no backup, no temporary file, no freed database page, no write-ahead log frame. (A
  PostgreSQL server's files are the server's: there no table of the store holds it, see ``postgres.py``.)
- What a store creates (directories, files, databases and their journals) is readable by its owner only,
  whatever the umask: a conversation can hold secrets. (PostgreSQL: the schema and tables belong to the
  connecting role and are granted to no one else.)
- Blocking I/O never runs on the event loop: the file and SQLite stores do theirs in a worker thread, the
  PostgreSQL store uses psycopg's asynchronous connections.
  Cancelling the awaiting task does not stop a write already handed to the thread; it still ends in the
  old or the new version.
- Session ids are short, safe as file names and checked by every store (:func:`check_session_id`).

Every store also keeps a session's *outputs* (:class:`OutputStore`): tool outputs too large to show the model
whole, which the transcript names by reference (``tools/output_cache.py``). An output is stored under its
content address (:func:`output_ref`), once: saving a ref again does not rewrite it. Its text lives only
there, never a second time in the session's messages (they hold its preview). ``delete`` removes a
session's outputs with the same guarantees as its messages, and outputs stored before the session's first
save too. Owner-only files, I/O off the event loop and ``SessionInvalid`` for corrupt or hostile data (a
file that is not text, text whose hash is not its ref) hold for outputs as for sessions.

Every store also keeps a session's *exchanges* when a run asks for them (:class:`ExchangeStore`,
``tether.exchanges``): each provider call's request body and raw answer, masked, appended in the order the
calls were made and read back in that order. ``delete`` removes them with the session, with the same
guarantees; a corrupt exchange is ``SessionInvalid`` naming where it is, and never affects the transcript.

Storage failures that are not about the data (disk full, permission denied, a database locked by another
process, a database server out of reach) propagate as the ``OSError``, ``sqlite3.OperationalError`` or
``psycopg.OperationalError`` they are.

Timestamps are timezone-aware UTC :class:`~datetime.datetime` values with microseconds: they compare and
sort correctly, print readably, and round-trip through every store exactly.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

import msgspec

from tether._logging import get_logger
from tether.errors import SessionInvalid
from tether.exchanges import Exchange, exchange_from_json, exchange_json
from tether.messages import Message, ToolResult, compaction_of, open_tool_calls, transcript_problems
from tether.usage import Usage

logger = get_logger("tether.sessions")


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


@runtime_checkable
class OutputStore(Protocol):
    """Where a session's cached tool outputs are kept, by content address (see the module docstring).

    The memory, file, SQLite and PostgreSQL session stores are output stores too; a run in a session whose store is
    not keeps its outputs in memory for that run only.
    """

    async def save_output(self, session_id: str, ref: str, content: str) -> None:
        """Keep ``content`` under ``ref`` for the session; a ref already stored is left as it is.

        ``SessionInvalid`` (and nothing stored) for an invalid session id or ref, text that is not valid
        UTF-8, or a ``ref`` that is not ``output_ref(content)``.
        """
        ...

    async def load_output(self, session_id: str, ref: str) -> str | None:
        """The output stored under ``ref`` for the session, or ``None`` when there is none.

        ``SessionInvalid`` naming the file or row when what is stored is not that output (corrupt,
        truncated, not text, not a regular file).
        """
        ...


@runtime_checkable
class ExchangeStore(Protocol):
    """Where a session's exchanges are kept (see the module docstring); every store tether has is one."""

    async def save_exchanges(self, session_id: str, exchanges: Sequence[Exchange]) -> None:
        """Append ``exchanges`` to the session's, in order (before or after the session's first save)."""
        ...

    async def load_exchanges(self, session_id: str) -> list[Exchange]:
        """The session's exchanges in the order they were saved; ``[]`` when it has none."""
        ...


def storable_exchanges(session_id: str, exchanges: Sequence[Exchange]) -> list[bytes]:
    """Each exchange as the JSON a store writes, after checking the id; ``SessionInvalid`` (and nothing
    written) for anything that is not an :class:`~tether.exchanges.Exchange`."""
    source = f"session {check_session_id(session_id)!r}"
    for exchange in exchanges:
        if not isinstance(exchange, Exchange):
            raise SessionInvalid(f"{source}: {brief(exchange)} is not an Exchange")
    return [exchange_json(exchange) for exchange in exchanges]


def stored_exchange(data: object, source: str) -> Exchange:
    """An exchange read from storage (its JSON text or bytes); ``SessionInvalid`` naming ``source`` when it is
    not one (not text, not JSON, not an exchange's fields)."""
    if not isinstance(data, str | bytes):
        raise SessionInvalid(f"{source}: an exchange should be JSON text, found {brief(data)}")
    try:
        return exchange_from_json(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise SessionInvalid(f"{source}: not an exchange: {error}") from None


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
    parts in order, since some providers refuse them (never a compaction marker, whose place is its meaning:
    the model's view merges it with the message after it); they are refused only when both carry different
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
        if previous is None or message.role != "user" or previous.role != "user" or _is_marker(message, previous):
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


def _is_marker(*messages: Message) -> bool:
    """A compaction marker is never merged with a neighbour: its place in the transcript is its meaning."""
    return any(compaction_of(m) is not None for m in messages if m.provider_data is not None)


def suggest_title(messages: Sequence[Message], limit: int = 60) -> str:
    """A title from the first user message: its text on one line, cut at ``limit`` characters (a lone
    surrogate, which no store can keep as text, becomes U+FFFD)."""
    for message in messages:
        if message.role == "user" and (text := " ".join(message.text.split())):
            text = text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
            return text if _is_utf8(text) else without_surrogates(text)
    return ""


# --- what a store accepts -----------------------------------------------------------------------------------

MAX_COUNT = 2**63 - 1
"""The largest usage count a store keeps (SQLite's largest integer); larger counts are clamped to it."""

USAGE_FIELDS = Usage.__struct_fields__


def normalized_usage(usage: Any, source: str) -> Usage:
    """``usage`` (a :class:`Usage` or its JSON object) with every count a whole number in ``0..MAX_COUNT``.

    A fractional count is rounded down, a negative or non-finite one or one that is not a number at all
    (a string, ``true``, ``null``) becomes 0, a larger one ``MAX_COUNT``; anything but an object is no usage.
    What changed is logged as a warning on ``tether.sessions`` naming ``source``. Returns ``usage`` itself
    when it was already in range.
    """
    if isinstance(usage, Usage):
        values: dict[str, Any] = {name: getattr(usage, name) for name in USAGE_FIELDS}
    elif isinstance(usage, dict):
        values = {name: usage.get(name, 0) for name in USAGE_FIELDS}
    else:
        logger.warning("%s: usage is %s, not an object; counted as no usage", source, brief(usage))
        return Usage()
    counts = {name: _count(value) for name, value in values.items()}
    changed = [f"{name}={brief(values[name])}" for name in USAGE_FIELDS if values[name] is not counts[name]]
    if not changed:
        return usage if isinstance(usage, Usage) else Usage(**counts)
    logger.warning("%s: usage counts out of range were normalised: %s", source, ", ".join(changed))
    return Usage(**counts)


def _count(value: Any) -> Any:
    """``value`` itself when it is a count in range, else the count it is normalised to."""
    if type(value) is int:
        return value if 0 <= value <= MAX_COUNT else (0 if value < 0 else MAX_COUNT)
    if type(value) is float and math.isfinite(value):
        return min(MAX_COUNT, max(0, math.floor(value)))
    return 0


def brief(value: Any, limit: int = 60) -> str:
    """``value`` as an error message quotes it: short, and never failing (a huge int has no cheap repr)."""
    if type(value) is int and abs(value) >= 10**30:
        return f"{'-' if value < 0 else ''}a {value.bit_length()}-bit integer"
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a hostile value's repr must not break an error message
        text = f"a {type(value).__name__}"
    return text if len(text) <= limit else f"{text[: limit - 1]}… ({len(text)} characters)"


def storable(session: Session) -> Session:
    """``session`` as a store may write it: checked, with its usage normalised.

    ``SessionInvalid`` naming the session and the field when the id, the title, the model or the transcript
    cannot be stored (a title that is not text, a lone surrogate, a message that is not a ``Message``, an
    invalid transcript). Whether the messages encode and read back is each store's to check (``codec``).
    """
    source = f"session {check_session_id(session.id)!r}"
    for name in ("title", "model"):
        value = getattr(session, name)
        if not isinstance(value, str):
            problem = f"{source}: {name} must be a string, not {brief(value)}"
            raise SessionInvalid(problem, details=_field(session, name))
        if not _is_utf8(value):
            raise SessionInvalid(
                f"{source}: {name} is not valid text (it holds a lone surrogate)", details=_field(session, name)
            )
    for index, message in enumerate(session.messages):
        if not isinstance(message, Message):
            raise SessionInvalid(
                f"{source}: message {index} is {brief(message)}, not a Message", details=_field(session, "messages")
            )
    validate_session(session.messages, source)
    usage = normalized_usage(session.usage, source)
    return session if usage is session.usage else dataclasses.replace(session, usage=usage)


def without_surrogates(text: str) -> str:
    """``text`` with each lone surrogate (text no store can write as UTF-8) replaced by U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _field(session: Session, name: str) -> dict[str, object]:
    return {"session_id": session.id, "field": name}


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def newest_first(summaries: Iterable[SessionSummary]) -> list[SessionSummary]:
    """Summaries in ``list()`` order: newest ``updated_at`` first, ties broken by id, higher first."""
    return sorted(summaries, key=lambda s: (s.updated_at, s.id), reverse=True)


def summary_of(session: Session) -> SessionSummary:
    return SessionSummary(
        session.id, session.title, session.model, session.created_at, session.updated_at, len(session.messages)
    )


# --- outputs ---------------------------------------------------------------------------------------------------

_OUTPUT_REF = re.compile(r"out-[0-9a-f]{16}")
MAX_OUTPUT_BYTES = 1 << 28
"""The largest output a store keeps or reads (256 MiB of UTF-8): a hostile file cannot exhaust memory."""


def output_ref(content: str) -> str:
    """The content address of an output: ``out-`` and 16 hex digits of the BLAKE2b hash of its UTF-8 text.

    Short enough for a model to copy, and 64 bits: two different outputs of one session share a ref about
    once in 2**32 pairs of outputs, never in practice. ``content`` must encode as UTF-8 (``utf8_safe``).
    """
    return "out-" + hashlib.blake2b(content.encode("utf-8"), digest_size=8).hexdigest()


def check_output_ref(ref: str) -> str:
    """``ref`` itself if it has the form of an output ref (safe as a file name); otherwise ``SessionInvalid``."""
    if not isinstance(ref, str) or _OUTPUT_REF.fullmatch(ref) is None:
        raise SessionInvalid(
            f"output ref {brief(ref)} is not valid: it is 'out-' and 16 lowercase hex digits", details={"ref": ref}
        )
    return ref


def storable_output(session_id: str, ref: str, content: str) -> bytes:
    """The UTF-8 bytes a store writes for an output, after checking the id, the ref and that ``ref`` is the
    content's address; ``SessionInvalid`` (nothing written) otherwise."""
    source = f"session {check_session_id(session_id)!r}: output {check_output_ref(ref)}"
    if not isinstance(content, str):
        raise SessionInvalid(f"{source}: content must be a string, not {brief(content)}")
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError:
        raise SessionInvalid(f"{source}: not valid text (it holds a lone surrogate)") from None
    if len(data) > MAX_OUTPUT_BYTES:
        raise SessionInvalid(f"{source}: {len(data)} bytes, more than a store keeps ({MAX_OUTPUT_BYTES})")
    if output_ref(content) != ref:
        raise SessionInvalid(f"{source}: the ref is not the content's address ({output_ref(content)})")
    return data


def stored_output(ref: str, data: bytes | str, source: str) -> str:
    """An output as read from storage, checked: UTF-8 text whose address is ``ref``; ``SessionInvalid``
    naming ``source`` otherwise (a truncated or altered output cannot pass for the one the transcript names)."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise SessionInvalid(f"{source}: not UTF-8 text: {error.reason} at byte {error.start}") from None
    if output_ref(data) != ref:
        raise SessionInvalid(f"{source}: corrupt: its content is not the output {ref} (truncated or altered?)")
    return data
