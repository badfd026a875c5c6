"""Durable runs on DBOS: the one module that knows DBOS (``tether.durable``'s docstring says what is durable).

Contract:

* :class:`DurableAgent` registers one DBOS workflow per agent, named ``tether.run.<name>``; every process that
  may run or recover the agent's runs makes the same ``DurableAgent`` (same agent, same name) before
  :func:`launch`. A run is that workflow; its provider calls and tool calls are DBOS steps (``run_step_async``,
  retries off: the provider's own retry policy and the loop's limits stay in charge), named as the loop names
  them (``tether.loop.steps``).
* :func:`launch` opens the workflow database (a SQLite file by default; ``system_database_url`` for
  PostgreSQL) and recovers the runs this process's executor left unfinished: they go on in the background,
  and :meth:`DurableAgent.result` waits for one.
* ``workflow_id`` is the run id: starting a run with the id of one that exists does not start another; it
  returns the same run and its result.
* Results are kept with DBOS's serializer (pickle): a ``RunResult`` whose ``error`` cannot be pickled is kept
  with ``error=None`` (its ``detail`` still says what happened). The host's ``on_event`` sink lives in the
  process that started the run only; a recovered run has none.
* A run's ``deps`` are never stored: ``DurableAgent(agent, deps=make)`` calls ``make()`` in the process that
  executes the run (the one that started it, a worker, or the one that recovers it) when the run starts there,
  so a database handle or a client is made where it is used and deps of any size cost the workflow nothing.
* Queues: a tether :class:`~tether.durable.records.Queue` becomes a DBOS queue registered (``register_queue``,
  after launch) when a process first enqueues on it or serves it. :func:`launch` listens to the queues it is
  given and to no other; :func:`serve` is launch plus waiting for SIGTERM/SIGINT. A worker's id is its DBOS
  executor id: a launch with the id of a dead worker recovers its runs, :func:`recover_worker` puts them back
  on their queues. Recovered runs keep their queue, so its limits hold.
* The run store (:func:`list_runs`, :func:`get_run`, :func:`cancel_run`, :func:`resume_run`) reads DBOS's
  workflow table into :class:`~tether.durable.records.RunRecord`. Cancelling a running run is a DBOS message
  the run reads before each model call (a recorded operation; an agent it runs as a tool reads it before each of
  its own), so it ends with a cancelled ``RunResult``.
"""

from __future__ import annotations

import asyncio
import os
import pickle
import re
import signal
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from dbos import DBOS, DBOSConfig, SetWorkflowID, WorkflowHandleAsync, WorkflowStatus
from dbos import Queue as DBOSQueue
from dbos._error import DBOSAwaitedWorkflowCancelledError, DBOSNonExistentWorkflowError
from msgspec.structs import replace

from tether.durable.records import ENGINE_STATUSES, WORKFLOW_PREFIX, Queue, RunRecord, RunStatus, run_record
from tether.errors import Cancelled, ConfigInvalid
from tether.events import RunCompleted, RunResult

if TYPE_CHECKING:
    from tether.agent import Agent
    from tether.loop.choice import ToolChoiceOption
    from tether.loop.sinks import EventSink
    from tether.messages import Message

T = TypeVar("T")

DEFAULT_DATABASE = "tether-runs.sqlite"
"""The SQLite file :func:`launch` uses when given neither a file nor a URL (in the working directory)."""
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_sinks: dict[str, EventSink] = {}
"""The host's event sink of each run started in this process, by run id, while it runs."""


_CANCEL_TOPIC = "tether.cancel"
"""The topic of the message :func:`cancel_run` sends a running run."""


