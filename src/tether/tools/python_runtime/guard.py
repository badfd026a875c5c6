"""Running the user's code for a capability: with a deadline, and with its printing captured.

The contract
------------
* :func:`guarded` runs a function on the calling thread and returns its value with what it printed. It
  raises :class:`EvalTimeout` when the function passes its deadline, or what the function raised.
* The deadline: on the main thread (when ``SIGALRM`` exists and its handler can be restored) an interval
  timer raises :class:`EvalTimeout` in the running code, which also interrupts a blocking ``time.sleep`` or
  read. On any other thread (or without ``SIGALRM``) a watchdog thread raises it asynchronously
  (``PyThreadState_SetAsyncExc``), which takes effect at the next bytecode: a long call into C code runs to
  its end first. :class:`EvalTimeout` derives from ``BaseException`` so ``except Exception`` in the user's
  code does not swallow it. Either way the exception never escapes the guarded call: the timer is disarmed
  and the previous ``SIGALRM`` handler and timer restored (the timer re-armed with what was left of it), and
  a watchdog's exception that was not delivered when the function finished is withdrawn.
* Capture: while the function runs, ``sys.stdout`` and ``sys.stderr`` are replaced by routers that keep
  what the calling thread writes (up to a limit each, counting the rest) and pass every other thread's
  writes to the stream they replaced, so the REPL's own output and other threads' are untouched. Writes
  straight to the file descriptors (a subprocess, C code) are not captured.
"""

from __future__ import annotations

import ctypes
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any, TypeVar

from tether.tools.base import utf8_safe
from tether.tools.python_runtime.values import Bounded

T = TypeVar("T")


class EvalTimeout(BaseException):
    """Raised into the user's code when a capability passes its deadline."""


@dataclass(frozen=True, slots=True)
class Captured:
    """What the guarded code printed, each stream bounded."""

    stdout: Bounded
    stderr: Bounded


def guarded(function: Callable[[], T], *, timeout: float, max_output: int) -> tuple[T, Captured]:
    """``function()`` under the deadline with its output captured (see the module docstring)."""
    out = _Router(sys.stdout, max_output)
    err = _Router(sys.stderr, max_output)
    sys.stdout, sys.stderr = out, err
    try:
        value = with_deadline(function, timeout)
    finally:
        if sys.stdout is out:  # unless the code replaced the stream on purpose
            sys.stdout = out.target
        if sys.stderr is err:
            sys.stderr = err.target
    return value, Captured(out.bounded(), err.bounded())


def with_deadline(function: Callable[[], T], timeout: float) -> T:
    """``function()``, interrupted by :class:`EvalTimeout` after ``timeout`` seconds."""
    if _alarm_usable():
        return _with_alarm(function, timeout)
    return _with_watchdog(function, timeout)


# --- the main thread: SIGALRM ---------------------------------------------------------------------------------


class _Armed:
    __slots__ = ("active",)

    def __init__(self) -> None:
        self.active = True


def _alarm_usable() -> bool:
    return (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and signal.getsignal(signal.SIGALRM) is not None  # None: a handler not set from Python, not restorable
    )


def _with_alarm(function: Callable[[], T], timeout: float) -> T:
    armed = _Armed()

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        if armed.active:  # once only, and never after the function is done
            armed.active = False
            raise EvalTimeout

    previous = signal.signal(signal.SIGALRM, on_alarm)
    started = time.monotonic()
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        try:
            return function()
        finally:
            armed.active = False  # an alarm handled before this line raised already (and cleared the flag)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if old_delay > 0:  # someone else's timer: give it back what is left (at once, if it is past)
            left = max(old_delay - (time.monotonic() - started), 1e-6)
            signal.setitimer(signal.ITIMER_REAL, left, old_interval)


# --- any other thread: an asynchronous exception from a watchdog -------------------------------------------------


class _Watch:
    __slots__ = ("done", "finished", "fired", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.finished = False
        self.fired = False


def _with_watchdog(function: Callable[[], T], timeout: float) -> T:
    target = threading.get_ident()
    watch = _Watch()

    def watchdog() -> None:
        if watch.done.wait(timeout):
            return
        with watch.lock:
            if not watch.finished:
                watch.fired = True
                _async_raise(target, EvalTimeout)

    threading.Thread(target=watchdog, name="tether-eval-watchdog", daemon=True).start()
    try:
        try:
            return function()
        finally:
            with watch.lock:
                watch.finished = True
                if watch.fired:  # raised but not yet delivered: withdraw it (delivered: it is propagating)
                    _async_raise(target, None)
    finally:
        watch.done.set()


def _async_raise(thread_id: int, exception: type[BaseException] | None) -> None:
    """Raise ``exception`` in a thread at its next bytecode; ``None`` withdraws one not yet raised."""
    argument: Any = ctypes.py_object(exception) if exception is not None else None  # None is NULL here
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), argument)


# --- capture ------------------------------------------------------------------------------------------------------


class _Router:
    """Stands in for ``sys.stdout``/``sys.stderr``: the owner thread's writes are kept (bounded), every other
    thread's go to the stream it replaced."""

    def __init__(self, target: Any, limit: int) -> None:
        self.target = target
        self.owner = threading.get_ident()
        self.limit = limit
        self.parts: list[str] = []
        self.kept = 0
        self.total = 0

    def write(self, text: str) -> int:
        if threading.get_ident() != self.owner:
            return int(self.target.write(text)) if self.target is not None else len(text)
        text = str.__str__(text)  # what print() would refuse is refused here too
        self.total += len(text)
        room = self.limit - self.kept
        if room > 0:
            piece = text[:room]
            self.parts.append(piece)
            self.kept += len(piece)
        return len(text)

    def flush(self) -> None:
        if threading.get_ident() != self.owner and self.target is not None:
            self.target.flush()

    def isatty(self) -> bool:
        return False if threading.get_ident() == self.owner else bool(self.target and self.target.isatty())

    def bounded(self) -> Bounded:
        return Bounded(utf8_safe("".join(self.parts)), self.total > self.kept, self.total)

    def __getattr__(self, name: str) -> Any:  # encoding, errors, fileno, ...: the replaced stream's
        return getattr(self.target, name)
