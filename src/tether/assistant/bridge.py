"""The thread model of a synchronous question: the loop on a worker thread, the namespace on the caller's.

The contract
------------
* ``ask()`` runs the agent loop on a worker thread, in an event loop of its own, while the calling thread
  (the REPL's) waits on one queue and serves what arrives there, in order: capability calls (run with
  ``PythonRuntime.call`` on the calling thread, the only thread that touches the namespace, so the calls of
  one turn run one after the other in the model's order) and the run's events (handed to ``on_event`` on the
  calling thread too, so a REPL prints from its own thread).
* A ``KeyboardInterrupt`` on the calling thread, while it waits or while a capability call runs, cancels the
  question: the run ends ``cancelled`` and its result is returned, never the exception. A call interrupted
  midway answers the model with an error; calls still queued after the cancel are answered without being
  run, so the namespace is left as the calls that already ran left it. Further interrupts while the run
  winds down are absorbed.
* A call the loop stopped waiting for (its run ended, timed out or was cancelled) is not run when its turn
  comes; a call already running on the calling thread finishes, and its envelope still counts as a finding.
* Whatever the run does, the worker thread ends and is joined before ``ask()`` returns. An exception the
  host's ``on_event`` raises cancels the run and is raised from ``ask()`` once the worker has ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tether.events import RunEvent, RunResult

Envelope = dict[str, Any]
CallRunner = Callable[[str, Mapping[str, Any]], Envelope]
"""Runs one capability on the calling thread and returns its envelope (``PythonRuntime.call``, recorded)."""

CANCELLED_ENVELOPE: Envelope = {
    "ok": False,
    "error": {
        "code": "internal",
        "message": "the question was cancelled: this call did not run to its end",
        "details": {},
    },
}


@dataclass(slots=True)
class _Call:
    """A capability call waiting for the calling thread; ``abandoned`` once the loop stopped waiting."""

    name: str
    arguments: dict[str, Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Envelope]
    abandoned: bool = False


@dataclass(frozen=True, slots=True)
class _Finished:
    """The worker's last word: the run's result, or the exception that escaped it."""

    result: RunResult | None
    error: BaseException | None = None


_END = object()
"""Queued last by the worker, once :attr:`Bridge.finished` is set."""


@dataclass(slots=True)
class Bridge:
    """One question's queue between its worker thread and the calling thread (see the module docstring)."""

    _queue: queue.SimpleQueue[_Call | RunEvent | object] = field(default_factory=queue.SimpleQueue)
    finished: _Finished | None = None
    """Set by the worker just before it queues its end (so an interrupt that loses the end loses nothing)."""
    interrupted: bool = False
    """A ``KeyboardInterrupt`` came while the worker was starting (it can reach the model that fast): the
    question is cancelled as soon as :meth:`serve` begins."""

    # --- the worker's side ----------------------------------------------------------------------------------

    async def call(self, name: str, arguments: Mapping[str, Any]) -> Envelope:
        """Hand a capability call to the calling thread and wait for its envelope (a tool's ``run_call``)."""
        loop = asyncio.get_running_loop()
        item = _Call(name, dict(arguments), loop, loop.create_future())
        self._queue.put(item)
        try:
            return await item.future
        finally:
            item.abandoned = not item.future.done() or item.future.cancelled()

    def event(self, event: RunEvent) -> None:
        """Pass an event on to the calling thread (the run's sink)."""
        self._queue.put(event)

    def start(self, run: Callable[[], Awaitable[RunResult]]) -> threading.Thread:
        """Run ``run()`` to its result in a new event loop on a worker thread; its end is queued last."""

        def work() -> None:
            try:
                finished = _Finished(asyncio.run(_awaited(run)))
            except BaseException as error:  # noqa: BLE001 - handed to the calling thread, which raises it
                finished = _Finished(None, error)
            self.finished = finished
            self._queue.put(_END)

        thread = threading.Thread(target=work, name="tether-ask", daemon=True)
        try:
            thread.start()
        except KeyboardInterrupt:  # the worker runs: the interrupt is its question's to take
            self.interrupted = True
        return thread

    # --- the calling thread's side --------------------------------------------------------------------------

    def serve(
        self,
        thread: threading.Thread,
        run_call: CallRunner,
        cancel: Callable[[], None],
        on_event: Callable[[RunEvent], None] | None,
    ) -> RunResult:
        """Serve calls and events until the worker ends; returns its result (see the module docstring)."""
        server = _Server(run_call, cancel, on_event)
        if self.interrupted:
            server.cancel_once()
        while True:
            try:
                item = self._queue.get()
                if item is _END:
                    break
                if isinstance(item, _Call):
                    server.answer(item)
                else:
                    server.deliver(item)  # type: ignore[arg-type]
            except KeyboardInterrupt:
                server.cancel_once()
                if self.finished is not None and self._queue.empty():
                    break  # the interrupt landed as the end was taken from the queue
        _join(thread)
        finished = self.finished
        assert finished is not None
        if server.sink_error is not None:
            raise server.sink_error
        if finished.error is not None:
            raise finished.error
        assert finished.result is not None
        return finished.result


class _Server:
    """What the calling thread does with each item, and whether the question was cancelled."""

    __slots__ = ("cancelled", "on_event", "run_call", "sink_error", "stop")

    def __init__(
        self, run_call: CallRunner, cancel: Callable[[], None], on_event: Callable[[RunEvent], None] | None
    ) -> None:
        self.run_call = run_call
        self.stop = cancel
        self.on_event = on_event
        self.cancelled = False
        self.sink_error: BaseException | None = None

    def answer(self, item: _Call) -> None:
        if item.abandoned:
            return
        envelope = CANCELLED_ENVELOPE
        try:
            if not self.cancelled:
                envelope = self.run_call(item.name, item.arguments)
        finally:  # an interrupt midway still answers the call, then cancels the question
            _settle(item, envelope)

    def deliver(self, event: RunEvent) -> None:
        if self.on_event is None or self.sink_error is not None:
            return
        try:
            self.on_event(event)
        except Exception as error:  # noqa: BLE001 - the host's sink failed: the run stops, the error is raised
            self.sink_error = error
            self.cancel_once()

    def cancel_once(self) -> None:
        if self.cancelled:
            return
        self.cancelled = True
        with contextlib.suppress(RuntimeError):  # the worker's loop is closed: the run has already ended
            self.stop()


def _settle(item: _Call, envelope: Envelope) -> None:
    """Hand ``envelope`` to the waiting loop; nothing if the loop is gone or stopped waiting."""

    def settle() -> None:
        if not item.future.done():
            item.future.set_result(envelope)

    with contextlib.suppress(RuntimeError):  # the worker's loop is closed: the run ended without this result
        item.loop.call_soon_threadsafe(settle)


def _join(thread: threading.Thread) -> None:
    """Wait for the worker to end; an interrupt now only repeats the cancel that is already under way."""
    while thread.is_alive():
        try:
            thread.join()
        except KeyboardInterrupt:
            continue


async def _awaited(run: Callable[[], Awaitable[RunResult]]) -> RunResult:
    return await run()