class DBOSSteps:
    """The loop's :class:`~tether.loop.steps.StepRunner` inside a DBOS workflow: each step a DBOS step.

    Before each model call it reads (as a recorded workflow operation, so that every execution of the run
    reads the same) whether :func:`cancel_run` asked the run to stop, and then calls ``on_cancel``: the run
    stops as a plain run cancelled by its host does."""

    __slots__ = ("_run_id", "on_cancel")

    def __init__(self, run_id: str) -> None:
        self._run_id = run_id
        self.on_cancel: Callable[[], None] | None = None

    @property
    def run_id(self) -> str:
        return self._run_id

    async def step(self, name: str, function: Callable[[], Awaitable[T]]) -> T:
        async def call() -> T:  # DBOS runs a coroutine function on the loop, anything else in a thread
            return await function()

        # a model call of the run's, or of an agent it runs as a tool (``agent:{tool}:{call}/model:...``)
        cancellable = self.on_cancel is not None and (name.startswith("model:") or "/model:" in name)
        if cancellable and await DBOS.recv_async(_CANCEL_TOPIC, timeout_seconds=0) is not None:
            assert self.on_cancel is not None
            self.on_cancel()

        result: T = await DBOS.run_step_async({"name": name, "retries_allowed": False}, call)
        return result


class DurableAgent:
    """``agent``'s runs as DBOS workflows (see the module docstring); make it before :func:`launch`."""

    def __init__(self, agent: Agent[Any, Any], *, name: str = "agent", deps: Callable[[], Any] | None = None) -> None:
        """``deps``: makes the ``deps`` of each run, in the process that executes it (see the module docstring)."""
        if not _NAME.fullmatch(name):
            raise ConfigInvalid(f"durable agent name {name!r} must be 1-64 letters, digits, '_', '.' or '-'")
        if _launched():
            raise ConfigInvalid(
                f"DurableAgent {name!r} was made after tether.durable.launch(): make every durable agent first, "
                "so that a recovering process knows all of them"
            )
        self.agent = agent
        self.name = name
        if deps is not None and not callable(deps):
            raise ConfigInvalid(f"deps must be a function that makes a run's deps, not a {type(deps).__name__}")
        self._workflow = DBOS.workflow(name=f"tether.run.{name}")(_workflow_of(agent, deps))

    async def start(
        self,
        prompt: str,
        *,
        history: Sequence[Message] = (),
        workflow_id: str | None = None,
        tool_choice: ToolChoiceOption | None = None,
        session: str | None = None,
    ) -> str:
        """Start a run (or find the one with this ``workflow_id``); its run id. It goes on in the background.
        ``session=``: the run continues that session of the agent's store, as in a plain run."""
        handle = await self._start(prompt, history, _run_id(workflow_id), tool_choice, session)
        return handle.workflow_id

    async def _start(
        self,
        prompt: str,
        history: Sequence[Message],
        run_id: str,
        tool_choice: ToolChoiceOption | None,
        session: str | None,
    ) -> WorkflowHandleAsync[RunResult[Any]]:
        _require_launch()
        self._check(history, session)
        with SetWorkflowID(run_id):
            return await DBOS.start_workflow_async(self._workflow, prompt, tuple(history), tool_choice, session)

    async def run(
        self,
        prompt: str,
        *,
        history: Sequence[Message] = (),
        workflow_id: str | None = None,
        on_event: EventSink | None = None,
        tool_choice: ToolChoiceOption | None = None,
        session: str | None = None,
    ) -> RunResult[Any]:
        """Run to the end, durably, and return the result (the kept one, for a run that had already ended)."""
        _require_launch()
        run_id = _run_id(workflow_id)
        if on_event is not None:
            _sinks[run_id] = on_event
        try:  # the handle of a workflow started here is awaited directly: retrieving it would poll the database
            handle = await self._start(prompt, history, run_id, tool_choice, session)
            return await _awaited(handle, run_id)
        finally:
            _sinks.pop(run_id, None)

    async def enqueue(
        self,
        prompt: str,
        *,
        queue: Queue,
        workflow_id: str | None = None,
        history: Sequence[Message] = (),
        session: str | None = None,
    ) -> DurableRun:
        """Put a run on ``queue`` (registered in the database if it is not yet) for a worker serving it; its
        handle. With the ``workflow_id`` of a run that exists, nothing is enqueued: that run's handle.
        ``session=``: the run continues that session of the agent's store (which the worker must reach)."""
        _require_launch()
        if not isinstance(queue, Queue):
            raise ConfigInvalid(f"enqueue() takes a tether.durable.Queue, not {queue!r}")
        self._check(history, session)
        run_id = _run_id(workflow_id)
        dbos_queue = await asyncio.to_thread(_register, queue)
        with SetWorkflowID(run_id):
            handle: WorkflowHandleAsync[RunResult[Any]] = await dbos_queue.enqueue_async(
                self._workflow, prompt, tuple(history), None, session
            )
        return DurableRun(handle.workflow_id)

    def _check(self, history: Sequence[Message], session: str | None) -> None:
        if session is not None:
            from tether.agent import check_session

            check_session(self.agent, history)

    async def result(self, run_id: str) -> RunResult[Any]:
        """Wait for the run ``run_id`` (started here, recovered here or run by another process) and return its
        result."""
        return await DurableRun(run_id).result()


