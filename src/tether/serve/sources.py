"""Where a served run's events come from: an ``Agent``'s stream, or a ``DurableAgent``'s durable run.

``tether.serve`` sits below ``agent`` and ``durable`` in the layers (their ``to_asgi()`` import it), so it
knows them by what they do: :class:`ServedAgent` is what an ``Agent`` offers a server, :class:`DurableServed`
what a ``DurableAgent`` does; the durable engine's run store is reached through the loaded ``tether.durable``
(a ``DurableAgent`` exists only once it is loaded).

:func:`open_run` starts the run and returns its first event (``RunStarted``, which names its run id), the
rest of its events, and how to cancel it. A plain agent's run is its ``RunStream``. A durable agent's run is
a DBOS workflow started in this process (``DurableAgent.run``), its events handed on by the run's event sink;
cancelling it cancels the workflow (``tether.durable.cancel_run``), which stops it at its next step.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeGuard, runtime_checkable

from tether.errors import ConfigInvalid
from tether.events import RunEvent, RunResult
from tether.messages import Message, Prompt
from tether.providers.base import Provider
from tether.secrets import Masker
from tether.sessions.base import SessionStore
from tether.tools.base import Tool

__all__ = [
    "DurableServed", "OpenedRun", "ServedAgent", "durable_engine", "is_plain", "open_resumed", "open_run",
    "plain_agent",
]  # fmt: skip

DURABLE = "tether.durable"


@runtime_checkable
class ServedAgent(Protocol):
    """What a server needs of an agent (``tether.Agent`` has it all)."""

    name: str | None
    provider: Provider
    store: SessionStore | None

    @property
    def tools(self) -> Iterable[Tool]: ...

    @property
    def secrets(self) -> Masker: ...

    def stream(
        self,
        prompt: Prompt | None = None,
        *,
        history: Sequence[Message] = (),
        session: str | None = None,
        instructions: str | None = None,
    ) -> Any: ...


class DurableServed(Protocol):
    """What a server needs of a durable agent (``tether.durable.DurableAgent``): its agent, and a durable run."""

    agent: Any

    async def run(
        self,
        prompt: str,
        *,
        history: Sequence[Message] = (),
        workflow_id: str | None = None,
        on_event: Callable[[RunEvent], None] | None = None,
        session: str | None = None,
    ) -> RunResult[Any]: ...


def is_plain(agent: ServedAgent | DurableServed) -> TypeGuard[ServedAgent]:
    """Whether ``agent`` runs in this process as it is (an ``Agent``), rather than durably."""
    return isinstance(agent, ServedAgent)


def plain_agent(agent: object) -> ServedAgent:
    """The agent whose runs are served: ``agent`` itself, or a durable agent's; ``ConfigInvalid`` otherwise."""
    if isinstance(agent, ServedAgent):
        return agent
    inner = getattr(agent, "agent", None)
    if isinstance(inner, ServedAgent) and callable(getattr(agent, "run", None)):
        return inner
    raise ConfigInvalid(f"a server serves a tether Agent or DurableAgent, not {type(agent).__name__}")


def durable_engine() -> Any:
    """``tether.durable``, loaded by whoever made the durable agent being served."""
    return sys.modules[DURABLE]


_END: Any = object()


class OpenedRun:
    """A run just started: its events (to iterate in one task: a plain run's cancel reaches the task iterating
    it), and its cancel."""

    __slots__ = ("cancel", "events")

    def __init__(self, events: AsyncIterator[RunEvent], cancel: Callable[[], object]) -> None:
        self.events = events
        self.cancel = cancel


async def open_run(
    agent: ServedAgent | DurableServed,
    prompt: Prompt | None,
    session_id: str | None,
    history: Sequence[Message] = (),
    instructions: str | None = None,
) -> OpenedRun:
    """Start ``prompt``'s run on ``agent`` (in ``session_id``, or after ``history``, with the run's own
    ``instructions``); ``ConfigInvalid`` for what the agent refuses."""
    if is_plain(agent):
        stream = agent.stream(prompt, session=session_id, history=history, instructions=instructions)
        return OpenedRun(stream.__aiter__(), stream.cancel)
    if instructions is not None:
        raise ConfigInvalid("a durable agent's served run takes no instructions of its own: give them to its Agent")
    return await _durable(agent, prompt, session_id, history)  # type: ignore[arg-type]  # not plain: durable


def open_resumed(
    agent: ServedAgent | DurableServed, state: Any, decisions: Mapping[str, Any], session_id: str | None = None
) -> OpenedRun:
    """Go on with a paused run: ``state`` (a ``PausedRun``), or ``None`` to read it from ``session_id``; its
    pending calls settled by ``decisions`` (checked already). A durable agent's paused run waits in its database
    for ``DurableAgent.decide`` (the decisions route sends them there), not for this server (``ConfigInvalid``)."""
    if not is_plain(agent):
        raise ConfigInvalid(
            "deciding a paused run over HTTP is not supported for durable agents: use DurableAgent.decide(run_id, "
            "decisions) or `tether runs approve`"
        )
    stream = agent.resume_stream(state, decisions, session=session_id)  # type: ignore[attr-defined]  # an Agent's
    return OpenedRun(stream.__aiter__(), stream.cancel)


async def _durable(
    agent: DurableServed, prompt: Prompt | None, session_id: str | None, history: Sequence[Message]
) -> OpenedRun:
    if not isinstance(prompt, str):
        raise ConfigInvalid("a durable agent's served run takes a text prompt, without attachments")
    queue: asyncio.Queue[Any] = asyncio.Queue()
    run_id = uuid.uuid4().hex
    task = asyncio.get_running_loop().create_task(
        agent.run(prompt, history=history, workflow_id=run_id, on_event=queue.put_nowait, session=session_id)
    )
    task.add_done_callback(lambda _: queue.put_nowait(_END))

    async def events() -> AsyncIterator[RunEvent]:
        while (item := await queue.get()) is not _END:
            yield item
        error = None if task.cancelled() else task.exception()
        if error is not None:  # it failed before it ran: its error is the answer
            raise error

    def cancel() -> None:
        asyncio.get_running_loop().create_task(durable_engine().cancel_run(run_id))

    return OpenedRun(events(), cancel)
