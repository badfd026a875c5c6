"""``tether py [SCRIPT [ARG]...]`` in a terminal: Python's console with an assistant (:mod:`tether.cli.py_console`).

This is the terminal layer. The model and the configuration come from where ``tether chat`` takes them
(flags, ``TETHER_*``, ``./agent.toml`` or ``--config``, the user's config, else the model tether chooses); a
configuration that cannot be read exits with 1, but a model that cannot answer questions (none configured,
or one that cannot call tools natively) only turns questions off: the console starts, and asking says what
to set. The session is the process's ``__main__`` module, as in ``python -i``; a SCRIPT runs in it first,
with ``sys.argv`` = [SCRIPT, ARG...] and its directory first on ``sys.path``. In a terminal, prompt_toolkit
reads the lines (history in the XDG state directory, Ctrl-C clearing the line); otherwise they are read
plainly, the prompts going to stderr as Python's do.
"""

from __future__ import annotations

import os
import platform
import sys
import types
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from tether.cli import exits
from tether.cli.paths import py_history_path
from tether.cli.py_console import PyConsole, Questions, Reader
from tether.errors import ConfigInvalid

NO_TOOLS = (
    "{model} cannot call tools natively, and questions need that: choose a model that can with --model or "
    "runtime.model (tether config set runtime.model openai:gpt-4o-mini), or let it act through JSON in its "
    "text with --tool-mode json"
)


@dataclass(frozen=True, slots=True)
class PyOptions:
    """What ``tether py`` was given on its command line."""

    script: str | None = None
    args: tuple[str, ...] = ()
    """The script's own arguments (``sys.argv[1:]``)."""
    model: str | None = None
    config_file: str | None = None
    """``--config``: the file read instead of ``./agent.toml``."""
    no_eval: bool = False
    """``--no-eval``: the assistant only looks (no ``eval_expr``: nothing it asks for runs code)."""
    json_actions: bool = False
    """``--tool-mode json``: the model calls the session's functions through JSON actions in its text (a model
    without native tool calls, such as the embedded one, can then answer questions)."""


def main(options: PyOptions, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> int:
    """Run ``tether py`` and return its exit code."""
    env = os.environ if env is None else env
    try:
        questions, notices = open_questions(
            cwd or Path.cwd(), env, options.model, options.config_file, allow_eval=not options.no_eval,
            json_actions=options.json_actions,
        )  # fmt: skip
    except ConfigInvalid as error:
        sys.stderr.write(f"error: {error.message}\n")
        return exits.CONFIG
    namespace = main_namespace()
    console = PyConsole(namespace, questions=questions)
    for notice in notices:
        console.write(f"{notice}\n")
    if questions.assistant is None:
        console.write(f"questions are off: {questions.problem}\n")
    prepare_process(options.script, options.args)
    if options.script is not None:
        console.run_script(options.script)
    interactive = sys.stdin.isatty()
    read = prompt_reader(py_history_path(env)) if interactive else plain_reader(sys.stdin, sys.stderr)
    return console.session(read, banner(questions) if interactive else None, ends_lines=interactive)


def open_questions(
    cwd: Path,
    env: Mapping[str, str],
    model: str | None,
    config_file: str | None,
    *,
    allow_eval: bool = True,
    json_actions: bool = False,
) -> tuple[Questions, list[str]]:
    """The session's assistant, or why there is none, and what loading the configuration has to say.

    ``ConfigInvalid`` when the configuration cannot be read; a model that cannot serve is not an error here.
    """
    from tether.cli.build import with_model, with_server
    from tether.config import load, model_target
    from tether.providers.default_model import choose_model, embedded_notice

    loaded = load(cwd, env, {"runtime.model": model}, config_file=config_file)
    choice = choose_model(loaded.config.runtime.first_model, env)
    config = loaded.config
    if choice.model is not None and choice.base_url is not None:  # a local server found running
        config = with_server(config, choice.model, choice.base_url)
    notices = [f"notice: {notice}" for notice in loaded.notices]
    if choice.model is None:
        problem = (choice.problem or "no model").removeprefix("error: ")
        return Questions(None, problem), notices
    try:
        provider = model_target(with_model(config, choice.model), env).provider()
        if not provider.info.supports_tools and not json_actions:
            return Questions(None, NO_TOOLS.format(model=choice.model)), notices
        from tether.assistant import Assistant
        from tether.tools.python_runtime import RuntimeSettings

        notice = embedded_notice("the session's functions") if choice.read_only else choice.notice
        chosen = [notice] if notice else []  # which model, when tether picked it
        settings = RuntimeSettings(allow_eval=allow_eval)
        assistant = Assistant(provider, settings=settings, tool_mode="json" if json_actions else "native")
        return Questions(assistant, model=choice.model), notices + chosen
    except ConfigInvalid as error:  # an unknown provider, a missing key, a model the assistant refuses
        return Questions(None, error.message), notices


def banner(questions: Questions) -> str:
    """The first line: which Python, which model, and how to ask and leave; then, when the assistant may evaluate
    the model's code in the session, a second line saying so (and how to make it only look)."""
    python = f"Python {platform.python_version()}"
    if questions.assistant is None:
        return f"tether py · {python} · Ctrl-D leaves"
    line = f"tether py · {python} · {questions.model} · ?QUESTION asks about this session · Ctrl-D leaves"
    settings = getattr(questions.assistant, "settings", None)
    if settings is not None and not settings.allow_eval:
        return line
    return f"{line}\nthe assistant may run the model's Python code in this session (tether py --no-eval: it only looks)"


def main_namespace() -> MutableMapping[str, Any]:
    """A fresh ``__main__`` module's namespace, installed as ``sys.modules["__main__"]`` as ``python -i``
    has it, so classes defined in the session pickle and ``import __main__`` finds the session."""
    module = types.ModuleType("__main__")
    sys.modules["__main__"] = module
    return module.__dict__


def prepare_process(script: str | None, args: tuple[str, ...]) -> None:
    """``sys.argv`` and ``sys.path[0]`` as Python sets them: the script and its arguments and its directory,
    or ``[""]`` and the working directory."""
    sys.argv = [script, *args] if script is not None else [""]
    first = os.path.dirname(os.path.abspath(script)) if script is not None else ""
    if sys.path:
        sys.path[0] = first
    else:
        sys.path.append(first)


def prompt_reader(history_file: Path) -> Reader:
    """Lines from prompt_toolkit, with Emacs-style editing and the history kept in ``history_file``."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory

    history_file.parent.mkdir(parents=True, exist_ok=True)
    session: PromptSession[str] = PromptSession(history=FileHistory(str(history_file)))
    return session.prompt


def plain_reader(stdin: TextIO, prompts: TextIO) -> Reader:
    """Lines from a stdin that is not a terminal, each prompt written to ``prompts`` first."""

    def read(prompt: str) -> str:
        prompts.write(prompt)
        prompts.flush()
        line = stdin.readline()
        if not line:
            raise EOFError
        return line.rstrip("\r\n")

    return read
