"""Sessions: conversations kept between runs (see ``base.py`` for the contract every store keeps).

``MemorySessionStore`` for tests, ``FileSessionStore`` (one JSON file per session), ``SQLiteSessionStore``
(one database; the command line's default), ``PostgresSessionStore`` (a PostgreSQL schema shared by many
processes; the ``postgres`` extra). Names are loaded on first use, so importing this package does
not import ``sqlite3`` or pydantic.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "Exchange": "tether.exchanges",
    "ExchangeStore": "tether.sessions.base",
    "OutputStore": "tether.sessions.base",
    "Session": "tether.sessions.base",
    "SessionNotFound": "tether.sessions.base",
    "SessionStore": "tether.sessions.base",
    "SessionSummary": "tether.sessions.base",
    "check_session_id": "tether.sessions.base",
    "new_session_id": "tether.sessions.base",
    "suggest_title": "tether.sessions.base",
    "validate_session": "tether.sessions.base",
    "MemorySessionStore": "tether.sessions.memory",
    "FileSessionStore": "tether.sessions.files",
    "SQLiteSessionStore": "tether.sessions.sqlite",
    "PostgresSessionStore": "tether.sessions.postgres",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from tether.exchanges import Exchange as Exchange
    from tether.sessions.base import ExchangeStore as ExchangeStore
    from tether.sessions.base import OutputStore as OutputStore
    from tether.sessions.base import Session as Session
    from tether.sessions.base import SessionNotFound as SessionNotFound
    from tether.sessions.base import SessionStore as SessionStore
    from tether.sessions.base import SessionSummary as SessionSummary
    from tether.sessions.base import check_session_id as check_session_id
    from tether.sessions.base import new_session_id as new_session_id
    from tether.sessions.base import suggest_title as suggest_title
    from tether.sessions.base import validate_session as validate_session
    from tether.sessions.files import FileSessionStore as FileSessionStore
    from tether.sessions.memory import MemorySessionStore as MemorySessionStore
    from tether.sessions.postgres import PostgresSessionStore as PostgresSessionStore
    from tether.sessions.sqlite import SQLiteSessionStore as SQLiteSessionStore


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tether.sessions' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
