"""A durable run that pauses: it waits in the database for its decisions, holding no worker slot and no CPU.

Contract:

* When the loop ends a durable run ``paused`` (a call needs a person's approval, or its result comes from
  outside), the workflow does not end. :func:`decisions_for` publishes what it waits on, a
  :class:`~tether.durable.records.Waiting`, as the workflow's event ``tether.pending`` (read by
  :func:`~tether.durable.get_run`, ``tether runs pending`` and :mod:`tether.durable.store` without the engine),
  then waits with the engine's message wait (``DBOS.recv``, topic ``tether.decisions``): a row of the
  workflow database, woken by the engine's own listener; no loop of its own, no thread. Decisions that come in
  parts accumulate (the event says which calls have one) until every pending call has one; the event is then
  cleared and the workflow resumes the run with them (``Agent.resume``'s machinery, its steps durable steps).
  A resumed run may pause again, and waits again.
* The approval timeout (``DurableAgent(approval_timeout=)``, else the agent's ``Limits.approval_timeout``) is
  the wait's: its end is kept as a step, so a run recovered later waits only what is left; when it passes, every
  call still undecided is rejected (an external call answered with an error) with a reason the model reads,
  and the run goes on to the model's answer. Without one, the run waits until it is decided or cancelled.
* A waiting run holds no place in its worker's ``worker_concurrency`` (:data:`waiting` is what the worker's
  poller leaves out of its count): a worker with a limit of 8 takes more runs while 50 wait. (A queue's global
  ``concurrency`` counts them: the engine counts every run under way.) After the worker dies, the run is
  recovered like any other: its kept steps and its kept messages are read back, not made again, so each
  approved tool runs once, and it waits again where it was.
* A run whose worker died is put back on its queue with its pause still published: it reads ``paused`` and
  takes decisions there too (they are kept, and read when a worker takes it up and it waits again).
* :func:`decide` (``DurableAgent.decide``, ``tether runs approve``/``deny``) checks the decisions against what
  the run publishes before sending anything: an unknown run, a run that is not paused, an unknown call id, a
  call decided already, a decision of the wrong kind or a digest that is not the call's raise
  ``DecisionInvalid`` and nothing is sent. A decision that a race made stale (sent for a call decided
  meanwhile) is ignored by the run: the first decision of a call is the one it keeps.
* :func:`~tether.durable.cancel_run` of a paused run sends it a cancel: it rejects every call it waits on
  (none runs) and stops before its next model call, with stop reason ``cancelled``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from dbos import DBOS

from tether.durable.dbos_base import _require_launch, _run_id
from tether.durable.records import DECISIONS_TOPIC, PENDING_EVENT, UNDER_WAY, DecisionMessage, Waiting
from tether.errors import DecisionInvalid
from tether.loop.pausing import NO_ONE_IN_TIME
from tether.paused import Approve, ExternalResult, PendingCall, Reject

if TYPE_CHECKING:
    from tether.paused import Decision, PausedRun

waiting: set[str] = set()
"""The runs of this process waiting for their decisions: they hold no worker slot (``dbos_queues``)."""

FOREVER = 24 * 3600.0
"""One wait's length when a run has no approval timeout: it waits again after each, as long as it takes."""

CANCELLED = "the run was cancelled before this call was decided"
"""The reason each call of a paused run that was cancelled is rejected with."""


async def decisions_for(run_id: str, state: PausedRun, timeout: float | None) -> dict[str, Decision]:
    """Wait, inside the run's workflow, for a decision on each of ``state``'s pending calls (see the module
    docstring); they are returned by call id, the calls undecided at the timeout rejected."""
    deadline = None
    if timeout is not None:

        async def until() -> float:
            return time.time() + timeout

        deadline = await DBOS.run_step_async({"name": "pause:deadline", "retries_allowed": False}, until)
    pending = {call.id: call for call in state.pending}
    decided: dict[str, Decision] = {}
    await DBOS.set_event_async(PENDING_EVENT, Waiting(state.pending, (), deadline))
    waiting.add(run_id)
    try:
        while len(decided) < len(pending):
            left = FOREVER if deadline is None else max(0.0, deadline - time.time())
            message = await DBOS.recv_async(DECISIONS_TOPIC, timeout_seconds=left)
            if isinstance(message, DecisionMessage) and message.cancel:
                return {call_id: Reject(CANCELLED) for call_id in pending}
            if isinstance(message, DecisionMessage):
                taken = {i: d for i, d in message.decisions.items() if i in pending and i not in decided}
                decided.update((i, d) for i, d in taken.items() if not _refused(pending[i], d))
                if len(decided) < len(pending):
                    await DBOS.set_event_async(PENDING_EVENT, Waiting(state.pending, tuple(decided), deadline))
            elif deadline is not None and await _passed(deadline):
                decided.update((i, Reject(NO_ONE_IN_TIME)) for i in pending if i not in decided)
    finally:
        waiting.discard(run_id)
    return decided


