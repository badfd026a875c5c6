"""Queues that keep their limits: a queue's configuration owned by one act, and a worker's own limit kept by
the worker.

Contract:

* A queue's **configuration** is its global limits: ``concurrency`` (runs of it at once over all workers) and
  ``limit`` (runs started per window). It is one row of the workflow database, written only by
  :func:`configure_queue` (``tether runs queue NAME --concurrency N --rate R/S``), or made by the first process
  that declares the queue when there is no row yet. Enqueuing on a queue, serving it or launching with it never
  changes an existing configuration: a :class:`~tether.durable.records.Queue` that names a global limit other
  than the stored one is refused (``ConfigInvalid``), since running with a limit the queue does not have is a
  misconfiguration; one that names none (``Queue("jobs")``, ``Queue("jobs", worker_concurrency=2)``) takes the
  queue as it is configured.
* A worker's **own limit** (``worker_concurrency``, ``tether worker --concurrency N``) is never stored: each
  serving process keeps its own. The engine's queue thread is not used for tether's queues (it reads the per
  worker limit from the shared row, which the last declaration wrote, and counts a run only once it has
  started on the event loop): :class:`QueuePoller` claims runs itself, counting every run it claimed until the
  store says it ended or moved elsewhere, so that the process never holds more than its limit, not even at
  start-up, whatever other processes declared; a run paused for decisions is not counted (it waits in the
  database, ``dbos_pausing``). The global limits are read from the row at every poll, so a
  change made with :func:`configure_queue` holds without restarting the workers.
"""

from __future__ import annotations

import fcntl
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from dbos import DBOS
from dbos import Queue as DBOSQueue

from tether._logging import get_logger
from tether.durable import dbos_pausing
from tether.durable.dbos_base import _require_launch
from tether.durable.records import Queue, RateLimit
from tether.errors import ConfigInvalid

POLL_INTERVAL = 0.5
"""Seconds between two looks of a worker at each queue it serves: a run waits at most about this long to be taken
by an idle worker. Each look is a few queries (the runs held, the queue's row, the claim); at 0.2 s they were
most of an idle worker's CPU (``bench/idle_worker.py``)."""

_log = get_logger("tether.durable")
_declared: dict[str, DBOSQueue] = {}
"""The queues this process declared since launch, by name."""


def _stored(found: DBOSQueue) -> Queue:
    """The configuration a queue's row holds, as a tether ``Queue`` (no per-worker limit: none is stored)."""
    limiter = found._limiter
    limit = None if limiter is None else RateLimit(int(limiter["limit"]), float(limiter["period"]))
    return Queue(found.name, concurrency=found._concurrency, limit=limit)


def _upsert(queue: Queue, *, update: bool) -> DBOSQueue:
    limiter = None if queue.limit is None else {"limit": queue.limit.runs, "period": queue.limit.seconds}
    return DBOS.register_queue(
        queue.name,
        global_concurrency=queue.concurrency,
        limiter=limiter,  # type: ignore[arg-type]  # a QueueRateLimit TypedDict
        on_conflict="always_update" if update else "never_update",
    )


def _declare(queue: Queue) -> DBOSQueue:
    """``queue`` as the database has it, made with this declaration's limits when it does not exist yet; a
    declaration naming a global limit the stored configuration does not have is refused. Once per process."""
    known = _declared.get(queue.name)
    if known is not None:
        return known
    found = _upsert(queue, update=False)
    stored = _stored(found)
    clash = [
        f"{label} {mine} (configured: {theirs})"
        for label, mine, theirs in (
            ("concurrency", queue.concurrency, stored.concurrency),
            ("limit", queue.limit, stored.limit),
        )
        if mine is not None and mine != theirs
    ]
    if clash:
        raise ConfigInvalid(
            f"queue {queue.name!r} is declared here with {', '.join(clash)}: a queue's global limits are its "
            "stored configuration, changed only with tether.durable.configure_queue() or `tether runs queue "
            f"{queue.name} --concurrency N --rate RUNS/SECONDS`; declare it without them (Queue({queue.name!r}))"
        )
    _declared[queue.name] = found
    return found


async def configure_queue(queue: Queue) -> Queue:
    """Make ``queue``'s global limits (``concurrency``, ``limit``; ``None``: no limit) the queue's
    configuration, made or replaced, for every process; the stored configuration. This is the one act that
    changes a queue's limits (enqueuing and serving never do): workers apply it at their next look at the
    queue. ``worker_concurrency`` is each worker's own and is not stored."""
    import asyncio

    _require_launch()
    if not isinstance(queue, Queue):
        raise ConfigInvalid(f"configure_queue() takes a tether.durable.Queue, not {queue!r}")
    found = await asyncio.to_thread(_upsert, queue, update=True)
    _declared.pop(queue.name, None)
    return _stored(found)


async def queue_configuration(name: str) -> Queue | None:
    """The stored configuration of the queue ``name``; ``None`` when no process declared it yet."""
    import asyncio

    _require_launch()
    found = await asyncio.to_thread(DBOS.retrieve_queue, name)
    return None if found is None else _stored(found)


# --- the worker's side: claiming runs within its own limit ---------------------------------------------------


@dataclass(slots=True)
class _Served:
    queue: Queue
    held: set[str] = field(default_factory=set)
    """Runs claimed here and not yet seen started (on the event loop) nor ended in the store."""


