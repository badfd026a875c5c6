"""``tether._sqlite.switch_to_wal``: the switch to WAL waits for another connection's lock instead of failing."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether._sqlite import switch_to_wal


def hold_a_read(path: Path, held: threading.Event, release: threading.Event) -> None:
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN")
    other.execute("SELECT * FROM t").fetchall()  # a shared lock, as a reader in another process holds
    held.set()
    release.wait(10)
    other.execute("COMMIT")
    other.close()


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[tuple[sqlite3.Connection, threading.Event]]:
    """A connection to a file another connection reads (no busy wait of SQLite's own: a lock fails at once), and
    the event that ends that read."""
    path = tmp_path / "store.db"
    with sqlite3.connect(path) as setup:
        setup.execute("CREATE TABLE t (x)")
    held, release = threading.Event(), threading.Event()
    reader = threading.Thread(target=hold_a_read, args=(path, held, release))
    reader.start()
    held.wait(10)
    connection = sqlite3.connect(path, timeout=0)
    try:
        yield connection, release
    finally:
        release.set()
        reader.join(10)
        connection.close()


def test_a_switch_blocked_by_another_connection_is_tried_again_until_it_is_free(
    locked: tuple[sqlite3.Connection, threading.Event],
) -> None:
    connection, release = locked
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        connection.execute("PRAGMA journal_mode=WAL")
    threading.Timer(0.3, release.set).start()
    assert switch_to_wal(connection, timeout=10) == "wal"


def test_a_lock_held_past_the_deadline_is_raised(locked: tuple[sqlite3.Connection, threading.Event]) -> None:
    connection, _ = locked
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        switch_to_wal(connection, timeout=0.2)
