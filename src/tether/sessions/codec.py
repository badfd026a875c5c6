"""The JSON form of a session's fields, shared by the file and SQLite stores.

Every decoder takes a ``source`` (a file, a row) and raises ``SessionInvalid`` naming it and the problem;
none lets a ``KeyError``, ``TypeError`` or ``RecursionError`` escape for bad data. JSON text is written
ASCII-only, so any Python string (a lone surrogate from a tool's output included) can be stored and read
back. The encoders check that what they write reads back (:func:`encode_messages`), so a save refuses,
before touching storage, what a later load could not read: nesting too deep for the JSON reader, a value
JSON has no form for.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from tether.errors import SessionInvalid
from tether.message_memo import MessageMemo
from tether.messages import Message, messages_from_jsonable, messages_to_jsonable
from tether.sessions.base import Session, SessionSummary, brief, normalized_usage, without_surrogates
from tether.usage import Usage

FORMAT_VERSION = 1
"""The version of the session file format; a file from a newer version is refused, not misread."""

_USAGE_FIELDS = Usage.__struct_fields__
_ENCODE_ERRORS = (ValueError, TypeError, RecursionError, OverflowError)
"""What encoding a hostile value can raise (pydantic's serialization error is a ``ValueError``)."""


def dumps(value: Any) -> str:
    """Compact, ASCII-only JSON."""
    return json.dumps(value, separators=(",", ":"))


def loads(text: str | bytes, source: str) -> Any:
    """Parsed JSON; empty, truncated or non-JSON text raises ``SessionInvalid`` naming ``source``."""
    if not text.strip():
        raise SessionInvalid(f"{source}: empty (a truncated write?)")
    try:
        return json.loads(text)
    except UnicodeDecodeError as exc:
        raise SessionInvalid(f"{source}: not UTF-8 text: {exc.reason} at byte {exc.start}") from exc
    except (ValueError, RecursionError) as exc:
        raise SessionInvalid(f"{source}: not valid JSON (truncated or corrupt?): {exc}") from exc


def timestamp_to_text(value: datetime) -> str:
    """ISO 8601 in UTC with microseconds: fixed width, so text order is time order."""
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def timestamp_from_text(value: Any, source: str) -> datetime:
    if not isinstance(value, str):
        raise SessionInvalid(f"{source}: expected an ISO 8601 timestamp, found {_kind(value)}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise SessionInvalid(f"{source}: not an ISO 8601 timestamp: {value!r}") from exc
    if parsed.utcoffset() is None:
        raise SessionInvalid(f"{source}: timestamp {value!r} has no time zone")
    return parsed.astimezone(UTC)


def usage_to_jsonable(usage: Usage) -> dict[str, int]:
    return {name: getattr(usage, name) for name in _USAGE_FIELDS}


def usage_from_jsonable(data: Any, source: str) -> Usage:
    """A Usage from its JSON object; missing counters are 0, unknown ones are ignored (a newer writer's), and
    counts out of range are normalised (:func:`~tether.sessions.base.normalized_usage`), never refused."""
    return normalized_usage(data, source)


def text_field(value: Any, name: str, source: str) -> str:
    """A stored title or model as text: a lone surrogate (which no store writes) becomes U+FFFD, so a
    hand-edited file's title does not stop the session from being saved again."""
    if not isinstance(value, str):
        raise SessionInvalid(f"{source}: {name!r} must be a string, found {_kind(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return without_surrogates(value)
    return value


_ROWS: MessageMemo[str] = MessageMemo()
"""Per message object: its row, checked to read back. A session is saved after every turn with every message
of it (a file store rewrites them all); each message is encoded and checked once, when first saved."""


def message_rows(messages: Sequence[Message], source: str = "messages", first: int = 0) -> list[str]:
    """One JSON text per message, each checked to read back; ``SessionInvalid`` naming ``source`` and the
    message's number (``first`` is the number of ``messages[0]``) for one that cannot be stored. A message
    saved before (the same object) is not encoded or checked again (``message_memo``)."""

    def checked_row(message: Message, position: int) -> str:
        return _checked_row(message, f"{source}: message {first + position}")

    return _ROWS.values(messages, checked_row)


def _checked_row(message: Message, where: str) -> str:
    """The message's row, after reading it back as a message."""
    try:
        row = dumps(messages_to_jsonable([message])[0])
    except _ENCODE_ERRORS as error:
        raise SessionInvalid(f"{where} cannot be stored: {_reason(error)}") from None
    messages_from_jsonable([loads(row, f"{where} (as written)")], source=f"{where} (as written)")
    return row


def session_to_text(session: Session, source: str) -> bytes:
    """The session file's bytes, every message checked to read back (see :func:`message_rows`)."""
    head = dumps(session_to_jsonable(session, with_messages=False))
    rows = message_rows(session.messages, source)
    return f'{head[:-1]},"messages":[{",".join(rows)}]}}'.encode()


def _reason(error: BaseException) -> str:
    if isinstance(error, RecursionError):
        return "it is nested too deeply"
    return brief(str(error), 200)


def session_to_jsonable(session: Session, *, with_messages: bool = True) -> dict[str, Any]:
    """The session file's content: the envelope first, the messages last."""
    data = {
        "version": FORMAT_VERSION,
        "id": session.id,
        "title": session.title,
        "model": session.model,
        "created_at": timestamp_to_text(session.created_at),
        "updated_at": timestamp_to_text(session.updated_at),
        "usage": usage_to_jsonable(session.usage),
    }
    if with_messages:
        data["messages"] = messages_to_jsonable(session.messages)
    return data


def session_from_jsonable(data: Any, source: str, expected_id: str) -> Session:
    """The session in a parsed session file, as stored (not yet checked as a transcript)."""
    _check_envelope(data, source, expected_id)
    return Session(
        id=expected_id,
        messages=tuple(messages_from_jsonable(data["messages"], source=f"{source}: messages")),
        usage=usage_from_jsonable(data.get("usage", {}), source),
        model=text_field(data["model"], "model", source),
        title=text_field(data["title"], "title", source),
        created_at=timestamp_from_text(data.get("created_at"), f"{source}: created_at"),
        updated_at=timestamp_from_text(data.get("updated_at"), f"{source}: updated_at"),
    )


def summary_from_jsonable(data: Any, source: str, expected_id: str) -> SessionSummary:
    """The summary of a parsed session file; its messages are counted, not decoded."""
    _check_envelope(data, source, expected_id)
    messages = data["messages"]
    if not isinstance(messages, list):
        raise SessionInvalid(f"{source}: messages must be a list, found {_kind(messages)}")
    return SessionSummary(
        id=expected_id,
        title=text_field(data["title"], "title", source),
        model=text_field(data["model"], "model", source),
        created_at=timestamp_from_text(data.get("created_at"), f"{source}: created_at"),
        updated_at=timestamp_from_text(data.get("updated_at"), f"{source}: updated_at"),
        message_count=len(messages),
    )


def _check_envelope(data: Any, source: str, expected_id: str) -> None:
    if not isinstance(data, dict):
        raise SessionInvalid(f"{source}: expected a session object, found {_kind(data)}")
    version = data.get("version")
    if type(version) is not int:
        raise SessionInvalid(f"{source}: not a tether session file (no format version)")
    if version > FORMAT_VERSION:
        raise SessionInvalid(
            f"{source}: written by a newer tether (format {version}; this one reads up to {FORMAT_VERSION})"
        )
    for key in ("id", "title", "model"):
        if not isinstance(data.get(key), str):
            raise SessionInvalid(f"{source}: {key!r} must be a string, found {_kind(data.get(key))}")
    if data["id"] != expected_id:
        raise SessionInvalid(f"{source}: holds session {data['id']!r}, not {expected_id!r}")
    if "messages" not in data:
        raise SessionInvalid(f"{source}: no 'messages' (a truncated write?)")


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )


def messages_from_rows(
    rows: Sequence[tuple[Any, Any]],
    count: int,
    source: str,
    text_of: Callable[[Any, Any], str | bytes] = lambda seq, data: data,
) -> tuple[Message, ...]:
    """The messages of a store's rows (``seq``, ``data``), which must be exactly ``0..count-1``: a missing,
    extra or damaged row raises ``SessionInvalid`` naming it. ``text_of(seq, data)`` is the row's JSON text
    (a store checks its column's type there)."""
    for index, (seq, _) in enumerate(rows):
        if seq != index:
            raise SessionInvalid(f"{source}: messages row seq={index} is missing (found seq={brief(seq)} in its place)")
    if len(rows) != count:
        raise SessionInvalid(f"{source}: {len(rows)} message rows stored, but the session row says {count}")
    items = [loads(text_of(seq, data), f"{source}, messages row seq={seq}") for seq, data in rows]
    try:
        return tuple(messages_from_jsonable(items, source=source))
    except SessionInvalid:
        for seq, item in enumerate(items):  # name the row
            messages_from_jsonable([item], source=f"{source}, messages row seq={seq}")
        raise


def common_prefix(stored: Sequence[Message], messages: Sequence[Message]) -> int:
    """How many leading messages two versions of a transcript share: what a store need not write again."""
    for index, (old, new) in enumerate(zip(stored, messages, strict=False)):
        if old is not new and old != new:
            return index
    return min(len(stored), len(messages))
