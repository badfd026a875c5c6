"""SQLite files in write-ahead-log mode, switched safely while other processes use them.

Why: switching a file to WAL takes an exclusive lock, and when another connection holds the file at that moment
(another process opening it too, a worker writing) SQLite fails the switch at once with "database is locked":
its busy timeout does not cover this lock. Every tether store that keeps a SQLite file (sessions, the response
cache, the durable runs' workflow file) switches through :func:`switch_to_wal`, which tries again until its
deadline. The mode is kept in the file, so a file already in WAL answers at once.
"""

from __future__ import annotations

import sqlite3
import time

RETRY_PAUSE = 0.02
"""Seconds between two tries of a switch another connection blocked."""


def switch_to_wal(connection: sqlite3.Connection, timeout: float) -> str:
    """Put ``connection``'s file in WAL mode, trying again for up to ``timeout`` seconds while another connection
    blocks the switch; the journal mode the file is in afterwards (``wal``, or what a file system without WAL
    support left). Errors other than a lock, and a lock held past the deadline, are raised."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            (mode,) = connection.execute("PRAGMA journal_mode=WAL").fetchone()
            return str(mode).lower()
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(RETRY_PAUSE)
