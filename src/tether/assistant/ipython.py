"""The IPython extension: ``%load_ext tether`` gives ``%ask`` and ``%%ask`` over the shell's user namespace.

The contract:

- ``%ask QUESTION`` (a line) and ``%%ask`` (a cell, which is the whole question) ask the shell's assistant
  about ``shell.user_ns``, with the last exception IPython recorded, the one ``%tb`` shows (``sys.last_value``).
- The answer streams to the output as it comes, each function the assistant calls on a short line before it;
  nothing is returned, so nothing lands in ``Out``. The whole :class:`~tether.events.RunResult` is kept as
  ``AskMagics.last_result``.
- Ctrl-C cancels the question, never the shell, and the last exception stays the user's own. So do the
  magic's own errors (an unknown option, a model that cannot be used): they are printed with their code,
  never raised, since IPython would record a raised one as the last exception.
- The model: ``%config AskMagics.model = "provider:model"`` (a string, or a ``Provider`` object) for the shell,
  ``%ask --model provider:model ...`` for one question, else ``TETHER_MODEL`` or the command line's choice.
  One :class:`~tether.assistant.Assistant` per model and setting, made on first use and kept.
- In Jupyter the kernel's event loop is already running on the shell's thread. ``Assistant.ask`` runs the
  agent loop on a worker thread and serves the functions' calls and the run's events on this one, so the
  magic needs no loop of its own and the streamed text is written by the cell that asked, into that cell.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from IPython.core.magic import Magics, line_cell_magic, magics_class
from traitlets import Any as AnyTrait
from traitlets import Bool, Enum, observe

from tether.assistant.printer import AnswerPrinter
from tether.errors import ConfigInvalid, TetherError
from tether.events import RunResult

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.utils.bunch import Bunch

    from tether.assistant import Assistant

__all__ = ["AskMagics", "load_ipython_extension", "unload_ipython_extension"]

_USAGE = "usage: %ask [-m MODEL | --model MODEL] [--no-eval] [--] QUESTION  (or %%ask [options], the cell the question)"
_ASK_LINE = re.compile(r"(?P<indent>[ \t]*)%ask(?=\s|$)(?P<rest>[^\r\n]*)(?P<end>\r?\n?)\Z")


@dataclass(frozen=True, slots=True)
class Options:
    """What one ``%ask`` line asked for: a model for this question, eval turned off, and the question."""

    model: str | None
    no_eval: bool
    question: str


def parse_line(line: str) -> Options:
    """Split the leading options off ``line``; the rest is the question, verbatim (quotes and all)."""
    model: str | None = None
    no_eval = False
    rest = line.strip()
    while rest.startswith("-"):
        word, _, tail = rest.partition(" ")
        tail = tail.lstrip()
        if word == "--":
            rest = tail
            break
        if word == "--no-eval":
            no_eval = True
        elif word in ("-m", "--model"):
            model, _, tail = tail.partition(" ")
            if not model:
                raise ConfigInvalid(f"{word} needs a model, as provider:model; {_USAGE}")
        elif word.startswith("--model="):
            model = word.removeprefix("--model=")
        else:
            raise ConfigInvalid(f"unknown option {word!r}; {_USAGE}")
        rest = tail.lstrip()
    return Options(model, no_eval, rest)


@magics_class
class AskMagics(Magics):
    """``%ask`` and ``%%ask``: questions about the live session, answered by inspecting it.

    Settings (``%config AskMagics.<name> = value``): ``model``, ``allow_eval``, ``tool_mode``, ``show_calls``.
    """

    model = AnyTrait(
        None,
        allow_none=True,
        help="The model: 'provider:model' or a Provider object; None: TETHER_MODEL, else the command line's choice.",
    ).tag(config=True)
    allow_eval = Bool(True, help="Let the assistant evaluate expressions; False offers only read-only functions.").tag(
        config=True
    )
    tool_mode = Enum(
        ["native", "json"], "native", help="'json': the text protocol, for a model that cannot call tools natively."
    ).tag(config=True)
    show_calls = Bool(True, help="Print each function the assistant calls before its answer.").tag(config=True)

    def __init__(self, shell: InteractiveShell | None = None, **kwargs: Any) -> None:
        self.assistants: dict[tuple[Hashable, bool, str], Assistant] = {}
        """The assistants made so far, by model, eval and tool mode; one per setting, kept for the shell."""
        self.last_result: RunResult | None = None
        """The last question's whole result (transcript, usage, stop reason)."""
        super().__init__(shell=shell, **kwargs)  # after: the shell's config may set a trait, which observers see

    @observe("model", "allow_eval", "tool_mode")
    def _settings_changed(self, change: Bunch) -> None:
        """A new setting applies from the next question on; assistants of settings no longer in use go."""
        self.assistants.clear()

    @line_cell_magic
    def ask(self, line: str, cell: str | None = None) -> None:
        """Ask the assistant about this session: ``%ask why did that fail?``, or ``%%ask`` with the question
        as the cell. Options: ``-m/--model provider:model`` (this question's model), ``--no-eval`` (read-only
        functions only). Settings: ``%config AskMagics`` lists them."""
        try:
            options = parse_line(line)
            question = options.question if cell is None else cell.strip()
            if cell is not None and options.question:
                raise ConfigInvalid(f"%%ask takes options on its first line and the question in the cell; {_USAGE}")
            if not question:
                raise ConfigInvalid(f"a question is needed; {_USAGE}")
            assistant = self.assistant_for(options)
        except TetherError as error:
            print(f"%ask: {error}", file=sys.stderr)
            return
        self.run_question(assistant, question)

    def assistant_for(self, options: Options) -> Assistant:
        """The kept assistant for this question's model and settings, made the first time they are used."""
        from tether.assistant import Assistant
        from tether.tools.python_runtime import RuntimeSettings

        model = options.model if options.model is not None else self.model
        allow_eval = self.allow_eval and not options.no_eval
        key = (model if model is None or isinstance(model, str) else id(model), allow_eval, str(self.tool_mode))
        assistant = self.assistants.get(key)
        if assistant is None:
            settings = RuntimeSettings(allow_eval=allow_eval)
            tool_mode: Literal["native", "json"] = "json" if self.tool_mode == "json" else "native"
            assistant = Assistant(model, settings=settings, tool_mode=tool_mode)
            self.assistants[key] = assistant
        return assistant

    def run_question(self, assistant: Assistant, question: str) -> None:
        """Ask and stream the answer; a Ctrl-C cancels the question and keeps the session's last exception."""
        assert self.shell is not None
        printer = AnswerPrinter(sys.stdout, calls=sys.stdout if self.show_calls else None)
        last = last_exception()
        try:
            result = assistant.ask(question, self.shell.user_ns, last_exception=last, on_event=printer)
        except KeyboardInterrupt:
            printer.note("[cancelled] the question was interrupted")
            return
        except TetherError as error:
            printer.end_line()
            print(f"%ask: {error}", file=sys.stderr)
            return
        self.last_result = result
        printer.finish(result)


