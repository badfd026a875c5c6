"""Nesting: a run's side of the agents it runs as tools (``agent.as_tool()``, ``tether.team``).

A run whose tools include one that runs an agent (``Tool.nests``) makes one :class:`Nesting`, reached by those
tools through their run context (``RunProgress.nesting``). The contract:

* **Events.** While a group of tool calls runs, the events of the agents they run are relayed into the run's
  own stream and sinks as :class:`~tether.events.SubAgentEvent`s, in the order they happen, between the
  group's ``ToolCallStarted`` and ``ToolResultReceived`` events. For that, the group is settled in a task of its
  own (:meth:`Nesting.next`) while the run's task hands the relayed events to its host; the run's interrupter
  is bound to that task meanwhile, so that a cancel or a deadline cancels the calls, never the host's code, as
  for any other run (``interrupts.py``). A run without such a tool makes none of this: its executor settles
  its calls directly, as before.
* **Budget.** What a nested run may spend is what this run has left when it starts: the rest of
  ``max_cost_usd``, of ``max_tool_calls`` and of the run's deadline (:meth:`cost_left`, :meth:`calls_left`,
  :meth:`seconds_left`). What it used is added to this run when it ends (:meth:`ended`): its usage and cost
  to the run's (the guard's budget check sees them), its tool calls to the run's count, its records to the
  call's ``ToolCallRecord.turn_records``.
* **Stops.** A nested run that stops this run (its budget spent, or cancelled) asks it to stop now
  (:meth:`stop`), with the same reason.
* **Steps.** In a durable run the nested run's provider and tool calls are steps of this run's runner, their
  names prefixed with the call's (:class:`NestedSteps`); the call itself is not a step (``executor.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from tether.loop.executor import ToolBatch, ToolExecutor, _Plan
from tether.loop.interrupts import Interrupt, Interrupter

if TYPE_CHECKING:
    from tether.events import SubAgentEvent, TurnRecord
    from tether.loop.guard import LoopGuard
    from tether.loop.offer import Offer
    from tether.loop.records import CallRecorder
    from tether.loop.steps import StepRunner
    from tether.usage import Cost, Usage

T = TypeVar("T")

__all__ = ["NestedSteps", "Nesting", "NestingExecutor"]


class Nesting:
    """One run's side of the agents it runs as tools (see the module docstring)."""

    __slots__ = ("_events", "_task", "_wake", "guard", "interrupter", "offer", "recorder", "steps")

    def __init__(
        self,
        guard: LoopGuard,
        interrupter: Interrupter,
        offer: Offer,
        recorder: CallRecorder,
        steps: StepRunner | None,
    ) -> None:
        self.guard = guard
        self.interrupter = interrupter
        self.offer = offer
        self.recorder = recorder
        self.steps = steps
        """The run's step runner in a durable run, which nested runs make their steps with; else ``None``."""
        self._events: deque[SubAgentEvent] = deque()
        self._task: asyncio.Task[None] | None = None
        """The task settling the group of calls under way, while its events are relayed."""
        self._wake: asyncio.Event | None = None

    # --- what a nested run may use, and what it used -------------------------------------------------------

    def cost_left(self) -> float | None:
        """Dollars of ``max_cost_usd`` the run has left; ``None`` when it has no budget (or no known price)."""
        limit, cost = self.guard.limits.max_cost_usd, self.guard.cost
        return None if limit is None or cost is None else limit - cost.total_usd

    def calls_left(self) -> int | None:
        """Tool calls of ``max_tool_calls`` the run has left (the call under way counted); ``None``: no limit."""
        limit = self.guard.limits.max_tool_calls
        return None if limit is None else max(limit - self.guard.tool_calls, 0)

    def seconds_left(self) -> float | None:
        """Seconds until the run's deadline (``run_timeout``); ``None`` when it has none."""
        deadline = self.offer.deadline
        return None if deadline is None else deadline - self.interrupter.alarm.time()

    def ended(
        self, call_id: str, usage: Usage, cost: Cost | None, tool_calls: int, records: tuple[TurnRecord, ...]
    ) -> None:
        """A nested run the call ``call_id`` made has ended: what it used is the run's (see the module
        docstring)."""
        self.guard.record_nested(usage, cost, tool_calls)
        nested = self.recorder.nested
        if nested is None:
            nested = self.recorder.nested = {}
        nested[call_id] = records

    def stop(self, interrupt: Interrupt) -> None:
        """Stop the run now, as ``interrupt`` says (a nested run spent the budget, or was cancelled)."""
        self.interrupter.request(interrupt)

    # --- events --------------------------------------------------------------------------------------------

    def relay(self, event: SubAgentEvent) -> None:
        """Hand ``event`` to the run's host (it is yielded by the run's task as soon as it can)."""
        self._events.append(event)
        if self._wake is not None:
            self._wake.set()

    async def next(self, executor: ToolExecutor, batch: ToolBatch, group: list[_Plan]) -> SubAgentEvent | None:
        """The next event relayed while ``group`` is settled (the first call starts it, in a task of its own);
        ``None`` once it is, and its calls all have their results. Raises what settling raised (``Interrupted``),
        and a cancellation of the run's task cancels the settling and waits for it."""
        task = self._task
        if task is None:
            self._wake = asyncio.Event()
            self._task = task = asyncio.get_running_loop().create_task(self._settle(executor, batch, group))
            task.add_done_callback(self._woken)
        events, wake = self._events, self._wake
        assert wake is not None
        while not events and not task.done():
            wake.clear()
            try:
                await wake.wait()
            except asyncio.CancelledError:
                await self.close()
                raise
        if events:
            return events.popleft()
        self._task = self._wake = None
        task.result()  # what settling raised, raised here
        return None

    async def _settle(self, executor: ToolExecutor, batch: ToolBatch, group: list[_Plan]) -> None:
        interrupter = self.interrupter
        bound = interrupter.bind_here()
        try:
            await ToolExecutor.settle(executor, batch, group)
        finally:
            interrupter.restore(bound)

    def _woken(self, task: asyncio.Task[None]) -> None:
        if self._wake is not None:
            self._wake.set()

    async def close(self) -> None:
        """Cancel the settling under way, if any, and wait for it to end (the run stops)."""
        task, self._task, self._wake = self._task, None, None
        self._events.clear()
        if task is None or task.done():
            return
        task.cancel()
        with contextlib.suppress(BaseException):  # cancelled, interrupted or failed: the run is stopping anyway
            await task


