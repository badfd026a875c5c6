"""Which processes serving durable runs are alive: a heartbeat table in the workflow database, and the atomic
claim that lets one live process, and only one, recover the runs of a dead one.

Why: the engine recovers the runs of an executor id when a process is launched with it, and puts a dead
executor's runs back on their queues when asked, but it cannot tell a dead process from a live one: a second
process launched with a live one's id, or a recovery asked for a live one, runs its runs twice. So each
worker and batch process keeps one row of ``tether_workers`` (on PostgreSQL in the schema ``dbos``, next to
the engine's tables) fresh while it lives, and that row is the only judge of its liveness.

Contract:

* A row: ``worker_id`` (the engine's executor id), ``kind`` (``worker`` or ``batch``), ``host``, ``pid``,
  ``queues`` (comma-separated), ``started_at``, ``heartbeat_at``, ``state`` (``alive``, ``stopped``,
  ``recovering``, ``recovered``), ``dead_after``, ``recovered_by``. Times are the database's clock (Unix
  seconds), never a machine's own, so machines whose clocks differ agree on who is dead.
* ``dead_after`` is the process's own lease: it beats every ``dead_after / 4`` seconds (at most 5), and a row
  ``alive`` whose heartbeat is older than its ``dead_after`` is dead. A row on this host whose process is gone
  (no such pid, or a zombie) is dead at once, without waiting for its lease.
* :meth:`Heartbeat.claim` takes an id before the engine is launched with it: refused with
  :class:`~tether.errors.WorkerAlive` (``worker_alive``) while the row is alive, so a restart can never take
  over a live sibling's runs.
* :func:`claim_dead` is one conditional statement (``... WHERE state = 'alive' AND heartbeat_at < now -
  dead_after``, or an insert when no row exists): of many live processes asking at once, exactly one wins, and
  only the winner recovers. A claimer that dies mid-recovery leaves ``recovering`` rows that the one who
  claims the claimer takes over.
* Nothing here imports the engine: ``tether runs list`` reads the table with ``sqlite3`` or ``psycopg``.
"""

from __future__ import annotations

import os
import re
import secrets
import socket
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tether.errors import ConfigInvalid, StoreUnavailable, WorkerAlive

DEAD_AFTER = 30.0
"""Seconds without a heartbeat after which a worker is taken for dead, by default."""
MAX_BEAT = 5.0
"""The longest wait between two heartbeats, whatever the lease."""
KEEP_RECOVERED = 7 * 86400.0
"""Seconds a recovered process's row is kept (``tether runs list`` shows it), pruned when a process starts."""
_POSTGRES = ("postgresql://", "postgres://", "postgresql+psycopg://")
_FIELDS = "worker_id, kind, host, pid, queues, started_at, heartbeat_at, state, dead_after, recovered_by"


def unique_id(kind: str) -> str:
    """``<kind>-<host>-<pid>-<6 hex>``: an id no other process has, on this host or another."""
    host = re.sub(r"[^A-Za-z0-9_.-]", "-", socket.gethostname())[:32] or "host"
    return f"{kind}-{host}-{os.getpid()}-{secrets.token_hex(3)}"


def host_name() -> str:
    return socket.gethostname()


