"""The loop's step seam inside a DBOS workflow: each provider call and tool call a DBOS step.

A run cancelled with :func:`~tether.durable.cancel_run` stops before its next model call. The check costs the
model call's step nothing it would not pay anyway: inside that step, before calling the model, a plain read of
the database (no recorded operation, no write) looks for the cancel message; when there is one the step keeps
:data:`CANCELLED_MARK` as its output instead of the model's answer, so that every later execution of the run
(recovery, resume) takes the same decision from the kept output without reading again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from dbos import DBOS

from tether.limits import StopReason
from tether.loop.interrupts import Interrupt, Interrupted

if TYPE_CHECKING:
    from dbos._core import StepOptions

    from tether.durable.metrics import RunMetrics

T = TypeVar("T")


_CANCEL_TOPIC = "tether.cancel"
"""The topic of the message :func:`cancel_run` sends a running run (a row of DBOS's notifications table)."""

CANCELLED_MARK = "tether.cancelled-before-the-call"
"""What a model call's step keeps, in place of the model's answer, when the run was cancelled before it: a plain
string, so that it reads the same in any stored format."""

_CANCELLED = Interrupt(StopReason.CANCELLED, "cancelled by the host")
"""The interrupt a cancelled durable run ends with: the one a plain run's ``cancel()`` makes."""


class DBOSSteps:
    """The loop's :class:`~tether.loop.steps.StepRunner` inside a DBOS workflow: each step a DBOS step.

    Each model call's step first reads (a plain query: see the module docstring) whether :func:`cancel_run`
    asked the run to stop; if so it keeps :data:`CANCELLED_MARK`, does not call the model, and ``on_cancel``
    is called: the run stops as a plain run cancelled by its host does."""

    __slots__ = ("_live", "_replayed", "_run_id", "metrics", "on_cancel", "resumed")

    def __init__(self, run_id: str) -> None:
        self._run_id = run_id
        self.on_cancel: Callable[[], None] | None = None
        self.metrics: RunMetrics | None = None
        """The run's metrics (``tether.durable.metrics``) when a meter is configured: each step measured."""
        self._replayed = self._live = False
        self.resumed: str | None = None
        """The step this execution ran first after replaying kept ones: where an earlier one stopped
        (``tether.loop.steps``); ``None`` for a first execution, or until then."""

    @property
    def run_id(self) -> str:
        return self._run_id

    async def step(self, name: str, function: Callable[[], Awaitable[T]]) -> T:
        # a model call of the run's, or of an agent it runs as a tool (``agent:{tool}:{call}/model:...``)
        if self.on_cancel is None or not (name.startswith("model:") or "/model:" in name):

            async def call() -> T:  # DBOS runs a coroutine function on the loop, anything else in a thread
                return await function()

            result: T = await self._run(name, call)
            return result
        run_id = self._run_id

        async def checked() -> T | str:
            if await asyncio.to_thread(cancel_requested, run_id):
                return CANCELLED_MARK
            return await function()

        kept = await self._run(name, checked)
        if type(kept) is not str or kept != CANCELLED_MARK:
            return kept  # type: ignore[no-any-return]  # the model's answer: a step's output is never a str
        self.on_cancel()
        # the run's interrupter, armed around this step, cancelled this task: the cancel lands here, as it did
        # on the model call before the check was folded in. An agent run as a tool whose task it did not reach
        # stops all the same: its call is not made.
        await asyncio.sleep(0)
        raise Interrupted(_CANCELLED)

    async def _run(self, name: str, work: Callable[[], Awaitable[Any]]) -> Any:
        """``work`` as the engine's step ``name`` (retries off: the provider's policy and the loop's limits rule),
        measured when a meter is configured; notes the first step this execution runs after replaying kept ones
        (:attr:`resumed`)."""
        ran = False

        async def tracked() -> Any:
            nonlocal ran
            ran = True
            if not self._live:
                self._live = True
                if self._replayed:
                    self.resumed = name
            return await work()

        options: StepOptions = {"name": name, "retries_allowed": False}
        try:
            if self.metrics is not None:
                return await self.metrics.step(name, tracked, lambda measured: DBOS.run_step_async(options, measured))
            return await DBOS.run_step_async(options, tracked)
        finally:
            self._replayed = self._replayed or not ran

    async def sleep(self, seconds: float) -> None:
        """A durable sleep (``DBOS.sleep_async``): its end is kept, so that an execution of the run after a
        crash waits only what is left of it. The provider's retry waits are these (``tether.loop.steps``)."""
        await DBOS.sleep_async(seconds)


_statements: dict[int, tuple[Any, Any]] = {}
"""The cancel read built once per system database (by ``id``): its engine and its statement."""


def cancel_requested(run_id: str) -> bool:
    """Whether :func:`cancel_run` asked the run ``run_id`` to stop: one indexed read of DBOS's notifications table,
    in the workflow database, outside any recorded operation (the message is never consumed)."""
    from dbos._dbos import _get_dbos_instance

    system = _get_dbos_instance()._sys_db
    built = _statements.get(id(system))
    if built is None or built[0] is not system.engine:
        table = system.tables.notifications
        statement = (
            sa.select(sa.literal(1))
            .select_from(table)
            .where(
                *system._wf(table, sa.bindparam("run_id"), "destination_uuid"),
                table.c.topic == _CANCEL_TOPIC,
                table.c.consumed == sa.false(),
            )
            .limit(1)
        )
        built = _statements[id(system)] = (system.engine, statement)
    engine, statement = built
    with engine.connect() as connection:
        return connection.execute(statement, {"run_id": run_id}).first() is not None
