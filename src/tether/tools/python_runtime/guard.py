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
  a watchdog's exception that was not delivered when the function finished is withdrawn. The interrupt is
  raised again every :data:`REFIRE` seconds until the code is done, so code that swallows one (a ``__repr__``
  with a bare ``except``) is interrupted by the next.
* The process: while the function runs, ``os._exit``, ``os.abort`` and the calls that send this process a
  signal (``os.kill``, ``os.killpg``, ``signal.raise_signal`` aimed at it) raise :class:`ProcessExitRefused`
  instead, and ``sys.exit`` raises ``SystemExit`` as always, which the caller reports: the user's session
  survives the code it is shown. A thread the code starts and leaves running is named by :func:`started_threads`
  (Python cannot stop one).
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


REFIRE = 0.05
"""Seconds between the interrupts raised once the deadline has passed."""


class ProcessExitRefused(RuntimeError):
    """The guarded code asked to end or signal the process; refused, and reported as its failure."""


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
        with _ProcessGuard():
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
        if armed.active:  # never after the function is done; again at every REFIRE until then
            raise EvalTimeout

    previous = signal.signal(signal.SIGALRM, on_alarm)
    started = time.monotonic()
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, timeout, REFIRE)
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
        wait = timeout
        while not watch.done.wait(wait):
            with watch.lock:
                if watch.finished:
                    return
                watch.fired = True
                _async_raise(target, EvalTimeout)
            wait = REFIRE

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


# --- the process ----------------------------------------------------------------------------------------------------


class _ProcessGuard:
    """While the guarded code runs, the calls that would end or signal this process raise instead."""

    def __enter__(self) -> None:
        import os

        pid = os.getpid()

        def refuse(what: str) -> Callable[..., Any]:
            def refused(*args: Any, **kwargs: Any) -> Any:
                raise ProcessExitRefused(f"{what} was refused: the code runs inside your session, which it may not end")

            return refused

        def aimed(real: Callable[..., Any], what: str, is_mine: Callable[[Any], bool]) -> Callable[..., Any]:
            def maybe(target: Any, *args: Any) -> Any:
                if is_mine(target):
                    raise ProcessExitRefused(f"{what} aimed at this process was refused")
                return real(target, *args)

            return maybe

        replacements: list[tuple[Any, str, Callable[..., Any]]] = [
            (os, "_exit", refuse("os._exit()")),
            (os, "abort", refuse("os.abort()")),
            (os, "kill", aimed(os.kill, "os.kill()", lambda target: target in (pid, 0, -1))),
            (os, "killpg", aimed(os.killpg, "os.killpg()", lambda group: group in (0, os.getpgrp()))),
            (signal, "raise_signal", refuse("signal.raise_signal()")),
        ]
        self._saved = [(module, name, getattr(module, name)) for module, name, _ in replacements]
        for module, name, replacement in replacements:
            setattr(module, name, replacement)

    def __exit__(self, *exc: object) -> None:
        for module, name, original in self._saved:
            setattr(module, name, original)


def started_threads(before: set[threading.Thread]) -> list[str]:
    """The names of the threads alive now that were not in ``before`` and would hold the interpreter's exit
    (not daemons): what the code left running."""
    return sorted(t.name for t in threading.enumerate() if t not in before and t.is_alive() and not t.daemon)


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
