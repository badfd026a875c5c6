"""Opening the workflow database in a process, and the queues and workers that take runs from it."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dbos import DBOS, DBOSConfig
from dbos import Queue as DBOSQueue
from dbos._serialization import Serializer

from tether.durable import formats
from tether.durable.records import Queue
from tether.durable.versions import agent_identity, deploy_version
from tether.errors import ConfigInvalid

if TYPE_CHECKING:
    from tether.agent import Agent

from tether.durable.dbos_base import _NAME, _launched, _require_launch

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
    from dbos._utils import GlobalParams

    identities = [agent_identity(name, agent) for name, agent in _agents.items()]
    config: DBOSConfig = {
        "name": app_name,
        "system_database_url": url,
        "log_level": "WARNING",
        "serializer": TetherSerializer(),
        "application_version": deploy_version(identities, app_name=app_name, engine=GlobalParams.dbos_version),
    }
    if worker_id is not None:
        config["executor_id"] = worker_id
    DBOS(config=config)
    DBOS.listen_queues([queue.name for queue in queues])
    DBOS.launch()
    if queues:  # DBOS refuses its blocking calls on a thread running an event loop: register from another
        with ThreadPoolExecutor(1) as thread:
            thread.submit(lambda: [_register(queue) for queue in queues]).result()


def shutdown() -> None:
    """Stop DBOS in this process (runs under way stop where they are; a later launch recovers them)."""
    _registered.clear()
    DBOS.destroy()


# --- queues and workers ---------------------------------------------------------------------------------------

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
        polling_interval_sec=0.2,
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
