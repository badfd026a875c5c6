"""The console of ``tether py``: Python's own interactive console, where a line can also ask the assistant.

Contract. :class:`PyConsole` is :class:`code.InteractiveConsole`: lines are pushed one at a time, an
incomplete statement waits for its continuation lines (``...``), expression values are shown by
``sys.displayhook``, tracebacks are written as Python writes them, and ``sys.last_type`` / ``last_value`` /
``last_traceback`` / ``last_exc`` are set when the user's code raises. At the primary prompt a line starting
with ``?``, ``%ask`` or ``/ask`` (none of them valid Python there) is a question instead: it goes to the
assistant with the console's namespace and the last exception the user's code raised, and the answer streams
as it comes (:class:`AnswerPrinter`). Ctrl-C during a question cancels the question, never the session;
Ctrl-C at a prompt drops the line (and a statement being continued), as Python's console does; end of input
(Ctrl-D) leaves with 0, and ``SystemExit`` raised by the user's code leaves with its code.

The console reads through a function ``read(prompt) -> line`` (which raises ``EOFError`` at the end and
``KeyboardInterrupt`` on Ctrl-C), so the terminal, a pipe and a test each give their own.
"""

from __future__ import annotations

import code
import sys
from collections.abc import Callable, MutableMapping
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from tether.assistant.printer import AnswerPrinter
from tether.errors import TetherError

if TYPE_CHECKING:
    from tether.events import RunEvent, RunResult

PS1 = ">>> "
PS2 = "... "
ASK_COMMANDS = ("%ask", "/ask")
HOW_TO_ASK = "ask with ?QUESTION (or %ask QUESTION), e.g. ?why did the last line fail"

Reader = Callable[[str], str]
"""``read(prompt)``: the next line without its newline; ``EOFError`` at the end, ``KeyboardInterrupt`` on Ctrl-C."""


class Asker(Protocol):
    """What the console asks: :class:`tether.assistant.Assistant` (its ``ask`` method)."""

    def ask(
        self,
        question: str,
        namespace: MutableMapping[str, Any],
        *,
        last_exception: BaseException | None = ...,
        on_event: Callable[[RunEvent], None] | None = None,
    ) -> RunResult: ...


def question_of(line: str) -> str | None:
    """The question a line asks (``""`` for a bare ``?``), or ``None`` when the line is Python."""
    text = line.strip()
    if text.startswith("?"):
        return text[1:].strip()
    for command in ASK_COMMANDS:
        head, _, rest = text.partition(" ")
        if head == command:
            return rest.strip()
    return None


class Questions:
    """The session's assistant, or why there is none (``problem``: what to set); asks and shows the answer."""

    def __init__(self, assistant: Asker | None, problem: str | None = None, *, model: str = "") -> None:
        self.assistant = assistant
        self.problem = problem
        self.model = model
        """The model's ``provider:model`` string, for the banner."""

    def ask(
        self,
        question: str,
        namespace: MutableMapping[str, Any],
        last_exception: BaseException | None,
        out: TextIO,
        err: TextIO,
    ) -> RunResult | None:
        """Ask ``question`` about the session and show the answer as it streams; ``None`` when nothing ran.

        Ctrl-C while it runs ends the question (the assistant returns a cancelled result; an interrupt that
        arrives around it is caught here), never the session.
        """
        if self.assistant is None:
            err.write(f"questions are off: {self.problem or 'no assistant'}\n")
            return None
        if not question:
            err.write(HOW_TO_ASK + "\n")
            return None
        printer = AnswerPrinter(out, calls=err, notes=err)
        try:
            result = self.assistant.ask(question, namespace, last_exception=last_exception, on_event=printer)
        except KeyboardInterrupt:
            printer.end_line()
            err.write("[cancelled]\n")
            return None
        except TetherError as error:
            printer.end_line()
            err.write(f"error: {error.message}\n")
            return None
        printer.finish(result)
        return result