def process_gone(pid: int) -> bool:
    """Whether no process ``pid`` runs on this host (a zombie, killed but not yet reaped, counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[:1] == ["Z"]


@dataclass(frozen=True, slots=True)
class WorkerRow:
    """One process's row, with the database's clock when it was read (``now``)."""

    worker_id: str
    kind: str
    host: str
    pid: int
    queues: str
    started_at: float
    heartbeat_at: float
    state: str
    dead_after: float
    recovered_by: str | None
    now: float

    @property
    def age(self) -> float:
        """Seconds since its last heartbeat."""
        return max(0.0, self.now - self.heartbeat_at)

    def gone_here(self) -> bool:
        """Whether it ran on this host and its process is gone."""
        return self.host == host_name() and process_gone(self.pid)

    @property
    def alive(self) -> bool:
        """Alive: ``alive``, a heartbeat within its lease, and not a process known gone on this host."""
        return self.state == "alive" and self.age <= self.dead_after and not self.gone_here()

    def health(self) -> str:
        """``alive``, ``dead`` (lease run out, not yet recovered), or its state (``stopped``, ``recovering``,
        ``recovered``)."""
        if self.state == "alive":
            return "alive" if self.alive else "dead"
        return self.state


class Table:
    """The heartbeat table of one workflow database (``sqlite:///path`` or a PostgreSQL URL); one connection,
    in autocommit, used by one thread at a time."""

    def __init__(self, url: str, *, read_only: bool = False) -> None:
        """``read_only``: never write, nor make a SQLite file that is not there (a reader's table)."""
        self.url = url
        self.read_only = read_only
        self.postgres = url.startswith(_POSTGRES)
        self.name = "dbos.tether_workers" if self.postgres else "tether_workers"
        self.mark = "%s" if self.postgres else "?"
        self.now = "extract(epoch from clock_timestamp())::float8" if self.postgres else _SQLITE_NOW
        self._connection: Any = None
        self._lock = threading.Lock()

    @classmethod
    def of(cls, path: Path | None, url: str | None, *, read_only: bool = False) -> Table:
        """The table of a SQLite file or a database URL, as :class:`~tether.cli.runs_db.RunsDatabase` has them."""
        if url is not None:
            return cls(url, read_only=read_only)
        if path is None:
            raise ConfigInvalid("a workflow database is a SQLite file or a URL")
        return cls(f"sqlite:///{path.resolve()}", read_only=read_only)

    def _connect(self) -> Any:
        if self._connection is None:
            try:
                self._connection = self._open()
            except Exception as error:
                if self.read_only and isinstance(error, sqlite3.OperationalError):
                    raise  # a file that is not there: a reader has nothing to read (rows() says so)
                shown = " ".join(str(error).split())
                raise StoreUnavailable(f"the workflow database cannot be opened for heartbeats: {shown}") from None
        return self._connection

    def _open(self) -> Any:
        if self.postgres:
            import psycopg

            plain = self.url.replace("postgresql+psycopg://", "postgresql://", 1)
            return psycopg.connect(plain, autocommit=True, connect_timeout=10)
        if self.read_only:
            uri = f"{Path(self.url.removeprefix('sqlite:///')).resolve().as_uri()}?mode=ro"
            return sqlite3.connect(uri, uri=True, timeout=30, isolation_level=None)
        path = self.url.removeprefix("sqlite:///")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        return sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)

    def run(self, sql: str, parameters: Sequence[Any] = ()) -> tuple[int, list[tuple[Any, ...]]]:
        """Execute one statement: its row count and the rows it returned."""
        with self._lock:
            cursor = self._connect().execute(sql.replace("?", self.mark), list(parameters))
            rows = list(cursor.fetchall()) if cursor.description is not None else []
            return cursor.rowcount, rows

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def create(self) -> None:
        """Make the table (and on PostgreSQL its schema) if it is not there; concurrent makers are fine."""
        statements = [] if not self.postgres else ["CREATE SCHEMA IF NOT EXISTS dbos"]
        statements.append(
            f"CREATE TABLE IF NOT EXISTS {self.name} (worker_id TEXT PRIMARY KEY, kind TEXT NOT NULL, "
            "host TEXT NOT NULL, pid INTEGER NOT NULL, queues TEXT NOT NULL, started_at DOUBLE PRECISION NOT NULL, "
            "heartbeat_at DOUBLE PRECISION NOT NULL, state TEXT NOT NULL, dead_after DOUBLE PRECISION NOT NULL, "
            "recovered_by TEXT)"
        )
        for statement in statements:
            for attempt in range(3):
                try:
                    self.run(statement)
                    break
                except Exception as error:
                    if attempt == 2 or ("already exists" not in str(error) and "duplicate key" not in str(error)):
                        raise

    def rows(self, worker_ids: Iterable[str] | None = None) -> list[WorkerRow]:
        """The rows (those of ``worker_ids`` when given); none when the table was never made."""
        ids = None if worker_ids is None else sorted(set(worker_ids))
        if ids == []:
            return []
        where = "" if ids is None else f" WHERE worker_id IN ({', '.join('?' * len(ids))})"
        try:
            _, found = self.run(f"SELECT {_FIELDS}, {self.now} FROM {self.name}{where}", ids or ())
        except Exception as error:
            if _no_table(error) or (self.read_only and "unable to open database file" in str(error)):
                self.close()  # a failed statement leaves nothing to roll back in autocommit, but be plain
                return []
            raise
        return [WorkerRow(*row) for row in found]

    def row(self, worker_id: str) -> WorkerRow | None:
        found = self.rows([worker_id])
        return found[0] if found else None


_SQLITE_NOW = "((julianday('now') - 2440587.5) * 86400.0)"


def _no_table(error: Exception) -> bool:
    text = str(error)
    return "no such table" in text or ("tether_workers" in text and "does not exist" in text)


def claim_dead(table: Table, worker_id: str, claimer: str, *, gone_pid: int | None = None) -> bool:
    """Claim the dead ``worker_id`` for ``claimer`` to recover: ``True`` for the one caller that wins. Dead:
    ``alive`` past its lease, ``stopped``, its process ``gone_pid`` known gone (checked by the caller, on its
    host), or no row at all (a process that kept none: an older tether, a plain launch)."""
    stale = f"(state = 'stopped' OR (state = 'alive' AND heartbeat_at < {table.now} - dead_after)"
    parameters: list[Any] = [claimer, worker_id]
    if gone_pid is not None:
        stale += " OR (state = 'alive' AND host = ? AND pid = ?)"
        parameters += [host_name(), gone_pid]
    count, _ = table.run(
        f"UPDATE {table.name} SET state = 'recovering', recovered_by = ? WHERE worker_id = ? AND {stale})",
        parameters,
    )
    if count == 1:
        return True
    if table.row(worker_id) is not None:
        return False
    count, _ = table.run(
        f"INSERT INTO {table.name} ({_FIELDS}) VALUES (?, 'unknown', '', 0, '', {table.now}, {table.now}, "
        "'recovering', 0, ?) ON CONFLICT (worker_id) DO NOTHING",
        [worker_id, claimer],
    )
    return count == 1


def mark_recovered(table: Table, worker_id: str, claimer: str) -> None:
    table.run(
        f"UPDATE {table.name} SET state = 'recovered' WHERE worker_id = ? AND state = 'recovering' "
        "AND recovered_by = ?",
        [worker_id, claimer],
    )


def inherit_claims(table: Table, dead_claimer: str, claimer: str) -> list[str]:
    """The rows ``dead_claimer`` (claimed by ``claimer``) was recovering when it died, now ``claimer``'s."""
    _, rows = table.run(
        f"UPDATE {table.name} SET recovered_by = ? WHERE state = 'recovering' AND recovered_by = ? RETURNING worker_id",
        [claimer, dead_claimer],
    )
    return [row[0] for row in rows]


Recover = Callable[[str], object]
"""Puts the runs of a dead process (its id) back on their queues."""


class Heartbeat:
    """One process's row: claimed before the engine is launched, kept fresh by a thread while it lives, marked
    ``stopped`` at the end. With ``recover``, each beat also looks for dead processes of ``kinds`` (all of
    them, or those ``watch()`` names) and recovers those it wins (:func:`claim_dead`). ``on_lost`` is called
    once if the row was taken from this process (it was judged dead: its runs are being recovered elsewhere)."""

    def __init__(
        self,
        table: Table,
        worker_id: str,
        *,
        kind: str,
        queues: Sequence[str] = (),
        dead_after: float = DEAD_AFTER,
        recover: Recover | None = None,
        kinds: Sequence[str] = ("worker",),
        watch: Callable[[], set[str]] | None = None,
        on_lost: Callable[[], None] | None = None,
        on_recovered: Callable[[str, object], None] | None = None,
    ) -> None:
        if isinstance(dead_after, bool) or not isinstance(dead_after, int | float) or not dead_after > 0:
            raise ConfigInvalid(f"dead_after must be a positive number of seconds, not {dead_after!r}")
        self.table = table
        self.worker_id = worker_id
        self.kind = kind
        self.queues = ",".join(queues)
        self.dead_after = float(dead_after)
        self.interval = min(MAX_BEAT, max(0.05, self.dead_after / 4))
        self._recover = recover
        self._kinds = tuple(kinds)
        self._watch = watch
        self._on_lost = on_lost
        self._on_recovered = on_recovered
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def claim(self) -> None:
        """Take this id (refused with ``WorkerAlive`` while another process holds it alive); before launch."""
        self.table.create()
        t, now = self.table.name, self.table.now
        self.table.run(f"DELETE FROM {t} WHERE state = 'recovered' AND heartbeat_at < {now} - ?", [KEEP_RECOVERED])
        existing = self.table.row(self.worker_id)
        # gone: its process is gone from this host, or it had this process's pid here (a container restarted)
        gone = -1
        if existing is not None and existing.host == host_name():
            gone = existing.pid if existing.pid == os.getpid() or existing.gone_here() else -1
        count, _ = self.table.run(
            f"INSERT INTO {t} ({_FIELDS}) VALUES (?, ?, ?, ?, ?, {now}, {now}, 'alive', ?, NULL) "
            "ON CONFLICT (worker_id) DO UPDATE SET kind = excluded.kind, host = excluded.host, pid = excluded.pid, "
            "queues = excluded.queues, started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at, "
            "state = 'alive', dead_after = excluded.dead_after, recovered_by = NULL "
            f"WHERE {t}.state <> 'alive' OR {t}.heartbeat_at < {now} - {t}.dead_after "
            f"OR ({t}.host = excluded.host AND {t}.pid = ?)",
            [self.worker_id, self.kind, host_name(), os.getpid(), self.queues, self.dead_after, gone],
        )
        if count != 1:
            row = self.table.row(self.worker_id)
            where = "" if row is None else f" (host {row.host}, pid {row.pid}, last heartbeat {row.age:.1f} s ago)"
            raise WorkerAlive(
                f"worker id {self.worker_id!r} is held by a live process{where}: give another --worker-id, or "
                "stop that one first",
                details={"worker_id": self.worker_id},
            )

    def start(self) -> None:
        self._thread = threading.Thread(target=self._beat_loop, name=f"tether-heartbeat-{self.worker_id}", daemon=True)
        self._thread.start()

    def stop(self, state: str = "stopped") -> None:
        """Stop beating and mark the row ``state`` (if it is still this process's)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
        try:
            self.table.run(
                f"UPDATE {self.table.name} SET state = ?, heartbeat_at = {self.table.now} "
                "WHERE worker_id = ? AND state = 'alive' AND pid = ?",
                [state, self.worker_id, os.getpid()],
            )
        finally:
            self.table.close()

    def _beat_loop(self) -> None:
        lost = False
        while not self._stop.wait(self.interval):
            try:
                count, _ = self.table.run(
                    f"UPDATE {self.table.name} SET heartbeat_at = {self.table.now} "
                    "WHERE worker_id = ? AND state = 'alive' AND pid = ?",
                    [self.worker_id, os.getpid()],
                )
                if count == 0 and not lost and self._on_lost is not None:
                    lost = True
                    self._on_lost()
                if self._recover is not None and not lost:
                    self.recover_dead()
            except Exception:  # noqa: BLE001 - the database out of reach for a moment: beat again next time
                self.table.close()

    def recover_dead(self) -> list[str]:
        """Recover every dead process of this heartbeat's kinds (or those it watches) it wins; their ids."""
        assert self._recover is not None
        watched = self._watch() if self._watch is not None else None
        kinds = ", ".join("?" * len(self._kinds))
        _, found = self.table.run(
            f"SELECT worker_id, host, pid, state, heartbeat_at < {self.table.now} - dead_after FROM "
            f"{self.table.name} WHERE kind IN ({kinds}) AND worker_id <> ? AND state IN ('alive', 'stopped')",
            [*self._kinds, self.worker_id],
        )
        won: list[str] = []
        for worker_id, host, pid, state, stale in found:
            if watched is not None and worker_id not in watched:
                continue
            gone = host == host_name() and process_gone(pid)
            if state == "alive" and not stale and not gone:
                continue
            if claim_dead(self.table, worker_id, self.worker_id, gone_pid=pid if gone else None):
                won.append(worker_id)
                won += inherit_claims(self.table, worker_id, self.worker_id)
        for worker_id in won:
            self.recover_one(worker_id)
        return won

    def recover_one(self, worker_id: str) -> object:
        """Recover the runs of ``worker_id``, claimed by this process, and mark it ``recovered``."""
        assert self._recover is not None
        recovered = self._recover(worker_id)
        mark_recovered(self.table, worker_id, self.worker_id)
        if self._on_recovered is not None:
            self._on_recovered(worker_id, recovered)
        return recovered