class NestingExecutor(ToolExecutor):
    """The executor of a run that runs agents as tools: :meth:`settle` hands on their events as it settles."""

    __slots__ = ("nesting",)

    nesting: Nesting

    async def settle(self, batch: ToolBatch, group: list[_Plan]) -> SubAgentEvent | None:
        """The next event relayed while ``group`` is settled; ``None`` once it is (``Nesting.next``)."""
        return await self.nesting.next(self, batch, group)


class NestedSteps:
    """The step runner of a run nested in a durable run: each step one of the outer run's, its name prefixed
    with the call that runs the nested run (stable on every execution: the call's id is in a kept step)."""

    __slots__ = ("_outer", "_prefix", "_run_id")

    def __init__(self, outer: StepRunner, tool: str, call_id: str) -> None:
        self._outer = outer
        self._prefix = f"agent:{tool}:{call_id}/"
        self._run_id = f"{outer.run_id}/{call_id}"

    @property
    def run_id(self) -> str:
        return self._run_id

    async def step(self, name: str, function: Callable[[], Awaitable[T]]) -> T:
        return await self._outer.step(self._prefix + name, function)

    async def sleep(self, seconds: float) -> None:
        """The outer run's durable sleep (``steps.py``), or a plain one when its runner has none."""
        sleeping = getattr(self._outer, "sleep", None)
        await (asyncio.sleep(seconds) if sleeping is None else sleeping(seconds))