class QueuePoller:
    """Takes runs from the queues a process serves, at most each queue's ``worker_concurrency`` at once in
    this process (see the module docstring); a thread, started by launch and stopped before shutdown."""

    def __init__(self, queues: Sequence[Queue], interval: float = POLL_INTERVAL) -> None:
        self._served = [_Served(queue) for queue in queues]
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tether-queue-poller", daemon=True)
        self._lock_file: BinaryIO | None = None
        """A SQLite database's claim lock (:meth:`_claiming`), opened on first use."""

    def start(self) -> None:
        from dbos._dbos import _get_dbos_instance

        _get_dbos_instance().background_thread_stop_events.append(self._stop)  # DBOS destroyed: it stops too
        self._thread.start()

    def stop(self) -> None:
        """Take no more runs (those under way go on); returns once the poller has stopped."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    def _run(self) -> None:
        from dbos._dbos import _get_dbos_instance

        dbos = _get_dbos_instance()
        while not self._stop.wait(self._interval):
            for served in self._served:
                if self._stop.is_set():
                    return
                try:
                    self._poll(dbos, served)
                except Exception as error:  # noqa: BLE001 - the database busy or going away: try again later
                    if not self._stop.is_set() and not _contended(dbos, error):
                        _log.warning("taking runs from queue %r failed: %s", served.queue.name, error)

    def _poll(self, dbos: Any, served: _Served) -> None:
        from dbos._core import execute_dequeued_workflow
        from dbos._queue import _INTERNAL_QUEUE_CONSTRUCTION
        from dbos._queue import Queue as EngineQueue
        from dbos._shard_keys import shard_key_scope
        from dbos._utils import GlobalParams, generate_uuid

        name = served.queue.name
        held = self._held_here(dbos, served)
        room = served.queue.worker_concurrency
        if room is not None and held >= room:
            return
        stored = dbos._sys_db.get_queue(name)
        if stored is None:  # deleted: nothing to take until it is declared again
            return
        claim = EngineQueue(
            name,
            token=_INTERNAL_QUEUE_CONSTRUCTION,
            worker_concurrency=room,
            global_concurrency=stored._concurrency,
            limiter=stored._limiter,
        )
        shared = stored._concurrency is not None or stored._limiter is not None
        for scope in dbos._sys_db.dequeue_scopes(name):
            with shard_key_scope(scope), self._claiming(dbos, shared):
                owner = generate_uuid()
                taken, _ = dbos._sys_db.start_queued_workflows(
                    claim, GlobalParams.executor_id, GlobalParams.app_version, None, held, owner_xid=owner
                )
            if not taken:
                continue
            served.held.update(taken)
            held += len(taken)
            statuses = {status["workflow_uuid"]: status for status in dbos._sys_db.get_workflow_statuses(taken)}
            for run_id in taken:
                status = statuses.get(run_id)
                try:
                    if status is None:
                        raise LookupError("its status is missing")
                    execute_dequeued_workflow(dbos, status, owner)
                except Exception as error:  # noqa: BLE001 - one run that cannot start does not stop the others
                    served.held.discard(run_id)
                    _log.error("run %r taken from queue %r could not start: %s", run_id, name, error)
            if room is not None and held >= room:
                return

    @contextmanager
    def _claiming(self, dbos: Any, shared: bool) -> Iterator[None]:
        """Hold the claim of a queue with a shared budget (a global concurrency or rate limit) alone among the
        processes of a SQLite file. The engine counts the queue's running runs, then claims, and on SQLite the
        count is read outside the claim's transaction: two workers counting at once both saw room for the last
        place and both took it (a global limit of 3 ran 4). PostgreSQL's claim is one repeatable-read
        transaction, whose conflicts the engine refuses; nothing is held there."""
        engine = dbos._sys_db.engine
        if not shared or engine.dialect.name != "sqlite" or not engine.url.database:
            yield
            return
        if self._lock_file is None:
            self._lock_file = open(f"{engine.url.database}.claims", "a+b")  # noqa: SIM115 - kept while serving
        fcntl.flock(self._lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._lock_file, fcntl.LOCK_UN)

    def _held_here(self, dbos: Any, served: _Served) -> int:
        """How many of the queue's runs this process holds: those running on its event loop, and those it
        claimed that have not started there yet (the store still says they are this process's and pending);
        not those paused, waiting for decisions."""
        from dbos._utils import GlobalParams

        served.held -= _active_on_queue(dbos, served.queue.name)
        if served.held:
            statuses = dbos._sys_db.get_workflow_statuses(list(served.held))
            served.held = {
                status["workflow_uuid"]
                for status in statuses
                if status["status"] == "PENDING" and status["executor_id"] == GlobalParams.executor_id
            }
        # read after the statuses: a run that started meanwhile is in one set or the other, never in neither.
        # A run waiting for its decisions holds no place (``dbos_pausing``): it uses no CPU until they come.
        return len((served.held | _active_on_queue(dbos, served.queue.name)) - dbos_pausing.waiting)


def _active_on_queue(dbos: Any, name: str) -> set[str]:
    """The runs of queue ``name`` executing in this process (the engine's own registry of them)."""
    active = dbos._active_workflows_set
    with active._lock:
        return {
            run_id
            for run_id, buckets in active._m.items()
            if any(bucket is not None and bucket[0] == name for bucket in buckets)
        }


def _contended(dbos: Any, error: Exception) -> bool:
    """Whether ``error`` is another worker claiming from the same queue at the same moment (tried again)."""
    from sqlalchemy.exc import DBAPIError

    if not isinstance(error, DBAPIError):
        return False
    sys_db = dbos._sys_db
    return bool(sys_db.is_lock_conflict(error) or sys_db.is_serialization_conflict(error))