async def _passed(deadline: float) -> bool:
    """Whether ``deadline`` passed, kept as a step: an execution of the run again takes the same turn of its wait
    (read from the clock again, a replay long after would end the wait one message early)."""

    async def now_past() -> bool:
        return time.time() >= deadline

    passed: bool = await DBOS.run_step_async({"name": "pause:timed-out", "retries_allowed": False}, now_past)
    return passed


async def cleared() -> None:
    """The run's event says it waits on nothing: called once its decisions are in, before it goes on."""
    await DBOS.set_event_async(PENDING_EVENT, None)


def _refused(call: PendingCall, decision: object) -> str | None:
    """Why ``decision`` cannot settle ``call`` (``None`` when it can)."""
    if not isinstance(decision, Approve | Reject | ExternalResult):
        return f"{type(decision).__name__} is not a decision (Approve, Reject or ExternalResult)"
    if isinstance(decision, Approve) and call.kind == "external":
        return "an external call is settled with ExternalResult or Reject, not Approve"
    if isinstance(decision, ExternalResult) and call.kind == "approval":
        return "a call that needs approval is settled with Approve or Reject, not ExternalResult"
    digest = getattr(decision, "digest", None)
    if digest is not None and digest != call.digest:
        return "its digest is not the digest of the call's arguments"
    return None


async def decide(run_id: str, decisions: Mapping[str, Decision]) -> Waiting:
    """Send the paused run ``run_id`` decisions on some or all of its pending calls, after checking them (see
    the module docstring: ``DecisionInvalid``, nothing sent); what the run waited on before them."""
    _require_launch()
    run_id = _run_id(run_id)
    if not isinstance(decisions, Mapping) or not decisions:
        raise DecisionInvalid("decide() takes a mapping of call ids to decisions, with at least one")
    status = await DBOS.get_workflow_status_async(run_id)
    if status is None:
        raise DecisionInvalid(f"there is no durable run with id {run_id!r}", details={"run_id": run_id})
    found = (await asyncio.to_thread(published, [run_id])).get(run_id) if status.status in UNDER_WAY else None
    if found is None:
        raise DecisionInvalid(
            f"the durable run {run_id!r} is not paused (it waits on no call)", details={"run_id": run_id}
        )
    calls = {call.id: call for call in found.pending}
    problems: dict[str, str] = {}
    for call_id, decision in decisions.items():
        if call_id not in calls:
            problems[str(call_id)] = "no pending call of the run has this id"
        elif call_id in found.decided:
            problems[call_id] = "it has a decision already"
        else:
            why = _refused(calls[call_id], decision)
            if why is not None:
                problems[call_id] = why
    if problems:
        said = "; ".join(f"{call_id}: {why}" for call_id, why in problems.items())
        raise DecisionInvalid(
            f"the decisions for the run {run_id!r} were refused, none sent: {said}",
            details={"run_id": run_id, "calls": sorted(problems), "problems": problems},
        )
    await DBOS.send_async(run_id, DecisionMessage(dict(decisions)), DECISIONS_TOPIC)
    return found


async def send_cancel(run_id: str) -> None:
    """Wake the paused run ``run_id`` with a cancel (``cancel_run``): it rejects its calls and stops."""
    await DBOS.send_async(run_id, DecisionMessage(cancel=True), DECISIONS_TOPIC)


def published(run_ids: Iterable[str]) -> dict[str, Waiting]:
    """What each run among ``run_ids`` that is paused waits on, by run id (one query of the events' table)."""
    import sqlalchemy as sa
    from dbos._dbos import _get_dbos_instance
    from dbos._serialization import deserialize_value

    ids = list(run_ids)
    if not ids:
        return {}
    system = _get_dbos_instance()._sys_db
    events = system.tables.workflow_events
    statement = sa.select(events.c.workflow_uuid, events.c.value, events.c.serialization).where(
        events.c.workflow_uuid.in_(ids), events.c.key == PENDING_EVENT
    )
    with system.engine.connect() as connection:
        rows = connection.execute(statement).fetchall()
    found: dict[str, Waiting] = {}
    for run_id, value, serialization in rows:
        try:
            read: Any = deserialize_value(value, serialization, system.serializer)
        except Exception:  # noqa: BLE001 - a value of a newer format: the run is listed without it
            continue
        if isinstance(read, Waiting):
            found[str(run_id)] = read
    return found


async def waiting_on(run_id: str) -> Waiting | None:
    """What the run ``run_id`` waits on, when it is paused; ``None`` otherwise."""
    _require_launch()
    status = await DBOS.get_workflow_status_async(run_id)
    if status is None or status.status not in UNDER_WAY:
        return None
    return (await asyncio.to_thread(published, [run_id])).get(run_id)
