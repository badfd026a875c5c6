"""The thin terminal layer shared by ``tether run`` and ``tether chat``: asking yes/no, Ctrl-C while a run goes.

:func:`read_line` reads a line from stdin without a thread (the event loop watches the file descriptor), so a
question can be abandoned at once when the run is cancelled. :class:`Interrupts` turns Ctrl-C (SIGINT) into
``RunStream.cancel()``: the run ends cleanly as ``cancelled``, its transcript valid and its session saved.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
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


def terminal_approver(console: Console, renderer: Renderer | None = None) -> Approver:
    """Asks ``Allow write(path='x')? [y/N]`` on ``console`` and reads the answer from stdin."""

    async def approve(call: ToolCall, reason: str) -> bool:
        if renderer is not None:
            renderer.stop_spinner()
            renderer.end_lines()
        shown = describe_call(call, redaction=renderer.redaction if renderer is not None else None)
        console.print(Text(f"Allow {shown}? [y/N] ", style="bold yellow"), end="")
        answer = await read_line()
        if answer is None:
            console.print()
        return is_yes(answer)

    return approve


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
