"""Worker threads for synchronous tools.

A synchronous tool runs in a thread so it never blocks the event loop. These threads are daemons: unlike
the event loop's default executor, they hold up neither ``asyncio.run()`` at shutdown nor the interpreter's
exit. Context variables are copied into the thread, as ``asyncio.to_thread`` does.

The contract
------------
* At most :data:`MAX_TOOL_THREADS` threads serve calls at once; a call made while all of them are busy waits
  in line for the first one free.
* A thread cannot be stopped. When the caller stops waiting (the call timed out, or its run was cancelled:
  the awaited future is cancelled), the call is *abandoned*: its thread gives its place back at once, so the
  next call is served by a fresh thread instead of waiting behind one that may never return. The abandoned
  thread finishes its job, drops the result and exits; it never serves another call. A call abandoned
  before a thread took it up is not run at all.
* At most :data:`MAX_ABANDONED_TOOL_THREADS` abandoned threads may be alive. While that many are, a new call
  is refused at once with :class:`~tether.errors.ToolError` (``tool_failed``) saying so, rather than
  starting yet another thread or waiting forever: all told, no more than ``MAX_TOOL_THREADS +
  MAX_ABANDONED_TOOL_THREADS`` tool threads are ever alive.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import queue
import threading
from collections.abc import Callable
from typing import Any, Final

from tether.errors import ToolError

MAX_TOOL_THREADS = 32
"""Threads serving calls for every run of the process; calls past this wait for a free thread."""
MAX_ABANDONED_TOOL_THREADS = 64
"""Abandoned threads (their call timed out or was cancelled, they are still running) allowed alive at once;
while that many are, synchronous calls are refused."""

_QUEUED: Final = 0
_RUNNING: Final = 1
_FINISHED: Final = 2
_ABANDONED: Final = 3
"""The states of a job: waiting in line, on a thread, done; or given up by its caller."""


class _Job:
    __slots__ = ("function", "future", "loop", "state")

    def __init__(self, loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], function: Callable[[], Any]):
        self.loop = loop
        self.future = future
        self.function = function
        self.state = _QUEUED


class DaemonThreadPool:
    """Runs blocking calls on daemon threads, starting a thread only when none is free (see the module
    docstring for what happens to a call its caller gives up on)."""

    def __init__(self, max_threads: int, max_abandoned: int = MAX_ABANDONED_TOOL_THREADS) -> None:
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._max = max_threads
        self._max_abandoned = max_abandoned
        self._threads = 0
        """Threads serving the pool (abandoned ones not counted)."""
        self._idle = 0
        """Serving threads waiting for a job that no call has claimed yet."""
        self._backlog = 0
        """Jobs in line that no thread has been promised to."""
        self._abandoned = 0
        self._started = 0

    @property
    def abandoned(self) -> int:
        """Abandoned threads still running."""
        return self._abandoned

    @property
    def threads(self) -> int:
        """Threads serving calls (abandoned ones not counted)."""
        return self._threads

    def submit(self, function: Callable[[], Any]) -> asyncio.Future[Any]:
        """Run ``function`` on a pool thread; await the returned future for its result.

        Cancelling the future abandons the call. Raises ``ToolError`` when too many abandoned threads are alive.
        """
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._abandoned >= self._max_abandoned:
                raise ToolError(
                    f"No thread can run this synchronous tool: {self._abandoned} earlier tool calls that timed out "
                    "or were cancelled are still running on their threads (the limit is "
                    f"{self._max_abandoned}). Try again once they have finished."
                )
            future: asyncio.Future[Any] = loop.create_future()
            job = _Job(loop, future, functools.partial(contextvars.copy_context().run, function))
            if self._idle:
                self._idle -= 1
            elif self._threads < self._max:
                self._start_thread()
            else:
                self._backlog += 1
        future.add_done_callback(functools.partial(self._on_done, job))
        self._jobs.put(job)
        return future

    def _start_thread(self) -> None:
        """Start a serving thread; called with the lock held."""
        self._threads += 1
        self._started += 1
        threading.Thread(target=self._work, name=f"tether-tool-{self._started}", daemon=True).start()

    def _on_done(self, job: _Job, future: asyncio.Future[Any]) -> None:
        """The caller's future is settled; if it was cancelled while its job ran, the job is abandoned."""
        if not future.cancelled():
            return
        with self._lock:
            if job.state == _QUEUED:
                job.state = _ABANDONED  # the thread that takes it up skips it
            elif job.state == _RUNNING:
                job.state = _ABANDONED
                self._threads -= 1
                self._abandoned += 1
                if self._backlog:  # the place this thread held goes to a call waiting in line
                    self._backlog -= 1
                    self._start_thread()

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            with self._lock:
                # The future is read from this thread: a cancel whose callback has not run yet still counts.
                run = job.state == _QUEUED and not job.future.cancelled()
                if run:
                    job.state = _RUNNING
            outcome: tuple[bool, Any] = (True, None)
            if run:
                try:
                    outcome = (True, job.function())
                except BaseException as error:  # noqa: BLE001 - handed to the awaiting coroutine
                    outcome = (False, error)
            # Free before answering: the caller, once answered, may submit its next call at once, and it
            # should find this thread free rather than start another.
            with self._lock:
                if job.state == _ABANDONED and run:
                    self._abandoned -= 1
                    return  # its place was given to another thread: leave
                job.state = _FINISHED
                if self._backlog:
                    self._backlog -= 1
                else:
                    self._idle += 1
            if run:
                with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
                    job.loop.call_soon_threadsafe(_settle, job.future, outcome)


def _settle(future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if future.cancelled():
        return
    ok, value = outcome
    if ok:
        future.set_result(value)
        return
    if isinstance(value, StopIteration | GeneratorExit):
        wrapped = RaisedInThread(f"the call raised {type(value).__name__}: {value!r}")
        wrapped.__cause__ = value
        value = wrapped
    future.set_exception(value)


class RaisedInThread(RuntimeError):
    """Carries, as its ``__cause__``, what a call raised that a future cannot pass on as it is: a future refuses
    ``StopIteration``, and a ``GeneratorExit`` thrown into the awaiting coroutine would close it (and every
    generator it awaits through) instead of being raised where it awaits."""


@functools.cache
def tool_threads() -> DaemonThreadPool:
    return DaemonThreadPool(MAX_TOOL_THREADS)


def run_in_tool_thread(function: Callable[[], Any]) -> asyncio.Future[Any]:
    """Run a blocking call on a tool thread; await the returned future for its result."""
    return tool_threads().submit(function)
