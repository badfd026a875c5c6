"""Run handles and the store of runs, read and changed from any process launched on the database."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from dbos import DBOS, WorkflowHandleAsync, WorkflowStatus
from dbos._error import DBOSNonExistentWorkflowError

from tether.durable.dbos_base import _awaited, _require_launch, _run_id
from tether.durable.dbos_pausing import published, send_cancel
from tether.durable.dbos_steps import _CANCEL_TOPIC
from tether.durable.liveness import Table
from tether.durable.records import (
    ENGINE_STATUSES,
    RUN_STATUSES,
    UNDER_WAY,
    WORKFLOW_PREFIX,
    Queue,
    RunRecord,
    RunStatus,
    Waiting,
    run_record,
)
from tether.errors import ConfigInvalid, WorkerAlive
from tether.events import RunResult

if TYPE_CHECKING:
    pass


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


# --- the run store --------------------------------------------------------------------------------------------

_STATUSES = ENGINE_STATUSES
_PREFIX = WORKFLOW_PREFIX


def _record(status: WorkflowStatus, waiting: Waiting | None = None) -> RunRecord:
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
        version=status.app_version,
        waiting=waiting,
    )


async def _records(found: Sequence[WorkflowStatus]) -> list[RunRecord]:
    """The records of tether's runs among ``found``, those under way with what they wait on if paused."""
    mine = [one for one in found if one.name.startswith(_PREFIX)]
    under_way = [one.workflow_id for one in mine if one.status in UNDER_WAY]
    waiting = await asyncio.to_thread(published, under_way) if under_way else {}
    return [_record(one, waiting.get(one.workflow_id)) for one in mine]


async def list_runs(status: RunStatus | None = None, *, limit: int = 100) -> list[RunRecord]:
    """The newest ``limit`` durable runs (of every durable agent), newest first; only those in ``status``
    when given."""
    _require_launch()
    if status is not None and status not in RUN_STATUSES:
        raise ConfigInvalid(f"no run status {status!r}: one of {sorted(RUN_STATUSES)}")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ConfigInvalid(f"limit must be a positive integer, not {limit!r}")
    if status in ("completed", "cancelled"):  # a run cancelled while running ended with a cancelled result
        wanted: list[str] | None = ["SUCCESS", "CANCELLED"]
    elif status == "paused":  # a run under way that waits for decisions
        wanted = list(UNDER_WAY)
    else:
        wanted = None if status is None else [name for name, mine in _STATUSES.items() if mine == status]
    records: list[RunRecord] = []
    offset = 0
    while len(records) < limit:
        found = await DBOS.list_workflows_async(status=wanted, limit=limit, offset=offset, sort_desc=True)
        records += [record for record in await _records(found) if status is None or record.status == status]
        if len(found) < limit:
            break
        offset += limit
    return records[:limit]


async def stranded_runs(queues: Sequence[str], *, limit: int = 100) -> list[RunRecord]:
    """The runs queued on ``queues`` (names) whose deploy version is not this process's: no worker of this
    version takes them; a worker of theirs must (docs/durable.md, "Deploys"). Oldest first, at most ``limit``."""
    _require_launch()
    from tether.durable.dbos_launch import version

    mine = version()
    found = await DBOS.list_queued_workflows_async(
        queue_name=list(queues), status=["ENQUEUED"], limit=limit, sort_desc=False
    )
    return [_record(one) for one in found if one.name.startswith(_PREFIX) and one.app_version != mine]


async def taken_versions(queue: str, *, limit: int = 20) -> list[str]:
    """The deploy versions of the ``limit`` runs most recently taken from ``queue`` by its workers, newest
    first, each once: what versions its workers run lately. A run enqueued with none of them may wait for a
    worker of its own version that is not there (docs/durable.md, "Deploys")."""
    _require_launch()
    found = await DBOS.list_workflows_async(
        queue_name=queue,
        status=["PENDING", "SUCCESS", "ERROR"],
        limit=limit,
        sort_desc=True,
        load_input=False,
        load_output=False,
    )
    return list(dict.fromkeys(one.app_version for one in found if one.app_version and one.name.startswith(_PREFIX)))


async def get_run(run_id: str) -> RunRecord | None:
    """The record of the run ``run_id``; ``None`` when there is none."""
    _require_launch()
    _run_id(run_id)
    found = await _records(await DBOS.list_workflows_async(workflow_ids=[run_id]))
    return found[0] if found else None


async def cancel_run(run_id: str) -> RunRecord:
    """Cancel the run ``run_id``. A running run stops before its next model call (the tool calls under way
    end first) and ends as a plain run cancelled by its host: a ``RunResult`` with stop reason ``cancelled``
    and a valid transcript. A paused run rejects the calls it waits on (none runs) and stops likewise. A
    queued run never starts; its ``result()`` raises ``Cancelled``. An ended run is left as it is. Its record
    after."""
    record = await _existing(run_id)
    if record.status == "queued" and not await asyncio.to_thread(_cancel_queued, run_id):
        record = await _existing(run_id)  # a worker took it meanwhile: it is running now
    if record.status in ("running", "paused"):
        await DBOS.send_async(run_id, "cancel", _CANCEL_TOPIC)
        await send_cancel(run_id)  # read by the run when it waits for decisions (now, or at its next pause)
    return await _existing(run_id)


