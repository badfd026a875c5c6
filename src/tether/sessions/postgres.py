"""PostgresSessionStore: every session in a PostgreSQL schema, shared by any number of processes and machines.

Requires the ``postgres`` extra (``pip install 'tether[postgres]'``: psycopg 3 and psycopg-pool); they are
imported when the store is first used, never by ``import tether``.

Schema (in the PostgreSQL schema ``schema``, ``tether`` by default; ``schema_version.version`` = 2)::

    sessions(id PRIMARY KEY, title BYTEA, model BYTEA, created_at TIMESTAMPTZ, updated_at TIMESTAMPTZ,
             usage TEXT, message_count INTEGER, revision BIGINT)
    messages(session_id, seq, role, data TEXT, PRIMARY KEY (session_id, seq))
    outputs(session_id, ref, content BYTEA, PRIMARY KEY (session_id, ref))
    exchanges(session_id, seq, data BYTEA, PRIMARY KEY (session_id, seq))
    schema_version(version INTEGER)
    revisions (a sequence)

As in the SQLite store, a message is one row (``seq`` is its index: "message 3" in an error is the row with
``seq`` 3) holding its ASCII JSON, ``usage`` is JSON, and a cached tool output (``OutputStore``) is one row,
inserted once; an exchange (``ExchangeStore``) is one row of its JSON, ``seq`` counting from 0 in the order saved
(schema 2 added the table: a schema of version 1 gets it when first used). Title, model, outputs and exchanges
are UTF-8 bytes, since PostgreSQL text cannot hold the NUL
character a conversation may contain. The first use creates the schema and its tables (under an advisory
lock, so that processes starting together create them once); a schema of a newer tether, or one holding
tables without a tether schema version, is refused with ``SessionInvalid`` and left alone.

A save is one transaction that holds a per-session advisory lock (saves and deletes of one session, from
any process, run one after the other: the last to commit wins, never a mix) and writes only what changed.
The store remembers, per session, the messages it last wrote or read and the session row's ``revision``,
which a save takes from the ``revisions`` sequence, so it never repeats, even after a delete. If the stored
revision is the remembered one, the new messages are compared with the remembered ones (identity first);
otherwise the stored rows' JSON is compared. Rows after the common prefix are deleted and the new
messages inserted; the session row is updated in the same transaction. A load reads the session row and
its messages in one ``REPEATABLE READ`` snapshot.

``SessionInvalid`` names the schema, the session and the row for a bad row: a message row that is not JSON
or not a message, a missing row, a count that does not match, an output whose content is not its ref. A
usage that is not JSON, or a title or model that is not UTF-8, is normalised instead (and logged), as in
the SQLite store.

A delete removes the session row, its messages, its outputs and its exchanges in one transaction: nothing of the session
is left readable in these tables. PostgreSQL itself keeps the deleted row versions in its data files and
write-ahead log until ``VACUUM`` reuses the space and the log is recycled; who may read those is the
server's administrator's business, as are the roles that may read the schema (the store creates it owned
by the connecting role, and grants nothing to others).

Connections come from a ``psycopg_pool.AsyncConnectionPool`` (``min_size``..``max_size`` connections,
checked before each use, so a connection the server dropped is replaced; their ``application_name`` is
``tether sessions SCHEMA`` unless the URL sets one). Failures that are not about the
data propagate as ``psycopg.OperationalError``: a server that cannot be reached on first use (with the
reason libpq gives), or no connection available within ``timeout`` seconds later (``PoolTimeout``, a
subclass). The store serves the event loop it is first used on; ``aclose()`` (or ``async with``) closes
the pool, and the next use opens a new one.
"""

from __future__ import annotations

import asyncio
import builtins
import dataclasses
import hashlib
import re
from collections import OrderedDict
from collections.abc import Sequence
from datetime import UTC
from types import TracebackType
from typing import TYPE_CHECKING, Any

