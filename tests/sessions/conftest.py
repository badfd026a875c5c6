"""The stores under test: every conformance test runs against each of them, on real files and a real SQLite
database in ``tmp_path``, and a real PostgreSQL schema of its own (``tests/postgres.py``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.postgres import PgSchema
from tether.sessions import FileSessionStore, MemorySessionStore, SessionStore, SQLiteSessionStore

KINDS = ("memory", "files", "sqlite", "postgres")


@dataclass
class Stores:
    """A store of one kind, and a way to open the same storage again (as another process would)."""

    kind: str
    root: Path
    pg: PgSchema | None = None
    _opened: list[SessionStore] = field(default_factory=list)

    def open(self) -> SessionStore:
        """A new store object on the same storage; the memory store can only give itself again."""
        store: SessionStore
        if self.kind == "memory":
            if self._opened:
                return self._opened[0]
            store = MemorySessionStore()
        elif self.kind == "postgres":
            from tether.sessions import PostgresSessionStore

            assert self.pg is not None
            store = PostgresSessionStore(self.pg.url, schema=self.pg.schema)
        elif self.kind == "files":
            store = FileSessionStore(self.root / "sessions")
        else:
            store = SQLiteSessionStore(self.root / "sessions.sqlite")
        self._opened.append(store)
        return store

    async def close(self) -> None:
        """Close every store opened so far (the next ``open`` starts afresh, on the same storage)."""
        opened, self._opened = self._opened, []
        for store in opened:
            aclose = getattr(store, "aclose", None)
            if aclose is not None:
                await aclose()


@pytest.fixture(params=KINDS)
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Stores]:
    pg = request.getfixturevalue("postgres") if request.param == "postgres" else None
    opened = Stores(request.param, tmp_path, pg)
    yield opened
    await opened.close()


@pytest.fixture
def store(stores: Stores) -> SessionStore:
    return stores.open()
