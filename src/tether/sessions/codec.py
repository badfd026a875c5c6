"""The JSON form of a session's fields, shared by the file and SQLite stores.

Every decoder takes a ``source`` (a file, a row) and raises ``SessionInvalid`` naming it and the problem;
none lets a ``KeyError`` or ``TypeError`` escape for bad data. JSON text is written ASCII-only, so any
Python string (a lone surrogate from a tool's output included) can be stored and read back.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from tether.errors import SessionInvalid
from tether.messages import Message, messages_from_jsonable, messages_to_jsonable
from tether.sessions.base import Session, SessionSummary
from tether.usage import Usage

FORMAT_VERSION = 1
"""The version of the session file format; a file from a newer version is refused, not misread."""

_USAGE_FIELDS = tuple(f.name for f in dataclasses.fields(Usage))


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
    """A Usage from its JSON object; missing counters are 0, unknown ones are ignored (a newer writer's)."""
    if not isinstance(data, dict):
        raise SessionInvalid(f"{source}: usage must be an object, found {_kind(data)}")
    values: dict[str, int] = {}
    for name in _USAGE_FIELDS:
        value = data.get(name, 0)
        if type(value) is not int or value < 0:
            raise SessionInvalid(f"{source}: usage.{name} must be a non-negative integer, found {value!r}")
        values[name] = value
    return Usage(**values)


def message_rows(messages: Sequence[Message]) -> list[str]:
    """One JSON text per message."""
    return [dumps(item) for item in messages_to_jsonable(messages)]


def session_to_jsonable(session: Session) -> dict[str, Any]:
    """The session file's content: the envelope first, the messages last."""
    return {
        "version": FORMAT_VERSION,
        "id": session.id,
        "title": session.title,
        "model": session.model,
        "created_at": timestamp_to_text(session.created_at),
        "updated_at": timestamp_to_text(session.updated_at),
        "usage": usage_to_jsonable(session.usage),
        "messages": messages_to_jsonable(session.messages),
    }


def session_from_jsonable(data: Any, source: str, expected_id: str) -> Session:
    """The session in a parsed session file, as stored (not yet checked as a transcript)."""
    _check_envelope(data, source, expected_id)
    return Session(
        id=expected_id,
        messages=tuple(messages_from_jsonable(data["messages"], source=f"{source}: messages")),
        usage=usage_from_jsonable(data.get("usage"), source),
        model=data["model"],
        title=data["title"],
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
        title=data["title"],
        model=data["model"],
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