async def _awaited(handle: WorkflowHandleAsync[RunResult[Any]], run_id: str) -> RunResult[Any]:
    """The result a workflow handle gives, its errors told in tether's terms."""
    try:
        result: RunResult[Any] = await handle.get_result()
    except DBOSNonExistentWorkflowError:
        raise ConfigInvalid(f"there is no durable run with id {run_id!r}") from None
    except DBOSAwaitedWorkflowCancelledError:
        raise Cancelled(f"the durable run {run_id!r} was cancelled") from None
    return result


class DurableRun:
    """A handle on one durable run, valid in any process launched on its database."""

    __slots__ = ("run_id",)

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id

    def __repr__(self) -> str:
        return f"DurableRun({self.run_id!r})"

    async def result(self) -> RunResult[Any]:
        """Wait for the run to end and return its result. Raises ``Cancelled`` for a run cancelled with
        :func:`cancel_run`, ``ConfigInvalid`` when there is no run with this id."""
        _require_launch()
        try:
            handle: WorkflowHandleAsync[RunResult[Any]] = await DBOS.retrieve_workflow_async(self.run_id)
        except DBOSNonExistentWorkflowError:
            raise ConfigInvalid(f"there is no durable run with id {self.run_id!r}") from None
        return await _awaited(handle, self.run_id)

    async def status(self) -> RunStatus:
        """Where the run is now (``ConfigInvalid`` when there is no run with this id)."""
        record = await get_run(self.run_id)
        if record is None:
            raise ConfigInvalid(f"there is no durable run with id {self.run_id!r}")
        return record.status


Workflow = Callable[
    [str, tuple["Message", ...], "ToolChoiceOption | None", "str | None"], Coroutine[Any, Any, RunResult[Any]]
]


def _workflow_of(agent: Agent[Any, Any], make_deps: Callable[[], Any] | None) -> Workflow:
    async def tether_run(
        prompt: str, history: tuple[Message, ...], tool_choice: ToolChoiceOption | None, session: str | None
    ) -> RunResult[Any]:
        run_id = DBOS.workflow_id
        assert run_id is not None
        steps = DBOSSteps(run_id)
        sink = _sinks.get(run_id)
        from tether.agent import stream_with_steps

        deps = make_deps() if make_deps is not None else None
        stream = stream_with_steps(
            agent, prompt, steps, history=history, on_event=sink, tool_choice=tool_choice, session=session, deps=deps
        )
        steps.on_cancel = stream.cancel
        result: RunResult[Any] | None = None
        async for event in stream:
            if type(event) is RunCompleted:
                result = event.result
        assert result is not None, "a run always ends with RunCompleted"
        return _portable(result)

    return tether_run


def _portable(result: RunResult[Any]) -> RunResult[Any]:
    """``result`` as it can be kept: without an ``error`` that pickle cannot carry."""
    if result.error is None:
        return result
    try:
        pickle.loads(pickle.dumps(result.error))
    except Exception:  # noqa: BLE001 - any failure to round-trip: the detail stays, the object goes
        return replace(result, error=None)
    return result


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


def _launched() -> bool:
    from dbos import _dbos

    instance: Any = getattr(_dbos, "_dbos_global_instance", None)
    return instance is not None and bool(getattr(instance, "_launched", False))


def _require_launch() -> None:
    if not _launched():
        raise ConfigInvalid("durable runs need tether.durable.launch(...) first (it opens the workflow database)")


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


