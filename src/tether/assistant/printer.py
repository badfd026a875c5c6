"""How a question's run is shown as it goes, in ``tether py`` and in IPython: one printer for both.

The answer's text is written as it streams; each capability call gets a line (``  → get_repr(expr='df')``) on
the ``calls`` stream, if there is one (a terminal puts them on stderr, a notebook on the cell's output: it
shows stderr as an error); at the end, an answer the loop wrote (after a limit or a cancel) is printed if it
did not stream, and a question that ended without one says why, on ``notes``.
"""

from __future__ import annotations

from typing import TextIO

from tether.events import RunEvent, RunResult, TextDelta, ToolCallStarted, TurnStarted
from tether.messages import ToolCall

SHOWN_ARGUMENTS = 80
"""Characters of a call's arguments shown on its line."""


def describe_call(call: ToolCall, limit: int = SHOWN_ARGUMENTS) -> str:
    """``get_repr(expr='df')``: a call as a person reads it, its arguments cut to ``limit`` characters."""
    if call.arguments is None:  # not a JSON object: shown as the model wrote it
        arguments = call.raw_arguments or ""
    else:
        arguments = ", ".join(f"{key}={value!r}" for key, value in call.arguments.items())
    if len(arguments) > limit:
        arguments = arguments[: limit - 1] + "…"
    return f"{call.name}({arguments})"


class AnswerPrinter:
    """An ``on_event`` sink for ``Assistant.ask`` (see the module docstring); :meth:`finish` closes it."""

    def __init__(self, out: TextIO, calls: TextIO | None = None, notes: TextIO | None = None) -> None:
        self.out = out
        self.calls = calls
        self.notes = notes if notes is not None else out
        self.streamed: list[str] = []
        """The text streamed so far; the answer is its end, unless the loop wrote one that did not stream."""
        self._open = False

    def __call__(self, event: RunEvent) -> None:
        if isinstance(event, TextDelta) and event.text:
            self.streamed.append(event.text)
            self.write(event.text)
        elif isinstance(event, ToolCallStarted) and self.calls is not None:
            self.end_line()
            self.calls.write(f"  → {describe_call(event.call)}\n")
            self.calls.flush()
        elif isinstance(event, TurnStarted) and (event.attempt > 1 or event.final):
            self.end_line()

    def write(self, text: str) -> None:
        """Write and flush ``text`` on ``out``: a terminal or a kernel shows it at once."""
        self.out.write(text)
        self.out.flush()
        self._open = not text.endswith("\n")

    def end_line(self) -> None:
        """Close the line the streamed text left open, so that what follows starts on its own."""
        if self._open:
            self.write("\n")

    def note(self, text: str) -> None:
        """``text`` on a line of its own on ``notes``."""
        self.end_line()
        self.notes.write(text + "\n")
        self.notes.flush()

    def finish(self, result: RunResult) -> None:
        """Print the answer if it did not stream; without an answer, say why the question ended. (An answer
        the assistant wrote after a limit or a cancel states the limitation itself.)"""
        self.end_line()
        answer = result.text.strip()
        if answer and not "".join(self.streamed).rstrip().endswith(answer):
            self.write(answer + "\n")
        elif not answer and result.stop_reason != "complete":
            reason, detail = str(result.stop_reason), result.detail.strip()
            self.note(f"[{reason}] {detail}" if detail and detail != reason else f"[{reason}]")
