"""Opening the workflow database in a process, and the queues and workers that take runs from it."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dbos import DBOS, DBOSConfig
from dbos._serialization import Serializer

from tether._logging import adopt, get_logger
from tether._sqlite import switch_to_wal
from tether.durable import formats
from tether.durable.dbos_base import _NAME, _launched, _require_launch
from tether.durable.dbos_queues import QueuePoller, _declare, _declared
from tether.durable.liveness import DEAD_AFTER, Heartbeat, Table, claim_dead, mark_recovered, unique_id
from tether.durable.records import Queue
from tether.durable.versions import agent_identity, deploy_version
from tether.errors import ConfigInvalid, WorkerAlive

if TYPE_CHECKING:
    from tether.agent import Agent


logger = get_logger("tether.durable.liveness")
"""What a worker's heartbeat did: runs of a dead worker recovered, this worker judged dead."""
DEFAULT_DATABASE = "tether-runs.sqlite"
"""The SQLite file :func:`launch` uses when given neither a file nor a URL (in the working directory)."""


class TetherSerializer(Serializer):
    """The engine's serializer: tether's versioned, field-named JSON (:mod:`tether.durable.formats`) for every
    value a run stores; rows the engine wrote before in its own format (``py_pickle``) it still reads itself."""

    def serialize(self, data: Any) -> str:
        return formats.encode(data)

    def deserialize(self, serialized_data: str) -> Any:
        return formats.decode(serialized_data)

    def name(self) -> str:
        return formats.NAME


_agents: dict[str, Agent[Any, Any]] = {}
"""The agent of each :class:`DurableAgent` made in this process, by name: the deploy version is theirs."""


def version() -> str:
    """This process's deploy version (:mod:`tether.durable.versions`): the runs it starts or enqueues have it,
    and it takes and recovers only runs of it. Known once :func:`launch` ran."""
    _require_launch()
    from dbos._utils import GlobalParams

    return GlobalParams.app_version


def sqlite_url(path: str | os.PathLike[str]) -> str:
    """The database URL of a SQLite file (made, with its folder, on launch)."""
    return f"sqlite:///{Path(path).resolve()}"


def launch(
    database: str | os.PathLike[str] | None = None,
    *,
    system_database_url: str | None = None,
    app_name: str = "tether",
    queues: Sequence[Queue] = (),
    worker_id: str | None = None,
) -> None:
    """Open the workflow database and recover this executor's unfinished runs; once per process, after every
    :class:`DurableAgent` is made. ``database``: a SQLite file (default :data:`DEFAULT_DATABASE`);
    ``system_database_url``: any database DBOS takes (``postgresql://user@host:5432/db``); a SQLite file is
    put in write-ahead-log mode, its connections with ``synchronous=NORMAL``. ``queues``: the
    queues this process takes runs from (registered in the database; a process takes no queued run
    otherwise), each at most its ``worker_concurrency`` at once in this process (``dbos_queues``); a queue that
    does not exist yet is made with its declared limits, and one declared with global limits other than its
    stored configuration is refused. ``worker_id``: this process's id in the store (default ``local``): a
    process launched again with the id of one that died recovers the runs it had taken."""
    if _launched():
        raise ConfigInvalid("tether.durable.launch() was already called in this process")
    url = _database_url(database, system_database_url)
    global _url
    _url = url
    if worker_id is not None and not _NAME.fullmatch(worker_id):
        raise ConfigInvalid(f"worker id {worker_id!r} must be 1-64 letters, digits, '_', '.' or '-'")
    from dbos._utils import GlobalParams

    identities = [agent_identity(name, agent) for name, agent in _agents.items()]
    config: DBOSConfig = {
        "name": app_name,
        "system_database_url": url,
        "log_level": "WARNING",
        "serializer": TetherSerializer(),
        "application_version": deploy_version(identities, app_name=app_name, engine=GlobalParams.dbos_version),
    }
    if url.startswith("sqlite:///"):
        _write_ahead(url.removeprefix("sqlite:///").split("?", 1)[0])
        config["db_engine_kwargs"] = {"connect_args": {"factory": _NormalSyncConnection}}
    if worker_id is not None:
        config["executor_id"] = worker_id
    route_engine_logs()
    DBOS(config=config)
    DBOS.listen_queues([])  # the engine's queue thread takes none of tether's queues: the poller does
    DBOS.launch()
    from tether.durable.metrics import serving

    serving(url, [queue.name for queue in queues])
    if queues:  # DBOS refuses its blocking calls on a thread running an event loop: declare from another
        try:
            with ThreadPoolExecutor(1) as thread:
                thread.submit(lambda: [_declare(queue) for queue in queues]).result()
        except BaseException:
            shutdown()
            raise
        global _poller
        _poller = QueuePoller(queues)
        _poller.start()


