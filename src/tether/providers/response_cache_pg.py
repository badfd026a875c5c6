"""PostgresResponses: the response cache's answers in a PostgreSQL table, for a cache several machines share.

``ResponseCache("postgresql://...")`` (``response_cache.py``) keeps its rows here instead of in a SQLite file:
the same columns (the key, the model, when it was stored, the events' JSON), one row per key, so the keys, the
TTL and the replays are the SQLite file's. psycopg (``tether[postgres]``) is loaded on first use, not at
import. Like the file, every read and write is one statement in its own transaction (autocommit), made on a
worker thread, over a connection taken from the cache's idle ones (or a new one) and put back after; a server
that cannot be reached, or a statement that fails, is ``StoreUnavailable`` and that connection is dropped (the
next call connects again). The idle connections close with :meth:`close`, or when the cache is collected.

The table is created on first use (``CREATE TABLE IF NOT EXISTS`` under a transaction-scoped advisory lock, so
that processes starting together create it once); its name is checked, since it is written into the
statements. The URL is never shown: it may hold a password.
"""

from __future__ import annotations

import importlib.util
import re
import threading
import weakref
from typing import Any

from tether.errors import ConfigInvalid, StoreUnavailable

__all__ = ["PostgresResponses"]

_TABLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


class PostgresResponses:
    """The answers in the table ``table`` of the database at ``url`` (see the module docstring)."""

    def __init__(self, url: str, *, table: str, timeout: float) -> None:
        if _TABLE_NAME.fullmatch(table) is None:
            raise ConfigInvalid(
                f"response cache table {table!r} is not valid: use 1 to 63 lowercase letters, digits or '_'"
            )
        if importlib.util.find_spec("psycopg") is None:
            raise ConfigInvalid("a PostgreSQL response cache needs psycopg: pip install 'tether[postgres]'")
        self.url = url
        self.table = table
        self.where = f"postgresql table {table}"
        self.timeout = timeout
        self._lock = threading.Lock()
        self._idle: list[Any] = []
        """Connections not in use, taken by the next statement: as many as ran at once, at most."""
        weakref.finalize(self, _close_all, self._idle)

    def get(self, key: str) -> tuple[float, bytes] | None:
        row = self._run(f"SELECT created, events FROM {self.table} WHERE key = %s", (key,), fetch=True)
        return None if row is None else (float(row[0]), bytes(row[1]))

    def put(self, key: str, model: str, created: float, events: bytes) -> None:
        self._run(
            f"INSERT INTO {self.table} (key, model, created, events) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (key) DO UPDATE SET model = excluded.model, created = excluded.created, "
            "events = excluded.events",
            (key, model, created, events),
        )

    def count(self) -> int:
        row = self._run(f"SELECT COUNT(*) FROM {self.table}", (), fetch=True)
        return int(row[0]) if row is not None else 0

    def clear(self) -> None:
        self._run(f"DELETE FROM {self.table}", ())

    def close(self) -> None:
        """Close the idle connections (one in use closes when its statement is done and it is put back)."""
        _close_all(self._idle)

    def _run(self, statement: str, parameters: tuple[Any, ...], *, fetch: bool = False) -> Any:
        """``statement`` on an idle connection (or a new one), its one row when ``fetch``; a failure ->
        StoreUnavailable, and that connection dropped."""
        import psycopg

        connection = None
        try:
            with self._lock:
                connection = self._idle.pop() if self._idle else None
            if connection is None:
                connection = self._connect()
            cursor = connection.execute(statement, parameters)
            row = cursor.fetchone() if fetch else None
        except psycopg.Error as error:
            if connection is not None:
                connection.close()
            reason = " ".join(str(error).split())
            raise StoreUnavailable(f"the response cache's {self.where} cannot be used: {reason}") from error
        with self._lock:
            self._idle.append(connection)
        return row

    def _connect(self) -> Any:
        import psycopg

        connection = psycopg.connect(
            self.url,
            autocommit=True,
            connect_timeout=max(1, round(self.timeout)),
            fallback_application_name="tether response cache",
        )
        try:
            with connection.transaction():
                connection.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"tether {self.table}",))
                connection.execute(
                    f"CREATE TABLE IF NOT EXISTS {self.table} (key TEXT PRIMARY KEY, model TEXT NOT NULL, "
                    "created DOUBLE PRECISION NOT NULL, events BYTEA NOT NULL)"
                )
        except BaseException:
            connection.close()
            raise
        return connection


def _close_all(idle: list[Any]) -> None:
    """Close every connection of ``idle`` (also when the cache itself is collected: none is left open)."""
    while idle:
        idle.pop().close()
