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
"""

from __future__ import annotations

import os
import pickle
import re
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from dbos import DBOS, DBOSConfig, SetWorkflowID, WorkflowHandleAsync

from tether.errors import ConfigInvalid
from tether.events import RunCompleted, RunResult

if TYPE_CHECKING:
    from tether.agent import Agent
    from tether.loop.choice import ToolChoiceOption
    from tether.loop.engine import EventSink
    from tether.messages import Message

T = TypeVar("T")

DEFAULT_DATABASE = "tether-runs.sqlite"
"""The SQLite file :func:`launch` uses when given neither a file nor a URL (in the working directory)."""
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_sinks: dict[str, EventSink] = {}
"""The host's event sink of each run started in this process, by run id, while it runs."""


class DBOSSteps:
    """The loop's :class:`~tether.loop.steps.StepRunner` inside a DBOS workflow: each step a DBOS step."""

    __slots__ = ("_run_id",)

    def __init__(self, run_id: str) -> None:
        self._run_id = run_id

    @property
    def run_id(self) -> str:
        return self._run_id

    async def step(self, name: str, function: Callable[[], Awaitable[T]]) -> T:
        async def call() -> T:  # DBOS runs a coroutine function on the loop, anything else in a thread
            return await function()

        result: T = await DBOS.run_step_async({"name": name, "retries_allowed": False}, call)
        return result


class DurableAgent:
    """``agent``'s runs as DBOS workflows (see the module docstring); make it before :func:`launch`."""

    def __init__(self, agent: Agent, *, name: str = "agent") -> None:
        if not _NAME.fullmatch(name):
            raise ConfigInvalid(f"durable agent name {name!r} must be 1-64 letters, digits, '_', '.' or '-'")
        if _launched():
            raise ConfigInvalid(
                f"DurableAgent {name!r} was made after tether.durable.launch(): make every durable agent first, "
                "so that a recovering process knows all of them"
            )
        self.agent = agent
        self.name = name
        self._workflow = DBOS.workflow(name=f"tether.run.{name}")(_workflow_of(agent))

    async def start(
        self,
        prompt: str,
        *,
        history: Sequence[Message] = (),
        workflow_id: str | None = None,
        tool_choice: ToolChoiceOption | None = None,
    ) -> str:
        """Start a run (or find the one with this ``workflow_id``); its run id. It goes on in the background."""
        _require_launch()
        run_id = workflow_id or uuid.uuid4().hex
        with SetWorkflowID(run_id):
            handle: WorkflowHandleAsync[RunResult] = await DBOS.start_workflow_async(
                self._workflow, prompt, tuple(history), tool_choice
            )
        return handle.workflow_id

    async def run(
        self,
        prompt: str,
        *,
        history: Sequence[Message] = (),
        workflow_id: str | None = None,
        on_event: EventSink | None = None,
        tool_choice: ToolChoiceOption | None = None,
    ) -> RunResult:
        """Run to the end, durably, and return the result (the kept one, for a run that had already ended)."""
        _require_launch()
        run_id = workflow_id or uuid.uuid4().hex
        if on_event is not None:
            _sinks[run_id] = on_event
        try:
            await self.start(prompt, history=history, workflow_id=run_id, tool_choice=tool_choice)
            return await self.result(run_id)
        finally:
            _sinks.pop(run_id, None)

    async def result(self, run_id: str) -> RunResult:
        """Wait for the run ``run_id`` (started here, recovered here or run by another process) and return its
        result."""
        _require_launch()
        handle: WorkflowHandleAsync[RunResult] = await DBOS.retrieve_workflow_async(run_id)
        result: RunResult = await handle.get_result()
        return result


Workflow = Callable[[str, tuple["Message", ...], "ToolChoiceOption | None"], Coroutine[Any, Any, RunResult]]


def _workflow_of(agent: Agent) -> Workflow:
    async def tether_run(prompt: str, history: tuple[Message, ...], tool_choice: ToolChoiceOption | None) -> RunResult:
        run_id = DBOS.workflow_id
        assert run_id is not None
        steps = DBOSSteps(run_id)
        stream = agent._stepped(prompt, steps, history=history, on_event=_sinks.get(run_id), tool_choice=tool_choice)
        result: RunResult | None = None
        async for event in stream:
            if type(event) is RunCompleted:
                result = event.result
        assert result is not None, "a run always ends with RunCompleted"
        return _portable(result)

    return tether_run


def _portable(result: RunResult) -> RunResult:
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
) -> None:
    """Open the workflow database and recover this executor's unfinished runs; once per process, after every
    :class:`DurableAgent` is made. ``database``: a SQLite file (default :data:`DEFAULT_DATABASE`);
    ``system_database_url``: any database DBOS takes (``postgresql://user@host:5432/db``)."""
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
    config: DBOSConfig = {"name": app_name, "system_database_url": url, "log_level": "WARNING"}
    DBOS(config=config)
    DBOS.launch()


def shutdown() -> None:
    """Stop DBOS in this process (runs under way stop where they are; a later launch recovers them)."""
    DBOS.destroy()


def _launched() -> bool:
    from dbos import _dbos

    instance: Any = getattr(_dbos, "_dbos_global_instance", None)
    return instance is not None and bool(getattr(instance, "_launched", False))


def _require_launch() -> None:
    if not _launched():
        raise ConfigInvalid("durable runs need tether.durable.launch(...) first (it opens the workflow database)")
