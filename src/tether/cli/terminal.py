"""The thin terminal layer shared by ``tether run`` and ``tether chat``: asking yes/no, Ctrl-C while a run goes.

:func:`read_line` reads a line from stdin without a thread (the event loop watches the file descriptor), so a
question can be abandoned at once when the run is cancelled. :class:`Interrupts` turns Ctrl-C (SIGINT) into
``RunStream.cancel()``: the run ends cleanly as ``cancelled``, its transcript valid and its session saved.

Keys typed while a run goes wait in the terminal's input queue, and the first line read after them would be
taken for the answer to the next question: a ``y`` meant for something else would allow a write. So before it
asks, the approver takes what was typed ahead out of the queue (:func:`typed_ahead`): the question waits for an
answer typed after it. What was taken is not lost silently: the chat keeps it for its next prompt
(:class:`TypeAhead`), ``tether run`` says it was ignored.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import sys
import termios
from collections.abc import Callable

from rich.console import Console
from rich.text import Text

from tether.cli.render import Renderer, describe_call
from tether.messages import ToolCall
from tether.tools.permissions import Approver


async def read_line(fd: int | None = None) -> str | None:
    """One line typed on the terminal (``fd``: stdin), ``None`` at end of input."""
    loop = asyncio.get_running_loop()
    fd = sys.stdin.fileno() if fd is None else fd
    future: asyncio.Future[bytes] = loop.create_future()

    def readable() -> None:
        try:
            data = os.read(fd, 4096)
        except BlockingIOError:
            return
        if not future.done():
            future.set_result(data)

    loop.add_reader(fd, readable)
    try:
        data = await future
    finally:
        loop.remove_reader(fd)
    return data.decode(errors="replace") if data else None


def is_yes(answer: str | None) -> bool:
    return answer is not None and answer.strip().lower() in ("y", "yes")


def typed_ahead(fd: int | None = None) -> str:
    """What was typed on the terminal ``fd`` (stdin) and not read yet, whole lines and a line still being typed,
    taken out of its input queue; ``""`` when ``fd`` is no terminal.

    In the terminal's line mode a line being typed cannot be read, only thrown away; so line mode (and echo) is
    switched off for as long as it takes to read what is queued without waiting, which hands over the partial line
    too, then put back as it was. What may arrive in between is flushed (``TCIFLUSH``): none of it answers a
    question asked next."""
    fd = sys.stdin.fileno() if fd is None else fd
    try:
        saved = termios.tcgetattr(fd)
    except termios.error:
        return ""
    quiet = list(saved)
    quiet[3] &= ~(termios.ICANON | termios.ECHO)
    quiet[6] = list(saved[6])
    quiet[6][termios.VMIN], quiet[6][termios.VTIME] = 0, 0
    chunks: list[bytes] = []
    try:
        termios.tcsetattr(fd, termios.TCSANOW, quiet)
        while select.select([fd], [], [], 0)[0]:
            try:
                data = os.read(fd, 4096)
            except BlockingIOError:
                break
            if not data:
                break
            chunks.append(data)
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, saved)
        termios.tcflush(fd, termios.TCIFLUSH)
    return b"".join(chunks).decode(errors="replace")


class TypeAhead:
    """Text typed before a question and taken out of the way of its answer, kept for the chat's next prompt."""

    def __init__(self) -> None:
        self._kept: list[str] = []

    def keep(self, text: str) -> None:
        self._kept.append(text)

    def take(self) -> str:
        """What was kept (its last line break aside: the prompt shows it, Enter sends it), and forget it."""
        text = "".join(self._kept).rstrip("\r\n")
        self._kept.clear()
        return text


def terminal_approver(console: Console, renderer: Renderer | None = None, typed: TypeAhead | None = None) -> Approver:
    """Asks ``Allow write(path='x')? [y/N]`` on ``console`` and reads the answer from stdin, typed after the
    question: what was typed before it is kept in ``typed`` (the chat's next prompt shows it), or, without one,
    said to be ignored (the module docstring)."""

    async def approve(call: ToolCall, reason: str) -> bool:
        if renderer is not None:
            renderer.stop_spinner()
            renderer.end_lines()
        if ahead := typed_ahead():
            _set_aside(console, ahead, typed)
        shown = describe_call(call, redaction=renderer.redaction if renderer is not None else None)
        console.print(Text(f"Allow {shown}? [y/N] ", style="bold yellow"), end="")
        answer = await read_line()
        if answer is None:
            console.print()
        return is_yes(answer)

    return approve


def _set_aside(console: Console, ahead: str, typed: TypeAhead | None) -> None:
    """Say what became of text typed before a question: kept for the next prompt, or ignored."""
    if not ahead.strip():
        return
    if typed is not None:
        typed.keep(ahead)
        console.print(Text("(what you typed before this question is kept for your next message)", style="dim"))
        return
    shown = " ".join(ahead.split())
    shown = shown if len(shown) <= 40 else shown[:39] + "…"
    console.print(Text(f"(typed before this question, so not taken as its answer: {shown!r})", style="dim"))


class Interrupts:
    """While installed, Ctrl-C calls ``on_first`` the first time (cancel the run) and ``on_again`` after."""

    def __init__(self, on_first: Callable[[], object], on_again: Callable[[], object] | None = None) -> None:
        self.on_first = on_first
        self.on_again = on_again
        self.count = 0
        self._loop: asyncio.AbstractEventLoop | None = None

    def _handle(self) -> None:
        self.count += 1
        if self.count == 1 or self.on_again is None:
            self.on_first()
        else:
            self.on_again()

    def install(self) -> Interrupts:
        self._loop = asyncio.get_running_loop()
        self._loop.add_signal_handler(signal.SIGINT, self._handle)
        return self

    def remove(self) -> None:
        if self._loop is not None:
            self._loop.remove_signal_handler(signal.SIGINT)
            self._loop = None