_poller: QueuePoller | None = None
"""What takes runs from the queues this process serves, while it is launched."""


def _stop_taking() -> None:
    global _poller
    if _poller is not None:
        _poller.stop()
        _poller = None
    _declared.clear()


_url: str | None = None
"""The URL of the workflow database of this process's last launch (its heartbeat table is there too)."""


def _database_url(database: str | os.PathLike[str] | None, system_database_url: str | None) -> str:
    """The URL of the database :func:`launch` opens (a SQLite file's folder made)."""
    if database is not None and system_database_url is not None:
        raise ConfigInvalid("launch() takes a SQLite file or system_database_url, not both")
    if system_database_url is None:
        path = Path(database if database is not None else DEFAULT_DATABASE)
        path.parent.mkdir(parents=True, exist_ok=True)
        return sqlite_url(path)
    if not system_database_url.startswith(("postgresql://", "postgres://", "postgresql+psycopg://", "sqlite:///")):
        raise ConfigInvalid(
            f"system_database_url must be a postgresql:// or sqlite:/// URL, not {system_database_url!r}"
        )
    return system_database_url


def _write_ahead(path: str) -> None:
    """The SQLite file at ``path`` (made if missing) switched to write-ahead logging, before DBOS opens it.

    In the default rollback journal every commit (two a step) rewrites and syncs the journal: a 1,000-prompt
    batch took four times as long. The mode is kept in the file, so it is set once, on one connection, with
    the same patience for a lock as DBOS's own connections (two processes launching on a new file at once)."""
    connection = sqlite3.connect(path, timeout=30)
    try:
        switch_to_wal(connection, timeout=30)
    finally:
        connection.close()


class _NormalSyncConnection(sqlite3.Connection):
    """DBOS's connections to a SQLite file, with ``synchronous=NORMAL`` (a per-connection setting): in WAL
    mode a commit then waits for no sync; the log is synced at each checkpoint, so a power loss can lose the
    last commits but never corrupts the file, and a process killed loses nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.execute("PRAGMA synchronous=NORMAL")


ENGINE_LOGGER = "tether.durable.engine"
"""The logger DBOS's own records go to (silent unless the host configures logging; ``tether worker -v``)."""


def route_engine_logs() -> None:
    """Send DBOS's log records to :data:`ENGINE_LOGGER` instead of DBOS's own console handler, which writes
    every warning of the engine's on stderr whatever the host wants; idempotent. (DBOS adds its console
    handler only to a logger that has none.)"""
    adopt("dbos", ENGINE_LOGGER, drop="__dbos_console_log_handler__")


def shutdown() -> None:
    """Stop DBOS in this process (runs under way stop where they are; a later launch recovers them)."""
    _stop_taking()
    DBOS.destroy()


# --- queues and workers ---------------------------------------------------------------------------------------


async def serve(
    queues: Sequence[Queue],
    *,
    database: str | os.PathLike[str] | None = None,
    system_database_url: str | None = None,
    worker_id: str | None = None,
    app_name: str = "tether",
    stop: asyncio.Event | None = None,
    grace: float = 10.0,
    dead_after: float = DEAD_AFTER,
) -> None:
    """Be a worker: launch on the database, take runs from ``queues`` (each at most its ``worker_concurrency``
    at once here, within the queue's configured limits) until SIGTERM or SIGINT (or ``stop`` is set), then stop
    taking runs, give the runs under way ``grace`` seconds to end, and shut down. Make every
    :class:`DurableAgent` first, as for :func:`launch`.

    Liveness (:mod:`tether.durable.liveness`): ``worker_id`` (default: a unique one) is refused with
    ``WorkerAlive`` while a live process holds it; the worker beats while it lives, and is taken for dead
    ``dead_after`` seconds after its last beat. Each beat it also recovers the runs of dead (or stopped)
    workers, each recovered by one live worker only; a run still under way at shutdown is recovered so."""
    if not queues:
        raise ConfigInvalid("serve() needs at least one queue to take runs from")
    stopping = stop if stop is not None else asyncio.Event()
    loop = asyncio.get_running_loop()
    worker_id = worker_id if worker_id is not None else unique_id("worker")
    if not _NAME.fullmatch(worker_id):  # checked before its heartbeat row is written
        raise ConfigInvalid(f"worker id {worker_id!r} must be 1-64 letters, digits, '_', '.' or '-'")
    beat = _heartbeat(_database_url(database, system_database_url), worker_id, queues, dead_after, loop, stopping)
    await asyncio.to_thread(beat.claim)
    try:
        await asyncio.to_thread(
            launch,
            database,
            system_database_url=system_database_url,
            app_name=app_name,
            queues=queues,
            worker_id=worker_id,
        )
    except BaseException:
        await asyncio.to_thread(beat.stop)
        raise
    beat.start()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    try:
        await stopping.wait()
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        await asyncio.to_thread(_shutdown, grace)
        with ThreadPoolExecutor(1) as thread:  # DBOS, shut down, took the loop's default executor with it
            await loop.run_in_executor(thread, beat.stop)


