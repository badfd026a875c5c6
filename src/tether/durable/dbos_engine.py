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
* Inputs, step results and results are kept in tether's versioned, field-named JSON
  (:mod:`tether.durable.formats`, DBOS's serializer here): a ``RunResult``'s ``error`` is kept as its type,
  message and plain attributes, never pickled. The host's ``on_event`` sink lives in the
  process that started the run only; a recovered run has none.
* A run's ``deps`` are never stored: ``DurableAgent(agent, deps=make)`` calls ``make()`` in the process that
  executes the run (the one that started it, a worker, or the one that recovers it) when the run starts there,
  so a database handle or a client is made where it is used and deps of any size cost the workflow nothing.
* Queues (``dbos_queues``): a tether :class:`~tether.durable.records.Queue` is a DBOS queue row, made when a
  process first declares it and changed only by ``configure_queue``. :func:`launch` takes runs from the
  queues it is given and from no other, within each one's ``worker_concurrency`` in this process;
  :func:`serve` is launch plus waiting for SIGTERM/SIGINT. A worker's id is its DBOS
  executor id: a launch with the id of a dead worker recovers its runs, :func:`recover_worker` puts them back
  on their queues; who is dead is :mod:`tether.durable.liveness`'s heartbeats' to say. Recovered runs keep
  their queue, so its limits hold.
* The run store (:func:`list_runs`, :func:`get_run`, :func:`cancel_run`, :func:`resume_run`) reads DBOS's
  workflow table into :class:`~tether.durable.records.RunRecord`. Cancelling a running run is a DBOS message
  the run looks for inside each model call's step, before the call (a plain read; an agent it runs as a tool
  looks before each of its own): the step then keeps a mark instead of the answer (``dbos_steps.py``), and the
  run ends with a cancelled ``RunResult``.
