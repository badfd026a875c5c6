"""MemorySessionStore: sessions in a dict, for tests and short-lived programs.

Nothing outlives the store object. Sessions are immutable, so the store keeps the objects it is given (with
their usage normalised); ``save`` refuses what the other stores refuse (messages included that would not read
back once written), so a program tested against this store behaves the same on the others, and ``load``
returns them checked the same way the other stores check what they read. Outputs (``OutputStore``) and
exchanges (``ExchangeStore``) are kept the same way, per session, until ``delete``.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Sequence

from tether.exchanges import Exchange
from tether.sessions import codec
from tether.sessions.base import (
    Session,
    SessionNotFound,
    SessionSummary,
    check_output_ref,
    check_session_id,
    newest_first,
    storable,
    storable_exchanges,
    storable_output,
    stored_output,
    summary_of,
    validate_session,
)


class MemorySessionStore:
    """A :class:`~tether.sessions.base.SessionStore` (and ``OutputStore``, ``ExchangeStore``) that keeps sessions
    in memory."""

    def __init__(self) -> None:
        self._sessions: dict[str, Session] = {}
        self._outputs: dict[str, dict[str, str]] = {}
        self._exchanges: dict[str, list[Exchange]] = {}

    async def load(self, session_id: str) -> Session:
        check_session_id(session_id)
        session = self._sessions.get(session_id)
        if session is None:
            raise SessionNotFound(f"no session {session_id!r} in memory", details={"session_id": session_id})
        messages = validate_session(session.messages, f"session {session_id!r}")
        return session if messages is session.messages else dataclasses.replace(session, messages=messages)

    async def save(self, session: Session) -> None:
        session = storable(session)
        codec.message_rows(session.messages, f"session {session.id!r}")
        self._sessions[session.id] = session

    async def list(self) -> builtins.list[SessionSummary]:
        return newest_first(summary_of(s) for s in self._sessions.values())

    async def delete(self, session_id: str) -> None:
        check_session_id(session_id)
        self._outputs.pop(session_id, None)
        self._exchanges.pop(session_id, None)
        self._sessions.pop(session_id, None)

    async def save_output(self, session_id: str, ref: str, content: str) -> None:
        storable_output(session_id, ref, content)
        self._outputs.setdefault(session_id, {}).setdefault(ref, content)

    async def load_output(self, session_id: str, ref: str) -> str | None:
        check_session_id(session_id)
        content = self._outputs.get(session_id, {}).get(check_output_ref(ref))
        return None if content is None else stored_output(ref, content, f"session {session_id!r}: output {ref}")

    async def save_exchanges(self, session_id: str, exchanges: Sequence[Exchange]) -> None:
        storable_exchanges(session_id, exchanges)
        self._exchanges.setdefault(session_id, []).extend(exchanges)

    async def load_exchanges(self, session_id: str) -> builtins.list[Exchange]:
        check_session_id(session_id)
        return builtins.list(self._exchanges.get(session_id, ()))
