"""The server's runs: each run driven by a task of its own, its events fanned out to the streams that watch it.

A run never waits for a client. Its task reads the run's events and hands each to every watching stream's
bounded queue (``put_nowait``); a stream whose queue is full (a client that stopped reading) is dropped there
and then, its response ended, and the run goes on for the others. A stream that goes (a client that
disconnected, or one dropped for being slow) leaves by :meth:`ServerRun.leave`, which applies the disconnect
rule when no stream is left: ``"cancel"`` (the default) cancels the run, which still ends with a valid
transcript saved in its session (every tool call answered); ``"detach"`` lets it finish and save.

The registry keeps every run in flight, and the summaries of the last ``keep`` runs that ended (their
``RunResult``'s figures and turn records, never their transcripts: those are in the sessions). It counts the
runs in flight against ``max_concurrent``: one more is refused (429).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Literal

from tether._logging import get_logger
from tether.events import RunCompleted, RunEvent, RunResult, RunStarted
from tether.redaction import Redaction
from tether.serve.security import ApiError, Caller

__all__ = ["OnDisconnect", "RunRegistry", "ServerRun", "Watcher", "first_event"]

OnDisconnect = Literal["cancel", "detach"]
Keep = Callable[["ServerRun", RunResult[Any]], Awaitable[None]]
"""What keeps a run's transcript that no session of the agent's kept (a protocol's whose client holds it)."""

END: Any = None
"""What a watcher's queue gets after the run's last event."""


class Watcher:
    """One stream's view of a run: a bounded queue of its events (then :data:`END`), and the task writing them
    to the client, which is cancelled when the stream is dropped."""

    __slots__ = ("dropped", "queue", "writer")

    def __init__(self, size: int) -> None:
        self.queue: asyncio.Queue[RunEvent | None] = asyncio.Queue(size)
        self.writer: asyncio.Task[Any] | None = None
        self.dropped = False


class ServerRun:
    """A run this server started: who owns it, its session, its events' fan-out, and its end."""

    __slots__ = (
        "_alone", "_cancel", "_task", "_watchers", "ended_at", "model", "on_disconnect", "owner", "pending", "prompt",
        "run_id", "session_id", "started_at", "status", "summary",
    )  # fmt: skip

    def __init__(
        self,
        session_id: str | None,
        owner: str,
        prompt: str,
        on_disconnect: OnDisconnect,
        cancel: Callable[[], object],
    ) -> None:
        self.run_id = ""
        """Known from the run's first event (``RunStarted``)."""
        self.model = ""
        self.session_id = session_id
        self.owner = owner
        self.prompt = prompt[:200]
        self.on_disconnect = on_disconnect
        self._cancel = cancel
        self._watchers: list[Watcher] = []
        self._task: asyncio.Task[None] | None = None
        self._alone = asyncio.Event()
        self.started_at = time.time()
        self.ended_at: float | None = None
        self.status = "running"
        self.summary: dict[str, Any] | None = None
        self.pending: list[dict[str, Any]] | None = None
        """While the run waits for decisions (a durable run paused: its workflow goes on once they come), the
        calls it waits on; its streams ended at the pause, and no disconnect rule applies meanwhile."""

    @property
    def running(self) -> bool:
        return self.summary is None

    def watch(self, size: int) -> Watcher:
        """A new stream of this run's events from now on (its first is the run's start, for the stream that
        started it)."""
        watcher = Watcher(size)
        if self.running:
            self._watchers.append(watcher)
        else:
            watcher.queue.put_nowait(END)
        return watcher

    def leave(self, watcher: Watcher) -> None:
        """``watcher``'s stream is gone: when it was the last, the disconnect rule."""
        if watcher in self._watchers:
            self._watchers.remove(watcher)
        if not self._watchers:
            self._alone.set()
            if self.running and self.pending is None and self.on_disconnect == "cancel":
                self.cancel()

    async def alone(self) -> None:
        """Wait until no stream watches the run any more (its clients went, or it ended)."""
        await self._alone.wait()

    async def ended(self) -> None:
        """Wait until the run has ended and its summary is kept."""
        if self._task is not None:
            await asyncio.shield(self._task)

    def cancel(self) -> None:
        """Stop the run; it ends as cancelled, its transcript valid and saved."""
        if self.running:
            self._cancel()

    def _hand(self, item: RunEvent | None) -> None:
        for watcher in tuple(self._watchers):
            try:
                watcher.queue.put_nowait(item)
            except asyncio.QueueFull:  # a client that stopped reading: dropped, never waited for
                watcher.dropped = True
                if watcher.writer is not None:
                    watcher.writer.cancel()
                self.leave(watcher)

    async def drive(
        self,
        events: AsyncIterator[RunEvent],
        started: asyncio.Future[RunEvent],
        redaction: Redaction,
        keep: Keep | None = None,
    ) -> None:
        """Iterate the run's events (in this task alone: a run's cancel reaches the task that iterates it), hand
        each to the watchers, ``started`` set by the first (or by what stopped the run before it); at the end,
        keep its result's summary (``events_json.result_summary``: figures and turn records, masked)."""
        from tether.serve.events_json import pending_json, result_summary

        result: RunResult[Any] | None = None
        try:
            async for event in events:
                if not started.done():
                    self.run_id, self.model = first_event(event)
                    started.set_result(event)
                if self.pending is not None:  # a durable run's decisions came: it goes on
                    self.pending, self.status = None, "running"
                if type(event) is RunCompleted:
                    result = event.result
                    if keep is not None:  # saved before the client hears of the end
                        await _kept(keep, self, result)
                self._hand(event)
                if type(event) is RunCompleted and event.result.pending:
                    self._paused(pending_json(event.result.pending, redaction))
        except Exception as error:  # noqa: BLE001 - a run reports its failures: this one failed to start
            if not started.done():
                started.set_exception(error)
        finally:
            if not started.done():
                started.cancel()
            self.ended_at = time.time()
            self.summary = (
                result_summary(result, redaction)
                if result is not None
                else {"stop_reason": "error", "degraded": True, "detail": "the run ended without a result"}
            )
            self.status = str(self.summary["stop_reason"])
            self._hand(END)
            self._watchers.clear()
            self._alone.set()

    def _paused(self, pending: list[dict[str, Any]]) -> None:
        """The run paused: its streams end there, as a paused run's do (a durable run's workflow waits on; its
        decisions' request watches the rest)."""
        self.pending, self.status = pending, "paused"
        for watcher in tuple(self._watchers):
            try:
                watcher.queue.put_nowait(END)
            except asyncio.QueueFull:  # a client that stopped reading: dropped, as _hand drops it
                watcher.dropped = True
                if watcher.writer is not None:
                    watcher.writer.cancel()
        self._watchers.clear()

    def listing(self) -> dict[str, Any]:
        """What ``GET /api/runs`` shows of it."""
        summary = self.summary or {}
        return {
            "run_id": self.run_id,
            "session_id": self.session_id,
            "status": self.status,
            "model": self.model,
            "prompt": self.prompt,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "usage": summary.get("usage"),
            "cost": summary.get("cost"),
            "source": "server",
        }

    def details(self) -> dict[str, Any]:
        """What ``GET /api/runs/{id}`` shows of it: the listing and, once ended, the result's summary."""
        waiting = {"pending": self.pending} if self.pending is not None else {}
        return {**self.listing(), **waiting, **(self.summary or {})}


class RunRegistry:
    """The runs of one server: in flight (counted against ``max_concurrent``) and the last ``keep`` ended."""

    __slots__ = ("_runs", "keep", "max_concurrent", "reserved")

    def __init__(self, max_concurrent: int, keep: int = 500) -> None:
        self.max_concurrent = max_concurrent
        self.keep = keep
        self._runs: OrderedDict[str, ServerRun] = OrderedDict()
        self.reserved = 0
        """Runs being started: counted before their first event, so a burst cannot pass the limit."""

    def in_flight(self) -> int:
        return self.reserved + sum(1 for run in self._runs.values() if run.running)

    def reserve(self) -> None:
        """Take a place for a run about to start; ``ApiError`` 429 when every place is taken."""
        if self.in_flight() >= self.max_concurrent:
            raise ApiError(
                429, "too_many_runs", f"{self.max_concurrent} runs are in flight, the most this server runs at once"
            )
        self.reserved += 1

    async def start(
        self, run: ServerRun, events: AsyncIterator[RunEvent], redaction: Redaction, keep: Keep | None = None
    ) -> RunEvent:
        """Drive ``run`` (its place reserved) in a task of its own and register it once its first event came;
        that event. What stopped it before (a session that cannot be read, ...) is raised here."""
        loop = asyncio.get_running_loop()
        started: asyncio.Future[RunEvent] = loop.create_future()
        started.add_done_callback(functools.partial(self._register, run))  # even if the request went meanwhile
        run._task = loop.create_task(run.drive(events, started, redaction, keep))
        try:
            return await asyncio.shield(started)
        finally:
            self.reserved -= 1

    def _register(self, run: ServerRun, started: asyncio.Future[RunEvent]) -> None:
        if not started.cancelled() and started.exception() is None:
            self._runs.pop(run.run_id, None)  # a resumed run takes its paused run's place, as the newest
            self._runs[run.run_id] = run
            self._forget_old()

    def _forget_old(self) -> None:
        ended = [key for key, run in self._runs.items() if not run.running]
        for key in ended[: max(0, len(ended) - self.keep)]:
            del self._runs[key]

    def get(self, run_id: str, caller: Caller) -> ServerRun:
        """The run ``run_id`` of ``caller``; ``ApiError`` 404 for an unknown one or another caller's."""
        run = self._runs.get(run_id)
        if run is None or not (caller.local or run.owner == caller.owner):
            raise ApiError(404, "not_found", f"no run {run_id!r}")
        return run

    def owned(self, run_id: str, caller: Caller) -> ServerRun | None:
        """The run ``run_id`` of ``caller``, ``None`` when this server does not know it; ``ApiError`` 404 for
        another caller's."""
        run = self._runs.get(run_id)
        if run is not None and not (caller.local or run.owner == caller.owner):
            raise ApiError(404, "not_found", f"no run {run_id!r}")
        return run

    def listing(self, caller: Caller) -> list[dict[str, Any]]:
        """The caller's runs, newest first."""
        runs = [run for run in self._runs.values() if caller.local or run.owner == caller.owner]
        return [run.listing() for run in reversed(runs)]

    async def close(self) -> None:
        """Cancel the runs in flight and wait for them to end (and save): the server is shutting down. A durable
        run waiting for decisions is left waiting (its workflow is in the database: decided later, from any
        process); only this server's watch of it ends."""
        tasks = [run._task for run in self._runs.values() if run.running and run._task is not None]
        for run in self._runs.values():
            if run.pending is None:
                run.cancel()
            elif run._task is not None:  # a durable run paused: it waits on in its database, not for this server
                run._task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


def first_event(event: RunEvent) -> tuple[str, str]:
    """The run id and model a run's first event names (``RunStarted``; a run that ended before starting: its
    result's run id)."""
    if type(event) is RunStarted:
        return event.run_id, event.model
    if type(event) is RunCompleted:
        return event.result.run_id, ""
    return "", ""


async def _kept(keep: Keep, run: ServerRun, result: RunResult[Any]) -> None:
    """``keep`` the run's transcript; a store that fails is logged, and the run still ends for its client."""
    try:
        await keep(run, result)
    except Exception as error:  # noqa: BLE001 - a failed save is reported, the stream still ends
        get_logger("tether.serve").warning(
            "run %s: its session %s was not saved: %s", run.run_id, run.session_id, error
        )
