"""SQLiteSessionStore: every session in one SQLite file; the command line's default store.

Schema (``PRAGMA user_version`` = 3)::

    sessions(id PRIMARY KEY, title, model, created_at, updated_at, usage, message_count, revision)
    messages(session_id, seq, role, data, PRIMARY KEY (session_id, seq))
    outputs(session_id, ref, content, PRIMARY KEY (session_id, ref))
    exchanges(session_id, seq, data, PRIMARY KEY (session_id, seq))

``outputs`` holds the session's cached tool outputs (``OutputStore``), one row each, inserted once (a ref
already there is left as it is). A database of schema 1 (before outputs were kept) gets the table when it is
opened; a tether that reads only schema 1 then refuses it rather than deleting sessions and leaving their
outputs behind. ``exchanges`` holds the session's exchanges (``ExchangeStore``), one JSON row each, ``seq``
counting from 0 in the order saved; schema 3 added it, and a database of schema 2 gets it the same way.

One row per message; ``seq`` is the message's index in the transcript (so "message 3" in an error is the
row with ``seq`` 3) and ``data`` its JSON. ``usage`` is JSON; timestamps are ISO 8601 UTC text.

A save is one ``BEGIN IMMEDIATE`` transaction that writes only what changed. The store remembers, per
session, the messages it last wrote or read and the session row's ``revision`` at that time. If the
revision is unchanged, the new messages are compared with those (identity first: appending to a transcript
costs one pointer comparison per stored message); otherwise another writer has been there, and the stored
rows' JSON is compared instead. Rows after the common prefix are deleted (a rewritten or shortened history)
and the new messages inserted; the session row (title, model, usage, timestamps, count, revision) is
updated in the same transaction. So a turn appends its rows, and a crash leaves the old or the new session.

The database is in WAL mode (readers do not block the writer; other processes may share the file) with
``synchronous=FULL`` (a committed save survives a power cut). All I/O runs in a worker thread, on one
connection per store object, one operation at a time; ``aclose()`` (or ``async with``) closes it.

``SessionInvalid`` names the file, and the session and row for a bad row: a file that is not a SQLite
database, a damaged one, a database of another program or of a newer tether, a row that is not JSON or not
a message, text that is not UTF-8, a column of the wrong type, missing rows. A row another writer left
with usage counts out of range, a usage that is not JSON, a title that is not UTF-8 or a revision that is
not a number is normalised instead (and logged), so that it cannot make the session unusable.

Deleted content does not linger: a delete removes the session's outputs and exchanges with its messages, the connection
runs with ``secure_delete`` (freed pages are overwritten with zeros) and a delete is followed by a
``TRUNCATE`` checkpoint, which copies the log into the database
and empties it, so neither the database nor its ``-wal`` holds the deleted session's text. (A checkpoint
that another process's open read keeps from finishing is logged; the log is emptied by the next one.)

The database, its ``-wal``, ``-shm`` and journal are owner-only (0600), and directories the store creates
0700, whatever the umask; an existing database readable by others is tightened when it is opened.

A database kept busy beyond ``timeout`` or a failing disk raises ``sqlite3.OperationalError``.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import dataclasses
import os
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from tether._logging import get_logger
from tether._sqlite import switch_to_wal
from tether.errors import SessionInvalid
from tether.exchanges import Exchange
from tether.messages import Message
from tether.sessions import codec
from tether.sessions.base import (
    Session,
    SessionNotFound,
    SessionSummary,
    brief,
    check_output_ref,
    check_session_id,
    newest_first,
    normalized_usage,
    storable,
    storable_exchanges,
    storable_output,
    stored_exchange,
    stored_output,
    validate_session,
)
from tether.sessions.private import create_private_file, make_private_directory, tighten
from tether.usage import Usage

logger = get_logger("tether.sessions")

SCHEMA_VERSION = 3
_OUTPUTS = """CREATE TABLE outputs (
        session_id TEXT NOT NULL,
        ref TEXT NOT NULL,
        content TEXT NOT NULL,
        PRIMARY KEY (session_id, ref)
    )"""
_EXCHANGES = """CREATE TABLE exchanges (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    )"""
_SCHEMA = (
    """CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        title TEXT NOT NULL,
        model TEXT NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        usage TEXT NOT NULL,
        message_count INTEGER NOT NULL,
        revision INTEGER NOT NULL
    )""",
    """CREATE TABLE messages (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        role TEXT NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    )""",
    _OUTPUTS,
    _EXCHANGES,
    f"PRAGMA user_version = {SCHEMA_VERSION}",
)
_UPGRADES = {1: (_OUTPUTS, "PRAGMA user_version = 2"), 2: (_EXCHANGES, "PRAGMA user_version = 3")}
"""The statements that bring a database of each older schema to the next one, in one transaction."""
_REMEMBERED = 256
"""Sessions whose stored messages the store remembers (least recently used ones are forgotten)."""

_T = TypeVar("_T")


class SQLiteSessionStore:
    """A :class:`~tether.sessions.base.SessionStore` in one SQLite file (created, with its directory, on
    first use). ``timeout``: seconds to wait for another process's write lock."""

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 5.0) -> None:
        self.path = Path(path)
        self.timeout = timeout
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._stored: OrderedDict[str, tuple[int, tuple[Message, ...]]] = OrderedDict()

    async def load(self, session_id: str) -> Session:
        check_session_id(session_id)
        return await asyncio.to_thread(self._locked, self._load, session_id)

    async def save(self, session: Session) -> None:
        check_session_id(session.id)
        await asyncio.to_thread(self._locked, self._save, session)

    async def list(self) -> builtins.list[SessionSummary]:
        return await asyncio.to_thread(self._locked, self._list)

    async def delete(self, session_id: str) -> None:
        check_session_id(session_id)
        await asyncio.to_thread(self._locked, self._delete, session_id)

    async def save_output(self, session_id: str, ref: str, content: str) -> None:
        check_session_id(session_id)
        check_output_ref(ref)
        await asyncio.to_thread(self._locked, self._save_output, session_id, ref, content)

    async def load_output(self, session_id: str, ref: str) -> str | None:
        check_session_id(session_id)
        check_output_ref(ref)
        return await asyncio.to_thread(self._locked, self._load_output, session_id, ref)

    async def save_exchanges(self, session_id: str, exchanges: Sequence[Exchange]) -> None:
        data = storable_exchanges(session_id, exchanges)
        if data:
            await asyncio.to_thread(self._locked, self._save_exchanges, session_id, data)

    async def load_exchanges(self, session_id: str) -> builtins.list[Exchange]:
        check_session_id(session_id)
        return await asyncio.to_thread(self._locked, self._load_exchanges, session_id)

    def close(self) -> None:
        """Close the database connection (blocking; ``aclose`` from async code). The store reopens on use."""
        with self._lock:
            connection, self._connection = self._connection, None
            self._stored.clear()
            if connection is not None:
                connection.close()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    async def __aenter__(self) -> SQLiteSessionStore:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # --- in the worker thread ---------------------------------------------------------------------------

    def _locked(self, operation: Callable[..., _T], *args: Any) -> _T:
        """Run ``operation(connection, *args)`` alone on this store's connection; damage -> SessionInvalid."""
        with self._lock:
            try:
                return operation(self._connect(), *args)
            except sqlite3.DatabaseError as error:
                name = getattr(error, "sqlite_errorname", "")
                if name.startswith("SQLITE_CORRUPT") or name == "SQLITE_NOTADB":
                    self._drop_connection()
                    raise SessionInvalid(f"{self.path}: not a SQLite database, or a damaged one: {error}") from error
                raise

    def _connect(self) -> sqlite3.Connection:
        if self._connection is None:
            make_private_directory(self.path.parent)
            create_private_file(self.path)  # SQLite gives its -wal, -shm and journal the database's mode
            for suffix in _COMPANIONS:
                tighten(self.path.with_name(self.path.name + suffix))
            connection = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
            connection.text_factory = _text
            try:
                self._prepare(connection)
            except BaseException:
                connection.close()
                raise
            self._connection = connection
        return self._connection

    def _drop_connection(self) -> None:
        connection, self._connection = self._connection, None
        self._stored.clear()
        if connection is not None:
            with contextlib.suppress(sqlite3.Error):
                connection.close()

    def _prepare(self, connection: sqlite3.Connection) -> None:
        """WAL mode, durable commits, and the schema: created in a new file, checked in an existing one."""
        mode = switch_to_wal(connection, self.timeout)
        if mode != "wal":
            logger.warning("%s: WAL mode is not available here (journal mode %s)", self.path, mode)
        connection.execute("PRAGMA synchronous = FULL")
        connection.execute("PRAGMA secure_delete = ON")
        with _transaction(connection, "BEGIN IMMEDIATE"):
            (version,) = connection.execute("PRAGMA user_version").fetchone()
            if version == 0:
                tables = [name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")]
                if tables:
                    raise SessionInvalid(
                        f"{self.path}: not a tether session database (it has tables {sorted(tables)} "
                        "and no tether schema version)"
                    )
                for statement in _SCHEMA:
                    connection.execute(statement)
            elif version > SCHEMA_VERSION:
                raise SessionInvalid(
                    f"{self.path}: written by a newer tether (schema {version}; this one reads {SCHEMA_VERSION})"
                )
            while version in _UPGRADES:
                for statement in _UPGRADES[version]:
                    connection.execute(statement)
                (version,) = connection.execute("PRAGMA user_version").fetchone()

    def _load(self, connection: sqlite3.Connection, session_id: str) -> Session:
        source = f"{self.path}: session {session_id!r}"
        with _transaction(connection, "BEGIN"):  # one snapshot for the session row and its messages
            row = connection.execute(
                "SELECT title, model, created_at, updated_at, usage, message_count, revision"
                " FROM sessions WHERE id = ?",
                (session_id,),
            ).fetchone()
            if row is None:
                raise SessionNotFound(f"no session {session_id!r} in {self.path}", details={"session_id": session_id})
            rows = connection.execute(
                "SELECT seq, data FROM messages WHERE session_id = ? ORDER BY seq", (session_id,)
            ).fetchall()
        title, model, created_at, updated_at, usage, count, revision = row
        row_source = f"{self.path}: sessions row {session_id!r}"
        title, model = _repaired(title), _repaired(model)
        _check_types(row_source, title=(title, str), model=(model, str), message_count=(count, int))
        stored = codec.messages_from_rows(rows, count, source, _json_text(source))
        session = Session(
            id=session_id,
            messages=stored,
            usage=_usage_of(usage, row_source),
            model=codec.text_field(model, "model", row_source),
            title=codec.text_field(title, "title", row_source),
            created_at=codec.timestamp_from_text(created_at, f"{row_source}: created_at"),
            updated_at=codec.timestamp_from_text(updated_at, f"{row_source}: updated_at"),
        )
        messages = validate_session(stored, source)
        if type(revision) is int:
            self._remember(session_id, revision, stored)
        return session if messages is stored else dataclasses.replace(session, messages=messages)

    def _save(self, connection: sqlite3.Connection, session: Session) -> None:
        session = storable(session)
        session_id, messages = session.id, session.messages
        with _transaction(connection, "BEGIN IMMEDIATE"):
            row = connection.execute(
                "SELECT revision, message_count FROM sessions WHERE id = ?", (session_id,)
            ).fetchone()
            keep, revision = 0, 0
            if row is not None:
                revision, count = row
                if type(revision) is not int or not 0 <= revision < 2**62:
                    revision = 0  # damaged: the stored rows are compared, and the row gets a sound revision
                    self._stored.pop(session_id, None)
                keep = self._stored_prefix(connection, session_id, revision, count, messages)
            new = messages[keep:]
            rows = codec.message_rows(new, f"session {session_id!r}", first=keep)  # before anything changes
            connection.execute("DELETE FROM messages WHERE session_id = ? AND seq >= ?", (session_id, keep))
            connection.executemany(
                "INSERT INTO messages (session_id, seq, role, data) VALUES (?, ?, ?, ?)",
                [(session_id, keep + i, m.role, data) for i, (m, data) in enumerate(zip(new, rows, strict=True))],
            )
            connection.execute(
                "INSERT INTO sessions (id, title, model, created_at, updated_at, usage, message_count, revision)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET"
                " title = excluded.title, model = excluded.model, created_at = excluded.created_at,"
                " updated_at = excluded.updated_at, usage = excluded.usage,"
                " message_count = excluded.message_count, revision = excluded.revision",
                (
                    session_id,
                    session.title,
                    session.model,
                    codec.timestamp_to_text(session.created_at),
                    codec.timestamp_to_text(session.updated_at),
                    codec.dumps(codec.usage_to_jsonable(session.usage)),
                    len(messages),
                    revision + 1,
                ),
            )
        self._remember(session_id, revision + 1, messages)

    def _stored_prefix(
        self,
        connection: sqlite3.Connection,
        session_id: str,
        revision: int,
        count: Any,
        messages: tuple[Message, ...],
    ) -> int:
        """How many of ``messages`` the database already holds, in place, as rows ``0..n-1``."""
        remembered = self._stored.get(session_id)
        if remembered is not None and remembered[0] == revision and len(remembered[1]) == count:
            return codec.common_prefix(remembered[1], messages)
        rows = connection.execute(
            "SELECT seq, data FROM messages WHERE session_id = ? AND seq < ? ORDER BY seq",
            (session_id, len(messages)),
        ).fetchall()
        wanted = codec.message_rows(messages[: len(rows)])
        keep = 0
        for (seq, data), mine in zip(rows, wanted, strict=True):
            if seq != keep or data != mine:
                break
            keep += 1
        return keep

    def _list(self, connection: sqlite3.Connection) -> builtins.list[SessionSummary]:
        summaries: builtins.list[SessionSummary] = []
        rows = connection.execute("SELECT id, title, model, created_at, updated_at, message_count FROM sessions")
        for session_id, title, model, created_at, updated_at, count in rows:
            source = f"{self.path}: sessions row {session_id!r}"
            try:
                _check_types(source, id=(session_id, str), message_count=(count, int))
                summaries.append(
                    SessionSummary(
                        id=session_id,
                        title=codec.text_field(_repaired(title), "title", source),
                        model=codec.text_field(_repaired(model), "model", source),
                        created_at=codec.timestamp_from_text(created_at, f"{source}: created_at"),
                        updated_at=codec.timestamp_from_text(updated_at, f"{source}: updated_at"),
                        message_count=count,
                    )
                )
            except SessionInvalid as error:
                logger.warning("session left out of the list: %s", error)
        return newest_first(summaries)

    def _save_output(self, connection: sqlite3.Connection, session_id: str, ref: str, content: str) -> None:
        storable_output(session_id, ref, content)
        with _transaction(connection, "BEGIN IMMEDIATE"):
            connection.execute(
                "INSERT INTO outputs (session_id, ref, content) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                (session_id, ref, content),
            )

    def _load_output(self, connection: sqlite3.Connection, session_id: str, ref: str) -> str | None:
        row = connection.execute(
            "SELECT content FROM outputs WHERE session_id = ? AND ref = ?", (session_id, ref)
        ).fetchone()
        if row is None:
            return None
        (content,) = row
        source = f"{self.path}: session {session_id!r}, outputs row {ref}"
        if not isinstance(content, str):
            found = "text that is not UTF-8" if isinstance(content, _NotText) else brief(content)
            raise SessionInvalid(f"{source}: content should be text, found {found}")
        return stored_output(ref, content, source)

    def _save_exchanges(self, connection: sqlite3.Connection, session_id: str, data: builtins.list[bytes]) -> None:
        with _transaction(connection, "BEGIN IMMEDIATE"):
            (start,) = connection.execute(
                "SELECT COALESCE(MAX(seq) + 1, 0) FROM exchanges WHERE session_id = ?", (session_id,)
            ).fetchone()
            connection.executemany(
                "INSERT INTO exchanges (session_id, seq, data) VALUES (?, ?, ?)",
                [(session_id, start + index, item.decode("utf-8")) for index, item in enumerate(data)],
            )

    def _load_exchanges(self, connection: sqlite3.Connection, session_id: str) -> builtins.list[Exchange]:
        rows = connection.execute(
            "SELECT seq, data FROM exchanges WHERE session_id = ? ORDER BY seq", (session_id,)
        ).fetchall()
        source = f"{self.path}: session {session_id!r}, exchanges row"
        return [stored_exchange(data, f"{source} {seq}") for seq, data in rows]

    def _delete(self, connection: sqlite3.Connection, session_id: str) -> None:
        with _transaction(connection, "BEGIN IMMEDIATE"):
            connection.execute("DELETE FROM messages WHERE session_id = ?", (session_id,))
            connection.execute("DELETE FROM exchanges WHERE session_id = ?", (session_id,))
            outputs = connection.execute("DELETE FROM outputs WHERE session_id = ?", (session_id,)).rowcount
            deleted = connection.execute("DELETE FROM sessions WHERE id = ?", (session_id,)).rowcount + outputs
        self._stored.pop(session_id, None)
        if deleted:
            # Copy the log into the database (where secure_delete has zeroed the freed pages) and empty it.
            busy, _, _ = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            if busy:
                logger.warning(
                    "%s: another connection's read kept the log from being emptied after deleting %r; "
                    "the next delete or checkpoint empties it",
                    self.path,
                    session_id,
                )

    def _remember(self, session_id: str, revision: int, messages: tuple[Message, ...]) -> None:
        self._stored[session_id] = (revision, messages)
        self._stored.move_to_end(session_id)
        while len(self._stored) > _REMEMBERED:
            self._stored.popitem(last=False)


@contextlib.contextmanager
def _transaction(connection: sqlite3.Connection, begin: str) -> Iterator[None]:
    """``begin`` ... COMMIT, or ROLLBACK on any exception (if SQLite has not rolled back already)."""
    connection.execute(begin)
    try:
        yield
    except BaseException:
        if connection.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                connection.execute("ROLLBACK")
        raise
    connection.execute("COMMIT")


_COMPANIONS = ("-wal", "-shm", "-journal")
"""The files SQLite keeps next to a database."""


class _NotText(bytes):
    """A TEXT value that is not UTF-8, kept as its bytes: the row is then named in a ``SessionInvalid``
    (or its title repaired) instead of the cursor failing for the whole query."""


def _text(raw: bytes) -> str | _NotText:
    """The connection's ``text_factory``: UTF-8 text, or :class:`_NotText`."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return _NotText(raw)


def _repaired(value: Any) -> Any:
    """A title or model that is not UTF-8, decoded with U+FFFD in place of the bad bytes."""
    return value.decode("utf-8", "replace") if isinstance(value, _NotText) else value


def _usage_of(value: Any, source: str) -> Usage:
    """The usage column, normalised; a column that is not JSON text is no usage (and a warning)."""
    try:
        data = codec.loads(value, f"{source}: usage") if isinstance(value, str) else value
    except SessionInvalid as error:
        data = error.message
    return normalized_usage(data, f"{source}: usage")


def _json_text(source: str) -> Callable[[Any, Any], str]:
    """A messages row's ``data`` as JSON text, or ``SessionInvalid`` saying what the row holds instead."""

    def text_of(seq: Any, data: Any) -> str:
        if not isinstance(data, str):
            found = "text that is not UTF-8" if isinstance(data, _NotText) else brief(data)
            raise SessionInvalid(f"{source}, messages row seq={seq}: data should be JSON text, found {found}")
        return data

    return text_of


def _check_types(source: str, **values: tuple[Any, type]) -> None:
    for name, (value, expected) in values.items():
        if type(value) is not expected:
            found = "text that is not UTF-8" if isinstance(value, _NotText) else brief(value)
            raise SessionInvalid(f"{source}: {name} should be {expected.__name__}, found {found}")
