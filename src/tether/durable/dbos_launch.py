"""Opening the workflow database in a process, and the queues and workers that take runs from it."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from dbos import DBOS, DBOSConfig
from dbos import Queue as DBOSQueue

from tether._logging import get_logger
from tether.durable.records import Queue
from tether.errors import ConfigInvalid

if TYPE_CHECKING:
    pass

from tether.durable.dbos_base import _NAME, _launched, _require_launch

DEFAULT_DATABASE = "tether-runs.sqlite"
"""The SQLite file :func:`launch` uses when given neither a file nor a URL (in the working directory)."""


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
    ``system_database_url``: any database DBOS takes (``postgresql://user@host:5432/db``). ``queues``: the
    queues this process takes runs from (registered in the database; a process takes no queued run
    otherwise). ``worker_id``: this process's id in the store (default ``local``): a process launched again
    with the id of one that died recovers the runs it had taken."""
    if database is not None and system_database_url is not None:
        raise ConfigInvalid("launch() takes a SQLite file or system_database_url, not both")
    if _launched():
        raise ConfigInvalid("tether.durable.launch() was already called in this process")
    if system_database_url is None:
        path = Path(database if database is not None else DEFAULT_DATABASE)
        path.parent.mkdir(parents=True, exist_ok=True)
        url = sqlite_url(path)
    elif not system_database_url.startswith(("postgresql://", "postgres://", "postgresql+psycopg://", "sqlite:///")):
        raise ConfigInvalid(
            f"system_database_url must be a postgresql:// or sqlite:/// URL, not {system_database_url!r}"
        )
    else:
        url = system_database_url
    if worker_id is not None and not _NAME.fullmatch(worker_id):
        raise ConfigInvalid(f"worker id {worker_id!r} must be 1-64 letters, digits, '_', '.' or '-'")
    config: DBOSConfig = {"name": app_name, "system_database_url": url, "log_level": "WARNING"}
    if worker_id is not None:
        config["executor_id"] = worker_id
    route_engine_logs()
    DBOS(config=config)
    DBOS.listen_queues([queue.name for queue in queues])
    DBOS.launch()
    from tether.durable.metrics import serving

    serving(url, [queue.name for queue in queues])
    if queues:  # DBOS refuses its blocking calls on a thread running an event loop: register from another
        with ThreadPoolExecutor(1) as thread:
            thread.submit(lambda: [_register(queue) for queue in queues]).result()


ENGINE_LOGGER = "tether.durable.engine"
"""The logger DBOS's own records go to (silent unless the host configures logging; ``tether worker -v``)."""


class _ToTether(logging.Handler):
    """Hands each of DBOS's records to :data:`ENGINE_LOGGER`, renamed, so that they follow tether's logging."""

    def emit(self, record: logging.LogRecord) -> None:
        engine = get_logger(ENGINE_LOGGER)
        if engine.isEnabledFor(record.levelno):
            copy = logging.makeLogRecord(record.__dict__)
            copy.name = ENGINE_LOGGER
            engine.handle(copy)


def route_engine_logs() -> None:
    """Send DBOS's log records to :data:`ENGINE_LOGGER` instead of DBOS's own console handler, which writes
    every warning of the engine's on stderr whatever the host wants; idempotent. (DBOS adds its console
    handler only to a logger that has none.)"""
    dbos_logger = logging.getLogger("dbos")
    for handler in list(dbos_logger.handlers):
        if handler.name == "__dbos_console_log_handler__":
            dbos_logger.removeHandler(handler)
    if not any(isinstance(handler, _ToTether) for handler in dbos_logger.handlers):
        dbos_logger.addHandler(_ToTether())
    dbos_logger.propagate = False


def shutdown() -> None:
    """Stop DBOS in this process (runs under way stop where they are; a later launch recovers them)."""
    _registered.clear()
    DBOS.destroy()


# --- queues and workers ---------------------------------------------------------------------------------------

POLL_SECONDS = 0.5
"""How often a worker looks for queued runs on each queue it serves: a run waits at most about this long to be
taken by an idle worker. Each look is two queries (the queue's row, then the claim); at 0.2 s they were most
of an idle worker's CPU (``bench/idle_worker.py``)."""

_registered: dict[str, DBOSQueue] = {}
"""The queues this process registered since launch, by name."""


def _register(queue: Queue) -> DBOSQueue:
    """``queue`` registered in the database (its declaration there updated to this one); once per process."""
    known = _registered.get(queue.name)
    if known is not None:
        return known
    limiter = None if queue.limit is None else {"limit": queue.limit.runs, "period": queue.limit.seconds}
    registered = DBOS.register_queue(
        queue.name,
        global_concurrency=queue.concurrency,
        worker_concurrency=queue.worker_concurrency,
        limiter=limiter,  # type: ignore[arg-type]  # a QueueRateLimit TypedDict
        polling_interval_sec=POLL_SECONDS,
        on_conflict="always_update",
    )
    _registered[queue.name] = registered
    return registered


async def serve(
    queues: Sequence[Queue],
    *,
    database: str | os.PathLike[str] | None = None,
    system_database_url: str | None = None,
    worker_id: str | None = None,
    app_name: str = "tether",
    stop: asyncio.Event | None = None,
    grace: float = 10.0,
) -> None:
    """Be a worker: launch on the database, take runs from ``queues`` until SIGTERM or SIGINT (or ``stop``
    is set), then stop taking runs, give the runs under way ``grace`` seconds to end, and shut down. A run
    still under way then stays where it is and is recovered by the next worker launched with this
    ``worker_id`` (or by :func:`recover_worker`). Make every :class:`DurableAgent` first, as for
    :func:`launch`."""
    if not queues:
        raise ConfigInvalid("serve() needs at least one queue to take runs from")
    stopping = stop if stop is not None else asyncio.Event()
    loop = asyncio.get_running_loop()
    await asyncio.to_thread(
        launch,
        database,
        system_database_url=system_database_url,
        app_name=app_name,
        queues=queues,
        worker_id=worker_id,
    )
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stopping.set)
    try:
        await stopping.wait()
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        await asyncio.to_thread(_shutdown, grace)


def _shutdown(grace: float) -> None:
    _registered.clear()
    DBOS.destroy(workflow_completion_timeout_sec=max(0, round(grace)))


async def recover_worker(worker_id: str) -> list[str]:
    """Put the runs a dead worker had taken back on their queues, for the live workers; their run ids.

    Only for a worker that is gone (killed, its machine lost): a live worker's runs would run twice. Steps
    that had finished are not run again (the at-least-once rule holds)."""
    _require_launch()
    handles = await asyncio.to_thread(DBOS._recover_pending_workflows, [worker_id])
    return [handle.workflow_id for handle in handles]
