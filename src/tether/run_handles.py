"""A run's handles: :class:`RunStream`, its events as an async iterator with ``cancel()``, and :class:`RunHandle`,
a run going on in the background (``agent.stream()`` and ``agent.start()`` give them; ``agent.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Generator
from typing import Any, Generic, Protocol

from tether.events import OutputT, RunCompleted, RunEvent, RunResult
from tether.limits import StopReason
from tether.loop.interrupts import Interrupt, Interrupter

__all__ = ["Finishing", "RunHandle", "RunStream"]


class Finishing(Protocol):
    """What a run's events come from: its result once it has completed, else ``None``."""

    @property
    def result(self) -> RunResult[Any] | None: ...


class RunStream:
    """The events of one run, as an async iterator, with :meth:`cancel`. Iterate it once."""

    __slots__ = ("_events", "_interrupter", "_source")

    def __init__(self, events: AsyncGenerator[RunEvent, None], source: Finishing, interrupter: Interrupter) -> None:
        self._events = events
        self._source = source
        """What makes the events (a ``Run`` or a ``SessionRun``): its ``result`` is the run's once it completed."""
        self._interrupter = interrupter

    def __aiter__(self) -> AsyncGenerator[RunEvent, None]:
        return self._events

    async def __anext__(self) -> RunEvent:
        return await self._events.__anext__()

    def cancel(self, *, after_turn: bool = False) -> None:
        """Stop the run now, or after the current turn; it still ends with ``RunCompleted``. Thread-safe."""
        detail = "cancelled after the turn by the host" if after_turn else "cancelled by the host"
        self._interrupter.request(Interrupt(StopReason.CANCELLED, detail), after_turn=after_turn)

    @property
    def result(self) -> RunResult[Any] | None:
        """The result, once the run has completed."""
        return self._source.result

    async def aclose(self) -> None:
        """Stop iterating; the run is closed as cancelled (its transcript stays valid)."""
        await self._events.aclose()


class RunHandle(Generic[OutputT]):
    """A run going on in the background. ``await handle`` (or ``await handle.result()``) gives its result."""

    __slots__ = ("_stream", "_task")

    def __init__(self, stream: RunStream) -> None:
        self._stream = stream
        self._task: asyncio.Task[RunResult[OutputT]] = asyncio.get_running_loop().create_task(completed(stream))

    def cancel(self, *, after_turn: bool = False) -> None:
        """Stop the run now (or after the current turn); awaiting the handle then gives a cancelled result."""
        self._stream.cancel(after_turn=after_turn)

    def done(self) -> bool:
        return self._task.done()

    async def result(self) -> RunResult[OutputT]:
        return await self._task

    def __await__(self) -> Generator[Any, None, RunResult[OutputT]]:
        return self._task.__await__()


async def completed(stream: RunStream) -> RunResult[Any]:
    """The result of a run's stream, consumed to its ``RunCompleted`` (``run()``, ``resume()``, a handle's task, a
    durable run's stretch)."""
    result: RunResult[Any] | None = None
    async for event in stream:
        if type(event) is RunCompleted:
            result = event.result
    assert result is not None, "a run always ends with RunCompleted"
    return result