def _heartbeat(
    url: str,
    worker_id: str,
    queues: Sequence[Queue],
    dead_after: float,
    loop: asyncio.AbstractEventLoop,
    stopping: asyncio.Event,
) -> Heartbeat:
    """A worker's heartbeat: it recovers dead workers' runs; judged dead itself, it stops taking runs."""

    def lost() -> None:
        logger.error("worker %s was judged dead by another (no heartbeat in time): it stops taking runs", worker_id)
        loop.call_soon_threadsafe(stopping.set)

    def recovered(dead: str, runs: object) -> None:
        logger.warning("recovered the runs of the dead worker %s: %s", dead, runs)

    return Heartbeat(
        Table(url),
        worker_id,
        kind="worker",
        queues=[queue.name for queue in queues],
        dead_after=dead_after,
        recover=_recover_pending,
        on_lost=lost,
        on_recovered=recovered,
    )


def _recover_pending(worker_id: str) -> list[str]:
    """Put the pending runs of ``worker_id`` back on their queues (from any thread); their ids."""
    return [handle.workflow_id for handle in DBOS._recover_pending_workflows([worker_id])]


def _shutdown(grace: float) -> None:
    """Take no more runs, give those under way ``grace`` seconds to end, and stop. A run paused for decisions
    is not waited for: it waits in the database, and a live worker takes it up (``dbos_pausing``)."""
    from dbos._dbos import _get_dbos_instance

    from tether.durable import dbos_pausing

    _stop_taking()
    active = _get_dbos_instance()._active_workflows_set
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and set(active.activeList()) - dbos_pausing.waiting:
        time.sleep(0.1)
    DBOS.destroy(workflow_completion_timeout_sec=0)


async def recover_worker(worker_id: str, *, force: bool = False) -> list[str]:
    """Put the runs a dead worker had taken back on their queues, for the live workers; their run ids.

    Refused with ``WorkerAlive`` while the worker is alive (its heartbeat within its lease), or when it keeps
    no heartbeat (nothing tells whether it lives), unless ``force``: a live worker's runs would run twice.
    The worker is claimed first (:func:`tether.durable.liveness.claim_dead`), so that live workers recovering
    dead ones on their own leave it alone. Steps that had finished are not run again (the at-least-once rule
    holds)."""
    _require_launch()
    if not isinstance(worker_id, str) or not worker_id:
        raise ConfigInvalid(f"a worker id is a non-empty string, not {worker_id!r}")
    return await asyncio.to_thread(_recover_claimed, worker_id, force)


def _recover_claimed(worker_id: str, force: bool) -> list[str]:
    from dbos._utils import GlobalParams

    assert _url is not None
    table = Table(_url)
    try:
        row = table.row(worker_id)
        if not force and (row is None or row.alive):
            why = (
                "keeps no heartbeat, so nothing tells whether it is alive"
                if row is None
                else f"is alive (host {row.host}, pid {row.pid}, last heartbeat {row.age:.1f} s ago)"
            )
            raise WorkerAlive(
                f"worker {worker_id!r} {why}: recovering its runs would run them twice; --force (force=True) "
                "when it is certainly gone",
                details={"worker_id": worker_id},
            )
        me = GlobalParams.executor_id
        gone = row.pid if row is not None and row.gone_here() else None
        claimed = claim_dead(table, worker_id, me, gone_pid=gone)
        recovered = _recover_pending(worker_id)
        if claimed:
            mark_recovered(table, worker_id, me)
        return recovered
    finally:
        table.close()