from tether._logging import get_logger
from tether.errors import SessionInvalid
from tether.exchanges import Exchange
from tether.messages import Message
from tether.sessions import codec
from tether.sessions.base import (
    MAX_OUTPUT_BYTES,
    Session,
    SessionNotFound,
    SessionSummary,
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
from tether.usage import Usage

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

logger = get_logger("tether.sessions")

SCHEMA_VERSION = 2
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_EXCHANGES = """CREATE TABLE {s}.exchanges (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        data BYTEA NOT NULL,
        PRIMARY KEY (session_id, seq)
    )"""
_UPGRADES = {1: (_EXCHANGES, "UPDATE {s}.schema_version SET version = 2")}
"""The statements that bring a schema of each older version to the next one, in the transaction that checks it."""
_TABLES = (
    """CREATE TABLE {s}.sessions (
        id TEXT PRIMARY KEY,
        title BYTEA NOT NULL,
        model BYTEA NOT NULL,
        created_at TIMESTAMPTZ NOT NULL,
        updated_at TIMESTAMPTZ NOT NULL,
        usage TEXT NOT NULL,
        message_count INTEGER NOT NULL,
        revision BIGINT NOT NULL
    )""",
    """CREATE TABLE {s}.messages (
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        role TEXT NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    )""",
    """CREATE TABLE {s}.outputs (
        session_id TEXT NOT NULL,
        ref TEXT NOT NULL,
        content BYTEA NOT NULL,
        PRIMARY KEY (session_id, ref)
    )""",
    _EXCHANGES,
    "CREATE SEQUENCE {s}.revisions",
    "CREATE TABLE {s}.schema_version (version INTEGER NOT NULL)",
    f"INSERT INTO {{s}}.schema_version (version) VALUES ({SCHEMA_VERSION})",
)
_REMEMBERED = 256
"""Sessions whose stored messages the store remembers (least recently used ones are forgotten)."""


class PostgresSessionStore:
    """A :class:`~tether.sessions.base.SessionStore`, ``OutputStore`` and ``ExchangeStore`` in a PostgreSQL
    schema.

    ``url``: a libpq connection string or ``postgresql://`` URL (a password is best left to ``PGPASSWORD``
    or ``~/.pgpass``). ``schema``: the PostgreSQL schema holding tether's tables (lowercase letters, digits
    and ``_``; ``ValueError`` otherwise), created on first use. ``min_size``/``max_size``: the pool's
    connections; ``timeout``: seconds to wait for a connection (and to connect on first use).
    """

    def __init__(
        self, url: str, *, schema: str = "tether", min_size: int = 1, max_size: int = 4, timeout: float = 10.0
    ) -> None:
        if _SCHEMA_NAME.fullmatch(schema) is None:
            raise ValueError(f"schema {schema!r} is not valid: use 1 to 63 lowercase letters, digits or '_'")
        if not 0 <= min_size <= max_size or max_size < 1:
            raise ValueError(
                f"pool sizes must satisfy 0 <= min_size <= max_size, 1 <= max_size: {min_size}, {max_size}"
            )
        self.url = url
        self.schema = schema
        self.min_size, self.max_size, self.timeout = min_size, max_size, timeout
        self._pool: AsyncConnectionPool[AsyncConnection[Any]] | None = None
        self._opening: asyncio.Lock | None = None
        self._stored: OrderedDict[str, tuple[int, tuple[Message, ...]]] = OrderedDict()

    def __repr__(self) -> str:
        return f"PostgresSessionStore(schema={self.schema!r})"  # never the URL: it may hold a password

    # --- the protocols ----------------------------------------------------------------------------------

    async def load(self, session_id: str) -> Session:
        check_session_id(session_id)
        pool = await self._ready()
        async with pool.connection() as connection, connection.transaction():
            await connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            row = await _one(
                connection,
                f"SELECT title, model, created_at, updated_at, usage, message_count, revision"
                f" FROM {self._s}.sessions WHERE id = %s",
                (session_id,),
            )
            if row is None:
                raise SessionNotFound(
                    f"no session {session_id!r} in PostgreSQL schema {self.schema!r}",
                    details={"session_id": session_id},
                )
            cursor = await connection.execute(
                f"SELECT seq, data FROM {self._s}.messages WHERE session_id = %s ORDER BY seq", (session_id,)
            )
            rows = await cursor.fetchall()
        return self._session_of(session_id, row, rows)

    async def save(self, session: Session) -> None:
        session = storable(session)
        rows_source = f"session {session.id!r}"
        pool = await self._ready()
        async with pool.connection() as connection, connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key(session.id),))
            keep = await self._stored_prefix(connection, session)
            new = session.messages[keep:]
            rows = codec.message_rows(new, rows_source, first=keep)  # before anything changes
            revision = await self._write(connection, session, keep, list(zip(new, rows, strict=True)))
        self._remember(session.id, revision, session.messages)

    async def list(self) -> builtins.list[SessionSummary]:
        pool = await self._ready()
        async with pool.connection() as connection:
            cursor = await connection.execute(
                f"SELECT id, title, model, created_at, updated_at, message_count FROM {self._s}.sessions"
            )
            rows = await cursor.fetchall()
        summaries = []
        for session_id, title, model, created_at, updated_at, count in rows:
            source = f"{self._where}: sessions row {session_id!r}"
            summaries.append(
                SessionSummary(
                    id=session_id,
                    title=_text(title, "title", source),
                    model=_text(model, "model", source),
                    created_at=created_at.astimezone(UTC),
                    updated_at=updated_at.astimezone(UTC),
                    message_count=count,
                )
            )
        return newest_first(summaries)

    async def delete(self, session_id: str) -> None:
        check_session_id(session_id)
        pool = await self._ready()
        async with pool.connection() as connection, connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key(session_id),))
            for table, column in (
                ("messages", "session_id"), ("outputs", "session_id"), ("exchanges", "session_id"), ("sessions", "id"),
            ):  # fmt: skip
                await connection.execute(f"DELETE FROM {self._s}.{table} WHERE {column} = %s", (session_id,))
        self._stored.pop(session_id, None)

    async def save_output(self, session_id: str, ref: str, content: str) -> None:
        data = storable_output(session_id, ref, content)
        pool = await self._ready()
        async with pool.connection() as connection:
            await connection.execute(
                f"INSERT INTO {self._s}.outputs (session_id, ref, content) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                (session_id, ref, data),
            )

    async def load_output(self, session_id: str, ref: str) -> str | None:
        check_session_id(session_id)
        check_output_ref(ref)
        pool = await self._ready()
        async with pool.connection() as connection:
            row = await _one(
                connection,
                f"SELECT octet_length(content), CASE WHEN octet_length(content) <= %s THEN content END"
                f" FROM {self._s}.outputs WHERE session_id = %s AND ref = %s",
                (MAX_OUTPUT_BYTES, session_id, ref),
            )
        if row is None:
            return None
        size, content = row
        source = f"{self._where}: session {session_id!r}, outputs row {ref}"
        if content is None:
            raise SessionInvalid(f"{source}: {size} bytes, more than a store reads ({MAX_OUTPUT_BYTES})")
        return stored_output(ref, bytes(content), source)

    async def save_exchanges(self, session_id: str, exchanges: Sequence[Exchange]) -> None:
        data = storable_exchanges(session_id, exchanges)
        if not data:
            return
        pool = await self._ready()
        async with pool.connection() as connection, connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key(session_id),))
            row = await _one(
                connection, f"SELECT COALESCE(MAX(seq) + 1, 0) FROM {self._s}.exchanges WHERE session_id = %s",
                (session_id,),
            )  # fmt: skip
            start = row[0] if row is not None else 0
            async with connection.cursor() as cursor:
                await cursor.executemany(
                    f"INSERT INTO {self._s}.exchanges (session_id, seq, data) VALUES (%s, %s, %s)",
                    [(session_id, start + index, item) for index, item in enumerate(data)],
                )

    async def load_exchanges(self, session_id: str) -> builtins.list[Exchange]:
        check_session_id(session_id)
        pool = await self._ready()
        async with pool.connection() as connection:
            cursor = await connection.execute(
                f"SELECT seq, data FROM {self._s}.exchanges WHERE session_id = %s ORDER BY seq", (session_id,)
            )
            rows = await cursor.fetchall()
        source = f"{self._where}: session {session_id!r}, exchanges row"
        return [stored_exchange(bytes(data), f"{source} {seq}") for seq, data in rows]

    async def aclose(self) -> None:
        """Close the pool's connections. The store opens a new pool on its next use."""
        pool, self._pool = self._pool, None
        self._stored.clear()
        if pool is not None:
            await pool.close()

    async def __aenter__(self) -> PostgresSessionStore:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # --- connections and the schema ---------------------------------------------------------------------

    @property
    def _s(self) -> str:
        return f'"{self.schema}"'  # checked against _SCHEMA_NAME: safe to put in a statement

    @property
    def _where(self) -> str:
        return f"PostgreSQL schema {self.schema!r}"

    def _lock_key(self, session_id: str) -> int:
        digest = hashlib.blake2b(f"tether-session\0{self.schema}\0{session_id}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big", signed=True)

    async def _ready(self) -> AsyncConnectionPool[AsyncConnection[Any]]:
        """The pool, opened (and the schema checked or created) on first use."""
        if self._pool is not None:
            return self._pool
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            if self._pool is None:
                self._pool = await self._open()
        return self._pool

    async def _open(self) -> AsyncConnectionPool[AsyncConnection[Any]]:
        import psycopg
        from psycopg_pool import AsyncConnectionPool

        options: dict[str, Any] = {
            "autocommit": True,
            "fallback_application_name": f"tether sessions {self.schema}",
        }
        # A first connection of its own: an unreachable server fails here with libpq's reason. The pool then
        # opens with its connections made (no connection attempt left running when the event loop ends).
        async with await psycopg.AsyncConnection.connect(
            self.url, connect_timeout=max(1, round(self.timeout)), **options
        ) as connection:
            await self._prepare(connection)
        pool: AsyncConnectionPool[AsyncConnection[Any]] = AsyncConnectionPool(
            self.url,
            kwargs=options,
            min_size=self.min_size,
            max_size=self.max_size,
            timeout=self.timeout,
            check=AsyncConnectionPool.check_connection,
            open=False,
            name=f"tether-sessions-{self.schema}",
        )
        await pool.open(wait=True, timeout=self.timeout)
        return pool

    async def _prepare(self, connection: AsyncConnection[Any]) -> None:
        """Create the schema and its tables in an empty or missing schema; check the version of another."""
        async with connection.transaction():
            await connection.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key(""),))
            exists = await _one(connection, "SELECT 1 FROM pg_namespace WHERE nspname = %s", (self.schema,))
            if exists is None:
                await connection.execute(f"CREATE SCHEMA {self._s}")
            cursor = await connection.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')",
                (self.schema,),
            )
            names = sorted(name for (name,) in await cursor.fetchall())
            if not names:
                for statement in _TABLES:
                    await connection.execute(statement.format(s=self._s))
                return
            if "schema_version" not in names:
                raise SessionInvalid(
                    f"{self._where}: not a tether session schema (it has {names} and no tether schema version)"
                )
            cursor = await connection.execute(f"SELECT version FROM {self._s}.schema_version")
            versions = [version for (version,) in await cursor.fetchall()]
            while len(versions) == 1 and versions[0] in _UPGRADES:
                for statement in _UPGRADES[versions[0]]:
                    await connection.execute(statement.format(s=self._s))
                versions = [versions[0] + 1]
        if len(versions) != 1:
            raise SessionInvalid(f"{self._where}: schema_version should hold one row, found {len(versions)}")
        if versions[0] != SCHEMA_VERSION:
            newer = versions[0] > SCHEMA_VERSION
            raise SessionInvalid(
                f"{self._where}: written by {'a newer' if newer else 'an unknown'} tether"
                f" (schema {versions[0]}; this one reads {SCHEMA_VERSION})"
            )

    # --- saving -----------------------------------------------------------------------------------------

    async def _stored_prefix(self, connection: AsyncConnection[Any], session: Session) -> int:
        """How many of the session's messages the database already holds, in place, as rows ``0..n-1``."""
        row = await _one(
            connection, f"SELECT revision, message_count FROM {self._s}.sessions WHERE id = %s", (session.id,)
        )
        if row is None:
            return 0
        revision, count = row
        remembered = self._stored.get(session.id)
        if remembered is not None and remembered[0] == revision and len(remembered[1]) == count:
            keep = codec.common_prefix(remembered[1], session.messages)
            if await self._rows_are(connection, session.id, remembered[1][:keep]):
                return keep  # else a row was changed behind the store's back: compare them all
        cursor = await connection.execute(
            f"SELECT seq, data FROM {self._s}.messages WHERE session_id = %s AND seq < %s ORDER BY seq",
            (session.id, len(session.messages)),
        )
        rows = await cursor.fetchall()
        wanted = codec.message_rows(session.messages[: len(rows)])
        keep = 0
        for (seq, data), mine in zip(rows, wanted, strict=True):
            if seq != keep or data != mine:
                break
            keep += 1
        return keep

    async def _rows_are(self, connection: AsyncConnection[Any], session_id: str, messages: Sequence[Message]) -> bool:
        """Whether the first stored rows of the session are exactly ``messages``' rows: compared by one digest
        computed on the server (the rows do not travel), so that a row changed by another writer is not trusted
        from memory."""
        if not messages:
            return True
        mine = hashlib.md5("\n".join(codec.message_rows(messages)).encode(), usedforsecurity=False).hexdigest()
        row = await _one(
            connection,
            f"SELECT md5(string_agg(data, E'\\n' ORDER BY seq)), count(*) FROM {self._s}.messages "
            "WHERE session_id = %s AND seq < %s",
            (session_id, len(messages)),
        )
        return row is not None and row[0] == mine and row[1] == len(messages)

    async def _write(
        self, connection: AsyncConnection[Any], session: Session, keep: int, new: Sequence[tuple[Message, str]]
    ) -> int:
        """Replace the message rows from ``keep`` on with ``new`` and upsert the session row; its revision."""
        await connection.execute(
            f"DELETE FROM {self._s}.messages WHERE session_id = %s AND seq >= %s", (session.id, keep)
        )
        if new:
            async with connection.cursor() as cursor:
                await cursor.executemany(
                    f"INSERT INTO {self._s}.messages (session_id, seq, role, data) VALUES (%s, %s, %s, %s)",
                    [(session.id, keep + i, message.role, data) for i, (message, data) in enumerate(new)],
                )
        row = await _one(
            connection,
            f"INSERT INTO {self._s}.sessions"
            " (id, title, model, created_at, updated_at, usage, message_count, revision)"
            f" VALUES (%s, %s, %s, %s, %s, %s, %s, nextval('{self._s}.revisions')) ON CONFLICT (id) DO UPDATE SET"
            " title = excluded.title, model = excluded.model, created_at = excluded.created_at,"
            " updated_at = excluded.updated_at, usage = excluded.usage,"
            " message_count = excluded.message_count, revision = excluded.revision RETURNING revision",
            (
                session.id,
                session.title.encode("utf-8"),
                session.model.encode("utf-8"),
                session.created_at,
                session.updated_at,
                codec.dumps(codec.usage_to_jsonable(session.usage)),
                len(session.messages),
            ),
        )
        assert row is not None  # RETURNING always gives the row
        return int(row[0])

    def _remember(self, session_id: str, revision: int, messages: tuple[Message, ...]) -> None:
        self._stored[session_id] = (revision, messages)
        self._stored.move_to_end(session_id)
        while len(self._stored) > _REMEMBERED:
            self._stored.popitem(last=False)

    # --- loading ----------------------------------------------------------------------------------------

    def _session_of(self, session_id: str, row: Sequence[Any], rows: Sequence[tuple[Any, Any]]) -> Session:
        title, model, created_at, updated_at, usage, count, revision = row
        source = f"{self._where}: session {session_id!r}"
        row_source = f"{self._where}: sessions row {session_id!r}"
        stored = codec.messages_from_rows(rows, count, source)
        session = Session(
            id=session_id,
            messages=stored,
            usage=_usage_of(usage, row_source),
            model=_text(model, "model", row_source),
            title=_text(title, "title", row_source),
            created_at=created_at,
            updated_at=updated_at,
        )
        messages = validate_session(stored, source)
        self._remember(session_id, revision, stored)
        return session if messages is stored else dataclasses.replace(session, messages=messages)


async def _one(connection: AsyncConnection[Any], query: str, params: Sequence[Any]) -> tuple[Any, ...] | None:
    cursor = await connection.execute(query, params)  # built from checked names only
    return await cursor.fetchone()


def _text(value: bytes | memoryview, name: str, source: str) -> str:
    """A title or model column: UTF-8, or decoded with U+FFFD in place of bad bytes (and logged)."""
    data = bytes(value)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        logger.warning("%s: %s is not UTF-8; bad bytes read as U+FFFD", source, name)
        return data.decode("utf-8", "replace")


def _usage_of(value: str, source: str) -> Usage:
    """The usage column, normalised; a column that is not JSON is no usage (and a warning)."""
    try:
        data = codec.loads(value, f"{source}: usage")
    except SessionInvalid as error:
        data = error.message
    return normalized_usage(data, f"{source}: usage")
