"""The stores under test: each of memory, files, SQLite and PostgreSQL, on real files and a real SQLite
database in ``tmp_path``, and a real PostgreSQL schema of its own (``tests/postgres.py``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from tests.postgres import PgSchema
from tether.sessions import FileSessionStore, MemorySessionStore, SessionStore, SQLiteSessionStore
from tether.testing.store_conformance import Stores

KINDS = ("memory", "files", "sqlite", "postgres")


def opener(kind: str, root: Path, pg: PgSchema | None) -> Callable[[], SessionStore]:
    """Opens a new store object of ``kind`` on the same storage each call; memory can only give itself again."""
    if kind == "memory":
        memory = MemorySessionStore()
        return lambda: memory
    if kind == "postgres":
        from tether.sessions import PostgresSessionStore

        assert pg is not None
        return lambda: PostgresSessionStore(pg.url, schema=pg.schema)
    if kind == "files":
        return lambda: FileSessionStore(root / "sessions")
    return lambda: SQLiteSessionStore(root / "sessions.sqlite")


@pytest.fixture(params=KINDS)
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], SessionStore]:
    pg = request.getfixturevalue("postgres") if request.param == "postgres" else None
    return opener(request.param, tmp_path, pg)


@pytest.fixture
async def stores(open_store: Callable[[], SessionStore]) -> AsyncIterator[Stores]:
    opened = Stores(open_store)
    yield opened
    await opened.close()


@pytest.fixture
def store(stores: Stores) -> SessionStore:
    return stores.open()