def _cancel_queued(run_id: str) -> bool:
    """Cancel ``run_id`` if it is still queued (one statement: a worker taking it at the same moment either
    took it first, and this does nothing, or finds it cancelled), keeping its queue (the engine's own cancel
    forgets it), so that :func:`resume_run` puts it back there; whether it was cancelled here."""
    import sqlalchemy as sa
    from dbos._dbos import _get_dbos_instance

    sys_db = _get_dbos_instance()._sys_db
    runs = sys_db.tables.workflow_status
    with sys_db.engine.begin() as connection:
        now = sys_db._now_ms_sql()
        done = connection.execute(
            sa.update(runs)
            .where(*sys_db._wf(runs, run_id))
            .where(runs.c.status.in_(["ENQUEUED", "DELAYED"]))
            .values(
                status="CANCELLED",
                owner_xid=None,
                deduplication_id=None,
                started_at_epoch_ms=None,
                updated_at=now,
                completed_at=now,
            )
        )
    return bool(done.rowcount)


async def resume_run(run_id: str, *, queue: str | None = None, force: bool = False) -> DurableRun:
    """Put a run cancelled before it started (or one a dead worker left) back on its queue, with that queue's
    limits, for a worker serving it: it goes on from its last finished step. ``queue``: another queue to put
    it on, or the queue of a run that has none (one started directly, or cancelled by an older tether);
    ``ConfigInvalid`` when there is none to put it on (never the engine's own queue, from which any process,
    a client too, would take it). A run that ended, with any result (a run cancelled while running ended with
    its cancelled result), is left as it is. A run still running is refused with ``WorkerAlive`` unless its
    process is known dead (:mod:`tether.durable.liveness`) or ``force``: a live one would run it twice. Its
    handle."""
    if queue is not None:
        Queue(queue)  # its name checked
    record = await _existing(run_id)
    if record.status in ("completed", "failed") or record.stop_reason is not None:
        return DurableRun(run_id)
    if record.status in ("running", "paused") and not force:
        await asyncio.to_thread(_refuse_if_held, record)
    target = queue if queue is not None else record.queue
    if target is None:
        raise ConfigInvalid(
            f"the run {run_id!r} has no queue to go back on (it was started directly, or cancelled by an older "
            "tether): name the queue of the workers that should run it (resume_run(..., queue=NAME), "
            "tether runs resume ID --queue NAME)"
        )
    await DBOS.resume_workflow_async(run_id, queue_name=target)
    return DurableRun(run_id)


def _refuse_if_held(record: RunRecord) -> None:
    """``WorkerAlive`` unless the process running ``record`` is known dead."""
    from tether.durable import dbos_launch

    assert dbos_launch._url is not None
    table = Table(dbos_launch._url)
    try:
        row = None if record.worker is None else table.row(record.worker)
    finally:
        table.close()
    if row is not None and not row.alive:
        return
    why = (
        f"in the process {record.worker!r}, which keeps no heartbeat, so nothing tells whether it is alive"
        if row is None
        else f"in the live process {row.worker_id!r} (host {row.host}, pid {row.pid}, last heartbeat "
        f"{row.age:.1f} s ago)"
    )
    raise WorkerAlive(
        f"the run {record.run_id!r} is running {why}: resuming it would run it twice; --force (force=True) "
        "when that process is certainly gone",
        details={"run_id": record.run_id, "worker_id": record.worker},
    )


async def _existing(run_id: str) -> RunRecord:
    record = await get_run(run_id)
    if record is None:
        raise ConfigInvalid(f"there is no durable run with id {run_id!r}")
    return record


async def delete_runs(run_ids: Sequence[str]) -> list[str]:
    """Delete the runs ``run_ids`` that ended (completed, failed or cancelled), with everything the store keeps
    of them (inputs, result, steps, and the runs of agents they ran as tools); the ids deleted. A run that is
    queued or running (resumed since it was chosen, say) is never deleted, nor is an id with no run."""
    _require_launch()
    deleted: list[str] = []
    for start in range(0, len(run_ids), _DELETE_BATCH):
        batch = [_run_id(one) for one in run_ids[start : start + _DELETE_BATCH]]
        found = await DBOS.list_workflows_async(workflow_ids=batch)
        ended = [
            record.run_id for record in await _records(found) if record.status not in ("queued", "running", "paused")
        ]
        if ended:
            await DBOS.delete_workflows_async(ended, delete_children=True)
            deleted += ended
    return deleted


_UNDER_WAY = ("queued", "running", "paused")
"""A run in one of these has not ended: it is never deleted."""
_DELETE_BATCH = 500
"""Runs deleted in one statement of :func:`delete_runs`."""
