"""Worker threads for synchronous tools.

A synchronous tool runs in a thread so it never blocks the event loop. A thread cannot be stopped, so a tool
that times out or is cancelled keeps its thread until it returns by itself. These threads are daemons: unlike
the event loop's default executor, they hold up neither ``asyncio.run()`` at shutdown nor the interpreter's
exit. Context variables are copied into the thread, as ``asyncio.to_thread`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import queue
import threading
from collections.abc import Callable
from typing import Any

MAX_TOOL_THREADS = 32
"""Threads shared by every run of the process; calls past this wait for a free thread."""

_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[[], Any]]


class DaemonThreadPool:
    """Runs blocking calls on daemon threads, starting a thread only when none is free."""

    def __init__(self, max_threads: int) -> None:
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._max = max_threads
        self._threads = 0
        self._idle = 0
        self._backlog = 0

    def submit(self, function: Callable[[], Any]) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        context = contextvars.copy_context()
        with self._lock:
            if self._idle:
                self._idle -= 1
            elif self._threads < self._max:
                self._threads += 1
                threading.Thread(target=self._work, name=f"tether-tool-{self._threads}", daemon=True).start()
            else:
                self._backlog += 1
        self._jobs.put((loop, future, functools.partial(context.run, function)))
        return future

    def _work(self) -> None:
        while True:
            loop, future, function = self._jobs.get()
            try:
                outcome: tuple[bool, Any] = (True, function())
            except BaseException as error:  # noqa: BLE001 - handed to the awaiting coroutine
                outcome = (False, error)
            # Free before answering: the caller, once answered, may submit its next call at once, and it
            # should find this thread free rather than start another.
            with self._lock:
                if self._backlog:
                    self._backlog -= 1
                else:
                    self._idle += 1
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
                loop.call_soon_threadsafe(_settle, future, outcome)


def _settle(future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if future.cancelled():
        return
    ok, value = outcome
    if ok:
        future.set_result(value)
        return
    if isinstance(value, StopIteration):  # a future refuses StopIteration; wrap it as coroutines do
        wrapped = RuntimeError(f"the call raised StopIteration: {value!r}")
        wrapped.__cause__ = value
        value = wrapped
    future.set_exception(value)


@functools.cache
def tool_threads() -> DaemonThreadPool:
    return DaemonThreadPool(MAX_TOOL_THREADS)


def run_in_tool_thread(function: Callable[[], Any]) -> asyncio.Future[Any]:
    """Run a blocking call on a tool thread; await the returned future for its result."""
    return tool_threads().submit(function)
