"""``tether chat`` in a terminal: prompt_toolkit reads the lines, :class:`~tether.cli.repl.Chat` does the rest.

This is the thin terminal layer: a prompt with history (``FileHistory`` in the XDG state directory) and
multi-line input (Esc then Enter, or a line ending in ``\\``), Ctrl-C at the prompt clearing the line and
Ctrl-D leaving, and while a turn runs a SIGINT handler that cancels just that turn. Text typed during a turn is
not taken as the answer to an approval question; the next prompt starts with it (``terminal.py``). When stdin is not a
terminal the lines are read plainly, one prompt per line, and tools that change things are refused unless
``--yes``. Approvals are asked inline in a terminal; what still pauses a turn (an external tool's call; with no
terminal, a Python agent's approval) is decided with ``/approve``, ``/deny`` and ``/result`` (``repl.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from tether.cli import eventloop, exits
from tether.cli.build import (
    NoModel,
    Setup,
    agent_flags,
    cache_flags,
    close_store,
    compaction_flags,
    config_problem,
    load_python_setup,
    load_setup,
    mcp_tools,
    pick_session,
    session_flags,
)
from tether.cli.otlp import otlp_export
from tether.cli.paths import history_path
from tether.cli.render import Renderer, make_console
from tether.cli.repl import Chat
from tether.cli.terminal import Interrupts, TypeAhead, terminal_approver
from tether.errors import ConfigInvalid, TetherError

if TYPE_CHECKING:
    from prompt_toolkit.key_binding import KeyBindings

    from tether.agent import Agent

PROMPT = "tether> "
CONTINUATION = "...     "


@dataclass(frozen=True, slots=True)
class ChatOptions:
    model: str | None = None
    session: str | None = None
    continue_last: bool = False
    yes: bool = False
    mode: str | None = None
    config_file: str | None = None
    """``--config``: the file read instead of ``./agent.toml``."""
    no_compact: bool = False
    """``--no-compact``: ``compaction.enabled = false`` for this chat."""
    context_window: int | None = None
    """``--context-window N``: ``compaction.context_window``."""
    system: str | None = None
    """``--system``: ``agent.instructions`` (a file's text already read, for ``@FILE``)."""
    no_agents_md: bool = False
    """``--no-agents-md``: ``agent.agents_md = false``."""
    no_discover_skills: bool = False
    """``--no-discover-skills``: ``agent.discover_skills = false``."""
    record_exchanges: bool = False
    """``--record-exchanges``: ``session.record_exchanges = true``."""
    cache: str | None = None
    """``--cache`` (``""``: the configured or default file) or ``--cache-path PATH``: ``[cache]`` on."""
    agent: str | None = None
    """``--agent MODULE:ATTR``: chat with that Python agent instead of the configured one (``/model`` cannot
    change its model; ``/mode`` and ``--mode`` set its tool mode)."""

    def flags(self) -> dict[str, object]:
        """The configuration keys the flags set (``None``: not given)."""
        return {
            "runtime.model": self.model,
            "tools.mode": self.mode,
            **compaction_flags(no_compact=self.no_compact, context_window=self.context_window),
            **agent_flags(
                system=self.system, no_agents_md=self.no_agents_md, no_discover_skills=self.no_discover_skills
            ),
            **session_flags(record_exchanges=self.record_exchanges),
            **cache_flags(self.cache),
        }


def main(options: ChatOptions, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> int:
    """Run ``tether chat`` and return its exit code."""
    env = os.environ if env is None else env
    console = make_console()
    cwd = cwd or Path.cwd()
    try:
        if options.agent is not None:
            setup = load_python_setup(options.agent, cwd, env, options.config_file)
        else:
            setup = load_setup(cwd, env, options.flags(), options.config_file)
    except (ConfigInvalid, NoModel) as error:
        make_console(stderr=True).print(Text(config_problem(error), style="red"))
        return exits.CONFIG
    for notice in setup.notices:
        make_console(stderr=True).print(Text(f"notice: {notice}", style="yellow"))
    if chosen := setup.notice(yes=options.yes):
        console.print(Text(chosen, style="dim"))
    with otlp_export(env, make_console(stderr=True)) as telemetry:
        if telemetry is not None:
            setup = dataclasses.replace(setup, telemetry=telemetry)
        return eventloop.run(_connected(setup, options, console, env), env)


async def _connected(setup: Setup, options: ChatOptions, console: Console, env: Mapping[str, str]) -> int:
    """The chat with the MCP servers connected for its whole length."""
    try:
        async with mcp_tools(setup) as connected:
            return await _chat(connected, options, console, env)
    except TetherError as error:
        console.print(Text(f"error: {error.message}", style="red"))
        await close_store(setup.store)
        return exits.CONFIG if isinstance(error, ConfigInvalid) else exits.ERROR


async def _chat(setup: Setup, options: ChatOptions, console: Console, env: Mapping[str, str]) -> int:
    interactive = sys.stdin.isatty()
    renderer = Renderer(console, thinking=True, spinner=True)
    typed = TypeAhead()  # what was typed ahead of an approval question, shown again at the next prompt
    approve = terminal_approver(console, renderer, typed) if interactive else None

    listed = isinstance(setup.config.runtime.model, list)

    def build(model: str, mode: str) -> Agent:
        """The agent on ``model``; on the configured one, a fallback's whole list (``--model a,b`` included)."""
        whole = listed and model == setup.model
        return setup.agent(
            model=None if whole else model, mode=mode, yes=options.yes, interactive=interactive, approve=approve
        )

    try:
        session_id, note = await pick_session(setup.store, options.session, options.continue_last)
        chat = Chat(
            build,
            setup.store,
            renderer,
            model=setup.model,
            mode=options.mode or setup.tool_mode(setup.model, yes=options.yes),  # the embedded model's rule
            session_id=session_id,
            deny=setup.config.tools.deny if setup.python is None else (),
            yes=options.yes,
            settings=setup.settings,
            own_permissions=setup.python is not None,
        )
    except TetherError as error:
        console.print(Text(f"error: {error.message}", style="red"))
        await close_store(setup.store)
        return exits.CONFIG if isinstance(error, ConfigInvalid) else exits.ERROR
    try:
        if note:
            chat.say(note)
        chat.say(chat.banner())
        if options.session or options.continue_last:
            await chat.handle(f"/resume {session_id}")
        if interactive:
            await prompt_loop(chat, history_path(env), typed)
        else:
            await plain_loop(chat)
    finally:
        await close_store(setup.store)
    return exits.OK


async def turn(chat: Chat, line: str) -> bool:
    """Handle one line with Ctrl-C cancelling the turn it starts; ``False`` when the chat is over."""
    interrupts = Interrupts(chat.cancel).install()
    try:
        return await chat.handle(line)
    finally:
        interrupts.remove()


def key_bindings() -> KeyBindings:
    """Enter sends; Esc then Enter, or Enter after a trailing backslash, starts a new line."""
    from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

    bindings = KeyBindings()

    @bindings.add("enter")
    def _enter(event: KeyPressEvent) -> None:
        buffer = event.current_buffer
        if buffer.document.text_before_cursor.endswith("\\"):
            buffer.delete_before_cursor(1)
            buffer.insert_text("\n")
        else:
            buffer.validate_and_handle()

    @bindings.add("escape", "enter")
    def _newline(event: KeyPressEvent) -> None:
        event.current_buffer.insert_text("\n")

    return bindings


async def prompt_loop(chat: Chat, history_file: Path, typed: TypeAhead | None = None) -> None:
    """Read lines with prompt_toolkit until /exit or Ctrl-D; a prompt starts with what was typed ahead of an
    approval question in the turn before (``typed``), for the user to send or change."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory

    history_file.parent.mkdir(parents=True, exist_ok=True)
    session: PromptSession[str] = PromptSession(
        history=FileHistory(str(history_file)),
        key_bindings=key_bindings(),
        multiline=True,
        prompt_continuation=CONTINUATION,
    )
    while True:
        try:
            line = await session.prompt_async(PROMPT, default=typed.take() if typed is not None else "")
        except KeyboardInterrupt:  # Ctrl-C at the prompt: the line is dropped, ask again
            continue
        except EOFError:  # Ctrl-D
            break
        if not await turn(chat, line):
            break


async def plain_loop(chat: Chat) -> None:
    """Read lines from a stdin that is not a terminal, one input per line, until it ends or /exit."""
    while True:
        line = await asyncio.to_thread(sys.stdin.readline)
        if not line:
            break
        if not await turn(chat, line):
            break