def last_exception() -> BaseException | None:
    """The exception IPython last showed a traceback for: what ``%tb`` prints."""
    value = getattr(sys, "last_value", None)
    return value if isinstance(value, BaseException) else None


def ask_lines(lines: list[str]) -> list[str]:
    """Turn each ``%ask`` line of a cell into the call IPython would make of it, before IPython reads a line
    that ends in ``?`` as a request for help on its last word (``%ask why did it fail?`` is not ``fail?``)."""
    if lines and lines[0].lstrip().startswith("%%"):
        return lines  # a cell magic's cell is its own
    changed = []
    for line in lines:
        match = _ASK_LINE.match(line)
        if match is not None:
            indent, rest, end = match.group("indent", "rest", "end")
            line = f"{indent}get_ipython().run_line_magic('ask', {rest.strip()!r}){end}"
        changed.append(line)
    return changed


def load_ipython_extension(ipython: InteractiveShell) -> None:
    """Register ``%ask`` and ``%%ask`` on ``ipython`` (``%load_ext tether``), and keep ``%ask`` lines whole."""
    ipython.register_magics(AskMagics)
    if ask_lines not in ipython.input_transformers_cleanup:
        ipython.input_transformers_cleanup.append(ask_lines)


def unload_ipython_extension(ipython: InteractiveShell) -> None:
    """Take ``%ask`` and ``%%ask`` away again, with the assistants they kept (``%unload_ext tether``)."""
    manager = ipython.magics_manager
    manager.magics["line"].pop("ask", None)
    manager.magics["cell"].pop("ask", None)
    manager.registry.pop("AskMagics", None)
    if ask_lines in ipython.input_transformers_cleanup:
        ipython.input_transformers_cleanup.remove(ask_lines)