class PyConsole(code.InteractiveConsole):
    """Python's interactive console over ``namespace``, with questions (see the module docstring)."""

    def __init__(
        self,
        namespace: MutableMapping[str, Any] | None = None,
        *,
        questions: Questions,
        out: TextIO | None = None,
        err: TextIO | None = None,
    ) -> None:
        namespace = {"__name__": "__main__", "__doc__": None} if namespace is None else namespace
        super().__init__(namespace, filename="<stdin>")  # type: ignore[arg-type]  # typeshed: dict; any mapping works
        self.namespace = namespace
        self.questions = questions
        self._out = out
        self._err = err
        self.last_exception: BaseException | None = None
        """The last exception the user's code raised (syntax errors included), as ``sys.last_value``."""

    @property
    def out(self) -> TextIO:
        return self._out or sys.stdout

    @property
    def err(self) -> TextIO:
        return self._err or sys.stderr

    def write(self, data: str) -> None:
        """Tracebacks and the console's own messages, on stderr as Python's console writes them."""
        self.err.write(data)
        self.err.flush()

    def showtraceback(self) -> None:
        super().showtraceback()
        self._remember()

    def showsyntaxerror(self, filename: str | None = None, **kwargs: Any) -> None:
        super().showsyntaxerror(filename, **kwargs)
        self._remember()

    def _remember(self) -> None:
        """Keep the exception just shown; ``sys.last_exc`` too (Python 3.12 sets it, 3.11 does not)."""
        self.last_exception = sys.last_value
        sys.last_exc = sys.last_value  # type: ignore[attr-defined, unused-ignore]

    def push(self, line: str, *args: Any, **kwargs: Any) -> bool:
        """A question at the primary prompt goes to the assistant; anything else to Python."""
        question = question_of(line) if not self.buffer else None
        if question is None:
            return bool(super().push(line, *args, **kwargs))
        self.questions.ask(question, self.namespace, self.last_exception, self.out, self.err)
        return False

    def run_script(self, path: str) -> None:
        """Run the file at ``path`` in the namespace as ``python -i`` does: its traceback (``SystemExit``
        included) is shown and becomes the last exception; the session goes on either way."""
        self.namespace["__file__"] = path
        try:
            with open(path, "rb") as file:
                source = file.read()
            compiled = compile(source, path, "exec")
        except SyntaxError:
            self.showsyntaxerror()
            return
        except OSError as error:
            self.write(f"can't open file {path!r}: {error}\n")
            return
        try:
            self.runcode(compiled)
        except SystemExit:
            self.showtraceback()

    def session(self, read: Reader, banner: str | None = None, *, ends_lines: bool = False) -> int:
        """Read, run and ask until the input ends (0) or the user's code raises ``SystemExit`` (its code).

        ``ends_lines``: ``read`` ends the line itself on Ctrl-C and Ctrl-D (prompt_toolkit does), so the
        console does not add a line break as it does after a plain read.
        """
        if banner:
            self.write(banner + "\n")
        more = False
        newline = "" if ends_lines else "\n"
        while True:
            try:
                line = read(PS2 if more else PS1)
            except EOFError:
                self.write(newline)
                return 0
            except KeyboardInterrupt:  # at the prompt: drop the line, and the statement it continued
                self.write(f"{newline}KeyboardInterrupt\n")
                self.resetbuffer()
                more = False
                continue
            try:
                more = self.push(line)
            except SystemExit as leaving:
                return exit_code(leaving, self.err)
            except KeyboardInterrupt:  # between two parts of Python's own handling of a line
                self.write("\nKeyboardInterrupt\n")
                self.resetbuffer()
                more = False


def exit_code(leaving: SystemExit, err: TextIO) -> int:
    """The exit status ``SystemExit`` asks for, as Python's interpreter maps it (a message: printed, 1)."""
    value = leaving.code
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    err.write(f"{value}\n")
    return 1
