"""``tether run``: one prompt, one run, streamed to the terminal (or printed as JSON), saved as a session.

``cli.stream = false`` prints each answer whole once the model has finished writing it, instead of as it comes.

Ctrl-C cancels the run through ``RunStream.cancel()``: it ends as ``cancelled`` (exit 130) with a valid
transcript, saved. A second Ctrl-C stops waiting for that and exits at once (the session keeps what its last
checkpoint saved). Exit codes: :mod:`tether.cli.exits`.

``--agent MODULE:ATTR`` runs that Python agent (``cli/python_agent.py``, ``Setup.python_agent``) instead of the
one the configuration describes; ``app.py`` refuses the flags that would change its definition.

A run that pauses (tool calls waiting for a decision) lists them and the command that resumes it, and exits 5;
``--resume FILE`` or ``--session ID`` with ``--approve``/``--deny``/``--result`` resumes one instead of running
a prompt (``cli/decisions.py``).

``--trace`` prints the tree of the run (``cli/trace.py``) on stderr after the answer; with
``OTEL_EXPORTER_OTLP_ENDPOINT`` set, the run's spans are exported (``cli/otlp.py``).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console
from rich.text import Text

from tether.agent import Agent
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
    store_failures,
)
from tether.cli.decisions import Resume, decisions_of, how_to_resume, pending_json, read_state, write_state
from tether.cli.otlp import otlp_export
from tether.cli.render import Renderer, make_console, not_run, probe_address, usage_line
from tether.cli.terminal import Interrupts, terminal_approver
from tether.cli.trace import print_trace
from tether.errors import ConfigInvalid, DecisionInvalid, FormatUnsupported, SessionInvalid, StateInvalid, TetherError
from tether.events import FallbackTaken, RunCompleted, RunResult
from tether.messages import Attachment, Prompt, messages_to_jsonable, redacted_messages
from tether.paused import PausedRun
from tether.redaction import Redaction, default_redaction
from tether.run_handles import RunStream


@dataclass(frozen=True, slots=True)
class RunOptions:
    """What ``tether run`` was asked, flags included."""

    prompt: str
    model: str | None = None
    session: str | None = None
    continue_last: bool = False
    as_json: bool = False
    yes: bool = False
    mode: str | None = None
    max_turns: int | None = None
    config_file: str | None = None
    """``--config``: the file read instead of ``./agent.toml``."""
    trace: bool = False
    """``--trace``: the tree of the run on stderr after the answer (``cli/trace.py``)."""
    no_compact: bool = False
    """``--no-compact``: ``compaction.enabled = false`` for this run."""
    context_window: int | None = None
    """``--context-window N``: ``compaction.context_window``."""
    system: str | None = None
    """``--system``: ``agent.instructions`` (a file's text already read, for ``@FILE``)."""
    no_agents_md: bool = False
    """``--no-agents-md``: ``agent.agents_md = false``."""
    no_discover_skills: bool = False
    """``--no-discover-skills``: ``agent.discover_skills = false``."""
    schema: Any = None
    """``--schema``: the run's output type (``cli/schemas.py``); ``None``: the answer's text."""
    attachments: tuple[Attachment, ...] = ()
    """``-a``: files attached to the prompt."""
    record_exchanges: bool = False
    """``--record-exchanges``: ``session.record_exchanges = true``."""
    cache: str | None = None
    """``--cache`` (``""``: the configured or default file) or ``--cache-path PATH``: ``[cache]`` on."""
    agent: str | None = None
    """``--agent MODULE:ATTR``: run that Python agent instead of the configured one (``cli/python_agent.py``)."""
    resume: Resume | None = None
    """``--resume``, ``--approve``, ``--deny``, ``--result``: resume a paused run instead (``cli/decisions.py``)."""
    state_out: str | None = None
    """``--state-out FILE``: where a run that pauses writes its state."""

    def flags(self) -> dict[str, object]:
        """The configuration keys the flags set (``None``: not given)."""
        return {
            "runtime.model": self.model,
            "tools.mode": self.mode,
            "runtime.limits.max_turns": self.max_turns,
            **compaction_flags(no_compact=self.no_compact, context_window=self.context_window),
            **agent_flags(
                system=self.system, no_agents_md=self.no_agents_md, no_discover_skills=self.no_discover_skills
            ),
            **session_flags(record_exchanges=self.record_exchanges),
            **cache_flags(self.cache),
        }


def main(options: RunOptions, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> int:
    """Run ``tether run`` and return its exit code."""
    env = os.environ if env is None else env
    err = make_console(stderr=True)
    cwd = cwd or Path.cwd()
    try:
        if options.agent is not None:
            setup = load_python_setup(options.agent, cwd, env, options.config_file)
        else:
            setup = load_setup(cwd, env, options.flags(), options.config_file)
    except (ConfigInvalid, NoModel) as error:
        err.print(Text(config_problem(error), style="red"))
        return exits.CONFIG
    for notice in setup.notices:
        err.print(Text(f"notice: {notice}", style="yellow"))
    if chosen := setup.notice(yes=options.yes):
        err.print(Text(chosen, style="dim"))
    out = make_console()
    with otlp_export(env, err) as telemetry:
        if telemetry is not None:
            setup = replace(setup, telemetry=telemetry)
        return eventloop.run(run(setup, options, out, err), env)


async def run(setup: Setup, options: RunOptions, out: Console, err: Console) -> int:
    """The run itself, in the event loop, with the MCP servers connected; closes the store however it ends."""
    try:
        async with mcp_tools(setup) as connected:
            return await _run(connected, options, out, err)
    except ConfigInvalid as error:
        err.print(Text(f"error: {error.message}", style="red"))
        return exits.CONFIG
    except TetherError as error:  # an MCP server that did not start or answer
        err.print(Text(f"error: {error.message}", style="red"))
        return exits.ERROR
    except store_failures(setup.store) as error:  # a database locked or out of reach
        err.print(Text(f"error: the session store failed: {' '.join(str(error).split())}", style="red"))
        return exits.ERROR
    finally:
        await close_store(setup.store)


async def _run(setup: Setup, options: RunOptions, out: Console, err: Console) -> int:
    interactive = sys.stdin.isatty()
    renderer = Renderer(
        out, err, text=not options.as_json and options.schema is None, stream=setup.config.cli.stream,
        thinking=err.is_terminal, spinner=True,
    )  # fmt: skip
    try:
        state = await _state(options)
        if state is not None:
            session_id: str | None = state.session_id
        else:
            session_id, note = await pick_session(setup.store, options.session, options.continue_last)
            if note:
                err.print(Text(note, style="dim"))
    except SessionInvalid as error:  # a malformed --session id (usage), or a store that cannot be read
        err.print(Text(f"error: {error.message}", style="red"))
        return exits.USAGE if options.session is not None else exits.ERROR
    except (*RESUME_ERRORS, OSError) as error:  # --resume's file: unreadable, not a state, of a newer format
        err.print(Text(resume_problem(error, options), style="red"))
        return exits.CONFIG
    try:
        agent = setup.agent(
            mode=options.mode,
            yes=options.yes,
            interactive=interactive,
            approve=terminal_approver(err, renderer) if interactive else None,
        )
        renderer.redaction = agent.redaction
        renderer.probe = probe_address(agent.provider)
        stream = _open(agent, options, session_id, state)
    except ConfigInvalid as error:  # an attachment the model cannot read
        err.print(Text(f"error: {error.message}", style="red"))
        return exits.CONFIG
    except RESUME_ERRORS as error:  # decisions that do not fit the paused calls
        err.print(Text(resume_problem(error, options), style="red"))
        return exits.CONFIG
    ended = await _watch(stream, renderer, options)
    if isinstance(ended, int):
        return ended
    return await _report(*ended, agent, options, session_id, out, err)


async def _report(
    result: RunResult,
    fallbacks: list[FallbackTaken],
    agent: Agent,
    options: RunOptions,
    session_id: str | None,
    out: Console,
    err: Console,
) -> int:
    """What is printed once the run ended (the JSON, the typed output, a paused run's way on, the closing line);
    the exit code."""
    model = agent.provider.info.model_string
    state_file = options.state_out if result.state is not None else None
    if result.state is not None and state_file is not None:
        try:
            await asyncio.to_thread(write_state, state_file, result.state)
        except OSError as error:
            err.print(Text(f"error: cannot write the paused run's state to {state_file!r}: {error}", style="red"))
            state_file = None  # the session keeps it
    if options.as_json:
        shown = result_json(result, session_id=session_id, model=model, redaction=agent.redaction)
        shown["fallbacks"] = [fallback_json(taken, agent.redaction) for taken in fallbacks]
        out.file.write(json.dumps(shown, indent=2) + "\n")
        out.file.flush()
    elif options.schema is not None and result.stop_reason == "complete":
        out.file.write(output_json(result.output) + "\n")
        out.file.flush()
    if not_run(result):
        err.print(Text(f"the session {session_id} is paused: the prompt was not run; decide its calls first", "yellow"))
    if result.pending:
        err.print(Text(how_to_resume(result.pending, session_id=session_id, state_file=state_file), style="yellow"))
    err.print(Text(f"{usage_line(result.usage, result.cost)} · session {session_id or '-'} · {model}", style="dim"))
    if options.trace:
        print_trace(err, result, model, agent.redaction)
    return exits.exit_code(result.stop_reason)


async def _state(options: RunOptions) -> PausedRun | None:
    """The paused run ``--resume`` names, read; ``None`` without it."""
    if options.resume is None or options.resume.state is None:
        return None
    return await asyncio.to_thread(read_state, options.resume.state)


def _open(agent: Agent, options: RunOptions, session_id: str | None, state: PausedRun | None) -> RunStream:
    """The run's stream: a new run of the prompt, or the paused run resumed with the decisions given."""
    if options.resume is not None:
        return agent.resume_stream(state, decisions_of(options.resume), session=session_id)
    prompt: Prompt = [options.prompt, *options.attachments] if options.attachments else options.prompt
    return agent.stream(prompt, session=session_id, output_type=options.schema)


async def _watch(
    stream: RunStream, renderer: Renderer, options: RunOptions
) -> tuple[RunResult, list[FallbackTaken]] | int:
    """The run shown as it goes, Ctrl-C cancelling it: its result and the fallbacks it took, or the exit code of a
    run that could not end with one."""
    task = asyncio.current_task()
    assert task is not None

    def first() -> None:
        renderer.note("(cancelling: Ctrl-C again to quit at once)", "yellow")
        stream.cancel()

    interrupts = Interrupts(first, task.cancel).install()
    result: RunResult | None = None
    fallbacks: list[FallbackTaken] = []
    try:
        async for event in stream:
            renderer(event)
            if type(event) is RunCompleted:
                result = event.result
            elif type(event) is FallbackTaken:
                fallbacks.append(event)
    except asyncio.CancelledError:
        renderer.note("(quit before the run could finish)", "yellow")
        return exits.CANCELLED
    except SessionInvalid as error:  # the session's stored transcript cannot be read
        renderer.note(f"error: {error.message}", "red")
        return exits.ERROR
    except RESUME_ERRORS as error:  # the session's paused run, or its decisions, cannot be used
        renderer.note(resume_problem(error, options), "red")
        return exits.CONFIG
    finally:
        interrupts.remove()
        renderer.stop_spinner()
    assert result is not None
    return result, fallbacks


RESUME_ERRORS = (DecisionInvalid, StateInvalid, FormatUnsupported)
"""What stops a paused run from being resumed: decisions that do not fit it, a state that cannot be read."""


def resume_problem(error: Exception, options: RunOptions) -> str:
    """The one line saying why the paused run cannot be resumed, naming the error's code."""
    if isinstance(error, TetherError):
        return f"error: {error.message} ({error.code})"
    given = options.resume.state if options.resume is not None else None
    reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
    return f"error: cannot read the paused run's state {given!r}: {reason}"


def fallback_json(taken: FallbackTaken, redaction: Redaction) -> dict[str, Any]:
    """A fallback's move as ``--json`` lists it (``fallbacks``, in order), its message through ``redaction``."""
    return {
        "model": taken.model,
        "code": taken.code,
        "message": redaction.text(taken.message),
        "next_model": taken.next_model,
        "attempt": taken.attempt,
    }


def output_json(output: Any) -> str:
    """A run's output as JSON text: a validated model, dataclass or plain value (what ``--schema`` prints)."""
    from pydantic_core import to_jsonable_python

    return json.dumps(to_jsonable_python(output), ensure_ascii=False)


def result_json(
    result: RunResult, *, session_id: str | None = None, model: str | None = None, redaction: Redaction | None = None
) -> dict[str, Any]:
    """The result as ``tether run --json`` prints it: through ``redaction`` (the default rules when not given),
    like everything the command prints. Tool calls' secret-named arguments are ``***``; the session keeps them
    as the model sent them (``tether sessions export ID`` prints them)."""
    redaction = redaction or default_redaction()
    usage = msgspec.structs.asdict(result.usage) | {"total_tokens": result.usage.total_tokens}
    cost = None
    if result.cost is not None:
        cost = {
            "input_usd": result.cost.input_usd,
            "output_usd": result.cost.output_usd,
            "total_usd": result.cost.total_usd,
        }
    error = None
    if result.error is not None:
        error = {
            "type": type(result.error).__name__,
            "code": getattr(result.error, "code", None),
            "message": redaction.text(getattr(result.error, "message", str(result.error))),
        }
    return {
        "text": result.text,
        "stop_reason": str(result.stop_reason),
        "degraded": result.degraded,
        "finish_reason": result.finish_reason,
        "detail": redaction.text(result.detail),
        "error": error,
        "usage": usage,
        "cost": cost,
        "turns": result.turns,
        "session_id": session_id,
        "model": model,
        "exit_code": exits.exit_code(result.stop_reason),
        "duration_ms": result.duration_ms,
        "output": json.loads(output_json(result.output)),
        "turn_records": msgspec.to_builtins(result.turn_records),
        "messages": messages_to_jsonable(redacted_messages(result.messages, redaction)),
        "pending": pending_json(result.pending, redaction),
        "state": json.loads(result.state.to_json()) if result.state is not None else None,
    }