* A run that pauses (a call waits on a person's decision) does not end its workflow: the workflow waits for the
  decisions in the database and goes on with them, as often as the run pauses (``dbos_pausing``);
  :meth:`DurableAgent.decide` sends them from any process.
"""

from __future__ import annotations

import asyncio
import functools
import math
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Literal

import msgspec
from dbos import DBOS, SetWorkflowID, WorkflowHandleAsync

from tether.durable.dbos_base import _NAME, _awaited, _launched, _require_launch, _run_id
from tether.durable.dbos_launch import _agents
from tether.durable.dbos_pausing import cleared, decide, decisions_for, waiting_on
from tether.durable.dbos_queues import _declare
from tether.durable.dbos_runs import DurableRun
from tether.durable.dbos_steps import DBOSSteps
from tether.durable.records import Queue
from tether.errors import ConfigInvalid
from tether.events import RunResult
from tether.limits import StopReason
from tether.run_handles import completed
from tether.serving import Servable

if TYPE_CHECKING:
    from tether.agent import Agent
    from tether.durable.metrics import DurableMetrics, RunMetrics
    from tether.durable.records import Waiting
    from tether.loop.choice import ToolChoiceOption
    from tether.loop.sinks import EventSink
    from tether.messages import Message
    from tether.paused import Decisions, PausedRun
    from tether.run_handles import RunStream


_sinks: dict[str, EventSink] = {}
"""The host's event sink of each run started in this process, by run id, while it runs."""


class DurableAgent(Servable):
    """``agent``'s runs as DBOS workflows (see the module docstring); make it before :func:`launch`."""

    def __init__(
        self,
        agent: Agent[Any, Any],
        *,
        name: str = "agent",
        deps: Callable[[], Any] | None = None,
        approval_timeout: float | Literal["agent"] | None = "agent",
    ) -> None:
        """``deps``: makes the ``deps`` of each run, in the process that executes it (see the module docstring).
        ``approval_timeout``: how long a paused run waits for its decisions (seconds; ``None``: until they come);
        by default the agent's ``Limits.approval_timeout`` (``dbos_pausing``)."""
        if not _NAME.fullmatch(name):
            raise ConfigInvalid(f"durable agent name {name!r} must be 1-64 letters, digits, '_', '.' or '-'")
        if _launched():
            raise ConfigInvalid(
                f"DurableAgent {name!r} was made after tether.durable.launch(): make every durable agent first, "
                "so that a recovering process knows all of them"
            )
        self.agent = agent
        self.name = name
        self.approval_timeout = _timeout(agent, approval_timeout)
        if deps is not None and not callable(deps):
            raise ConfigInvalid(f"deps must be a function that makes a run's deps, not a {type(deps).__name__}")
        from tether.durable.metrics import durable_metrics

        workflow = _workflow_of(agent, deps, self.approval_timeout)
        metrics = durable_metrics(agent)
        if metrics is not None:
            workflow = _measured(workflow, metrics, name)
        self._workflow = DBOS.workflow(name=f"tether.run.{name}")(workflow)
        _agents[name] = agent  # its identity is part of the deploy version (``launch``)

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
        """Put a run on ``queue`` (made in the database if it is not yet; an existing queue's limits are never
        changed by enqueuing) for a worker serving it; its
        handle. With the ``workflow_id`` of a run that exists, nothing is enqueued: that run's handle.
        ``session=``: the run continues that session of the agent's store (which the worker must reach)."""
        _require_launch()
        if not isinstance(queue, Queue):
            raise ConfigInvalid(f"enqueue() takes a tether.durable.Queue, not {queue!r}")
        self._check(history, session)
        run_id = _run_id(workflow_id)
        dbos_queue = await asyncio.to_thread(_declare, queue)
        with SetWorkflowID(run_id):
            handle: WorkflowHandleAsync[RunResult[Any]] = await dbos_queue.enqueue_async(
                self._workflow, prompt, tuple(history), None, session
            )
        return DurableRun(handle.workflow_id)

    def _check(self, history: Sequence[Message], session: str | None) -> None:
        if session is not None:
            from tether.agent import check_session

            check_session(self.agent, history)

    async def decide(self, run_id: str, decisions: Decisions) -> Waiting:
        """Settle some or all of the pending calls of the paused run ``run_id`` (of any durable agent), from any
        launched process: checked against what the run waits on first (``DecisionInvalid``, nothing sent), then
        sent; the run goes on once each of its calls has a decision. What it waited on before these."""
        return await decide(run_id, decisions)

    async def pending(self, run_id: str) -> Waiting | None:
        """What the run ``run_id`` waits on when it is paused (its calls, which have a decision); else ``None``."""
        return await waiting_on(run_id)

    async def result(self, run_id: str) -> RunResult[Any]:
        """Wait for the run ``run_id`` (started here, recovered here or run by another process) and return its
        result."""
        return await DurableRun(run_id).result()


Workflow = Callable[
    [str, tuple["Message", ...], "ToolChoiceOption | None", "str | None"], Coroutine[Any, Any, RunResult[Any]]
]


def _workflow_of(
    agent: Agent[Any, Any], make_deps: Callable[[], Any] | None, approval_timeout: float | None
) -> Workflow:
    async def tether_run(
        prompt: str, history: tuple[Message, ...], tool_choice: ToolChoiceOption | None, session: str | None
    ) -> RunResult[Any]:
        run_id = DBOS.workflow_id
        assert run_id is not None
        steps = DBOSSteps(run_id)
        steps.metrics = _watched.get(run_id)
        sink = _sinks.get(run_id)
        from tether.agent import stream_with_steps

        deps = make_deps() if make_deps is not None else None
        stream = stream_with_steps(
            agent, prompt, steps, history=history, on_event=sink, tool_choice=tool_choice, session=session, deps=deps
        )
        result = await _ended(stream, steps)
        while result.stop_reason == StopReason.PAUSED and result.state is not None:  # dbos_pausing.py
            decisions = await decisions_for(run_id, result.state, approval_timeout)
            await cleared()
            state = msgspec.structs.replace(result.state, approval_timeout=None)  # the wait applied it
            stream = _resumed(agent, state, decisions, steps, sink, session, deps)
            result = await _ended(stream, steps)
        return result

    return tether_run


def _resumed(
    agent: Agent[Any, Any],
    state: PausedRun,
    decisions: Decisions,
    steps: DBOSSteps,
    sink: EventSink | None,
    session: str | None,
    deps: Any,
) -> RunStream:
    """``agent.resume_stream(...)`` whose provider and tool calls (the decided calls first) are the workflow's
    steps: the run goes on inside its workflow once its decisions are in (the loop's step seam, as for
    ``stream_with_steps``)."""
    from tether.agent import check_session
    from tether.loop.pausing import resumption
    from tether.session_run import resumed_now, resumed_stream

    sinks = agent._sinks + ((sink,) if sink is not None else ())
    store = check_session(agent, ()) if session is not None else None
    spec, resumed = agent._run_spec(None), resumed_now(resumption(state, decisions, session), session)
    if not agent._input_guardrails and not agent._output_guardrails:
        return resumed_stream(spec, resumed, sinks, store, session, deps, steps)
    from tether.team.relay import resumed_relay  # the agent's guardrails check the answer, as in a plain resume

    return resumed_relay(agent._team_member(spec), resumed, sinks, store, session, deps, steps)


async def _ended(stream: RunStream, steps: DBOSSteps) -> RunResult[Any]:
    """The result of one stretch of a run (its start, or a resumption), its stream drained."""
    steps.on_cancel = stream.cancel
    return await completed(stream)


def _timeout(agent: Agent[Any, Any], given: float | Literal["agent"] | None) -> float | None:
    """A paused run's wait: ``given``, or the agent's ``Limits.approval_timeout``; ``ConfigInvalid`` unless a
    positive number of seconds or ``None``."""
    value = agent.limits.approval_timeout if given == "agent" else given
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ConfigInvalid(f"approval_timeout must be a positive number of seconds or None, not {value!r}")
    return float(value)


_watched: dict[str, RunMetrics] = {}
"""The metrics of each run executing in this process, by run id, while it runs."""


def _measured(workflow: Workflow, metrics: DurableMetrics, name: str) -> Workflow:
    """``workflow`` counted in ``metrics`` (``tether.durable.metrics``) while it runs here. Wrapped with
    ``functools.wraps``: the engine's deploy version hashes each workflow's source, which ``inspect`` reads
    through ``__wrapped__``, so a process with a meter and one without stay on the same version."""

    @functools.wraps(workflow)
    async def tether_run(
        prompt: str, history: tuple[Message, ...], tool_choice: ToolChoiceOption | None, session: str | None
    ) -> RunResult[Any]:
        run_id = DBOS.workflow_id
        assert run_id is not None
        watch = _watched[run_id] = metrics.run(name)
        result: RunResult[Any] | None = None
        failed = False
        try:
            result = await workflow(prompt, history, tool_choice, session)
            return result
        except Exception:
            failed = True
            raise
        finally:
            _watched.pop(run_id, None)
            watch.end(result, failed=failed)

    return tether_run
