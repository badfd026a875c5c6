"""The request timeout of the HTTP layer: how long a provider may keep us waiting for its next bytes.

``Request.timeout`` bounds each wait for a provider: for the answer's first byte, and for every piece of the
body after it. aiohttp can keep such a bound itself (``ClientTimeout(sock_read=...)``), but it does so with an
event-loop timer armed when the request is sent and re-armed (a cancelled timer left in the loop's heap and a
new one pushed) on every piece of data the socket delivers: two timers or more per request, and one per chunk
of a stream. A stream of a few hundred deltas arms a few hundred timers.

A :class:`Stall` keeps the same bound on an :class:`~tether.alarms.Alarm` instead, the one lazily re-armed
timer that everything on one event loop shares (``alarms.shared_alarm``): before each wait the request's deadline
is moved to now plus the timeout (a dict entry), after it the deadline is withdrawn (so the time the consumer
spends between reads never counts). The loop timer is armed when the first request starts and then about once
per timeout. When a deadline passes, the waiting task is cancelled, and the request sees it as
:meth:`Stall.expired`: the caller turns it into the same ``timeout`` failure, retried the same way, as a
timeout of the socket was.
"""

from __future__ import annotations

import asyncio

from tether.alarms import Alarm


class Stall:
    """One attempt's wait-for-the-provider bound on a shared :class:`Alarm` (see the module docstring).

    Made inside the task that waits; :meth:`start` before each wait, :meth:`stop` after it. When the bound
    passes, the task is cancelled: the code that catches the ``CancelledError`` asks :meth:`expired` whether it
    was this bound (then the cancellation is withdrawn and it is a timeout) or a cancellation from elsewhere
    (which must go on).
    """

    __slots__ = ("_alarm", "_cancelling", "_expired", "_task", "timeout")

    def __init__(self, alarm: Alarm, timeout: float | None) -> None:
        task = asyncio.current_task()
        assert task is not None, "a request runs inside a task"
        self._alarm = alarm
        self._task = task
        self._cancelling = task.cancelling()
        self._expired = False
        self.timeout = timeout

    def start(self) -> None:
        """The task waits from now on, for at most the attempt's timeout (no bound when it is ``None``)."""
        if self.timeout is not None:
            alarm = self._alarm
            alarm.set(self, alarm.time() + self.timeout, self._expire)

    def start_for(self, seconds: float) -> None:
        """The task waits from now on, for at most ``seconds`` whatever the attempt's timeout."""
        alarm = self._alarm
        alarm.set(self, alarm.time() + seconds, self._expire)

    def stop(self) -> None:
        """The wait is over: its deadline is withdrawn."""
        self._alarm.clear(self)

    def expired(self) -> bool:
        """Called on a ``CancelledError``: whether this bound caused it. If so, the cancellation is withdrawn
        from the task (it must not cancel the next await) and the caller raises a timeout instead."""
        self._alarm.clear(self)
        if not self._expired:
            return False
        self._expired = False
        return self._task.uncancel() <= self._cancelling

    def _expire(self) -> None:
        self._expired = True
        self._task.cancel()