# --- the run store --------------------------------------------------------------------------------------------

_STATUSES = ENGINE_STATUSES
_PREFIX = WORKFLOW_PREFIX


def _record(status: WorkflowStatus) -> RunRecord:
    return run_record(
        run_id=status.workflow_id,
        engine_status=status.status,
        workflow_name=status.name,
        queue=status.queue_name,
        created_ms=status.created_at,
        updated_ms=status.updated_at,
        inputs=status.input,
        output=status.output,
        worker=status.executor_id,
    )


async def list_runs(status: RunStatus | None = None, *, limit: int = 100) -> list[RunRecord]:
    """The newest ``limit`` durable runs (of every durable agent), newest first; only those in ``status``
    when given."""
    _require_launch()
    if status is not None and status not in _STATUSES.values():
        raise ConfigInvalid(f"no run status {status!r}: one of {sorted(set(_STATUSES.values()))}")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ConfigInvalid(f"limit must be a positive integer, not {limit!r}")
    if status in ("completed", "cancelled"):  # a run cancelled while running ended with a cancelled result
        wanted: list[str] | None = ["SUCCESS", "CANCELLED"]
    else:
        wanted = None if status is None else [name for name, mine in _STATUSES.items() if mine == status]
    records: list[RunRecord] = []
    offset = 0
    while len(records) < limit:
        found = await DBOS.list_workflows_async(status=wanted, limit=limit, offset=offset, sort_desc=True)
        mine = (_record(one) for one in found if one.name.startswith(_PREFIX))
        records += [record for record in mine if status is None or record.status == status]
        if len(found) < limit:
            break
        offset += limit
    return records[:limit]


async def get_run(run_id: str) -> RunRecord | None:
    """The record of the run ``run_id``; ``None`` when there is none."""
    _require_launch()
    _run_id(run_id)
    found = await DBOS.list_workflows_async(workflow_ids=[run_id])
    mine = [one for one in found if one.name.startswith(_PREFIX)]
    return _record(mine[0]) if mine else None


async def cancel_run(run_id: str) -> RunRecord:
    """Cancel the run ``run_id``. A running run stops before its next model call (the tool calls under way
    end first) and ends as a plain run cancelled by its host: a ``RunResult`` with stop reason ``cancelled``
    and a valid transcript. A queued run never starts; its ``result()`` raises ``Cancelled``. An ended run
    is left as it is. Its record after."""
    record = await _existing(run_id)
    if record.status == "running":
        await DBOS.send_async(run_id, "cancel", _CANCEL_TOPIC)
    elif record.status == "queued":
        await DBOS.cancel_workflow_async(run_id)
    return await _existing(run_id)


async def resume_run(run_id: str) -> DurableRun:
    """Put a run cancelled before it started (or one a dead worker left) back on its queue: it goes on from
    its last finished step. A run that ended, with any result (a run cancelled while running ended with its
    cancelled result), is left as it is. Its handle."""
    record = await _existing(run_id)
    if record.status in ("completed", "failed") or record.stop_reason is not None:
        return DurableRun(run_id)
    await DBOS.resume_workflow_async(run_id, queue_name=record.queue)
    return DurableRun(run_id)


_RUN_ID = re.compile(r"[^\s\x00-\x1f\x7f](?:[^\x00-\x1f\x7f]{0,254}[^\s\x00-\x1f\x7f])?")
"""A run id: 1-256 characters, no control character, no white space at either end."""


def _run_id(workflow_id: str | None) -> str:
    """``workflow_id`` checked (``ConfigInvalid`` for what the workflow store would refuse with its own error), or
    a new id when none is given."""
    if workflow_id is None:
        return uuid.uuid4().hex
    if not isinstance(workflow_id, str) or not _RUN_ID.fullmatch(workflow_id):
        raise ConfigInvalid(
            f"a run id must be 1-256 characters with no control character and no space at either end, not "
            f"{workflow_id!r}"
        )
    return workflow_id


async def _existing(run_id: str) -> RunRecord:
    record = await get_run(run_id)
    if record is None:
        raise ConfigInvalid(f"there is no durable run with id {run_id!r}")
    return record
