"""The options ``tether run`` and ``tether chat`` share, and the checks and readings of their values: each
option a decorator, so the two commands declare one flag the same way; kept apart from ``app.py``, which holds
the commands themselves.

Like ``app.py`` it imports only click and ``tether``'s light modules: ``tether --help`` must answer at once.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

MODES = click.Choice(["read-only", "full"])


def session_options(command: Any) -> Any:
    """``--session ID`` and ``--continue``, shared by ``run`` and ``chat``."""
    command = click.option("--continue", "-c", "continue_last", is_flag=True, help="Continue the most recent session.")(
        command
    )
    return click.option("--session", "-s", metavar="ID", help="Continue the session ID, or start it under that id.")(
        command
    )


def verbose_option(command: Any) -> Any:
    """``-v/--verbose``, shared by ``run`` and ``chat``: tether's log records on stderr (``cli/verbose.py``)."""
    return click.option(
        "--verbose",
        "-v",
        count=True,
        help="Log the run on stderr: -v each run (INFO), -vv each model and tool call too (DEBUG).",
    )(command)


def record_option(command: Any) -> Any:
    """``--record-exchanges``, shared by ``run`` and ``chat`` (``session.record_exchanges``)."""
    return click.option(
        "--record-exchanges",
        is_flag=True,
        help="Keep each model request and its raw answer in the session, keys masked (session.record_exchanges).",
    )(command)


def cache_options(command: Any) -> Any:
    """``--cache`` and ``--cache-path``, shared by ``run`` and ``chat`` (``[cache]``)."""
    command = click.option(
        "--cache-path",
        metavar="PATH",
        help="The response cache's SQLite file, or a postgresql:// URL (cache.path); implies --cache.",
    )(command)
    return click.option(
        "--cache",
        "use_cache",
        is_flag=True,
        help="Answer a request identical to an earlier one from the response cache, no model call (cache.enabled).",
    )(command)


def cache_choice(use_cache: bool, cache_path: str | None) -> str | None:
    """What ``--cache`` and ``--cache-path`` ask: ``None`` nothing, ``""`` the configured file, else a file."""
    return cache_path if cache_path else "" if use_cache else None


def compaction_options(command: Any) -> Any:
    """``--no-compact`` and ``--context-window N``, shared by ``run`` and ``chat`` (``[compaction]``)."""
    command = click.option(
        "--context-window",
        type=click.IntRange(min=256),
        metavar="N",
        help="The model's context window in tokens, for compaction (compaction.context_window).",
    )(command)
    return click.option(
        "--no-compact",
        is_flag=True,
        help="Never compact the history; a run that outgrows the window stops (compaction.enabled).",
    )(command)


def instruction_options(command: Any) -> Any:
    """``--system TEXT|@FILE``, ``--no-agents-md`` and ``--no-discover-skills``, shared by ``run`` and ``chat``
    (``[agent]``)."""
    command = click.option(
        "--no-discover-skills",
        is_flag=True,
        help="Give only the skills of [agent] skills, not those of .tether/skills/ and the user's skills/ "
        "(agent.discover_skills).",
    )(command)
    command = click.option(
        "--no-agents-md",
        is_flag=True,
        help="Leave the workspace's AGENTS.md out of the system prompt (agent.agents_md).",
    )(command)
    return click.option(
        "--system",
        metavar="TEXT|@FILE",
        callback=system_text,
        help="Instructions added to the system prompt for this command; @FILE reads them from FILE "
        "(agent.instructions).",
    )(command)


MAX_INSTRUCTIONS_BYTES = 1024 * 1024
"""The largest ``--system @FILE`` read."""


def system_text(context: click.Context, parameter: click.Parameter, value: str | None) -> str | None:
    """``--system``'s instructions: the text, or ``@FILE``'s contents (UTF-8); a usage error when empty or when
    the file cannot be read."""
    if value is None:
        return None
    if value.startswith("@"):
        path = Path(value[1:]).expanduser()
        from tether.bounded import read_bounded

        try:
            value = read_bounded(path, MAX_INSTRUCTIONS_BYTES).decode("utf-8")
        except (OSError, UnicodeDecodeError) as error:
            reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
            raise click.BadParameter(f"cannot read {str(path)!r}: {reason}", context, parameter) from None
    if not value.strip():
        raise click.BadParameter("the instructions are empty", context, parameter)
    return value


def schema_option(context: click.Context, parameter: click.Parameter, value: str | None) -> object:
    """``--schema``'s output type (``cli/schemas.py``); a usage error when it cannot be used."""
    if value is None:
        return None
    from tether.cli.schemas import output_type_of

    try:
        return output_type_of(value, Path.cwd())
    except ValueError as error:
        raise click.BadParameter(str(error), context, parameter) from None


def attachments_option(context: click.Context, parameter: click.Parameter, value: tuple[str, ...]) -> object:
    """``-a``'s files, read (a usage error when one cannot be read or is of no kind a model takes)."""
    from tether.errors import ConfigInvalid
    from tether.messages import Attachment

    try:
        return tuple(Attachment.from_path(Path(path).expanduser()) for path in value)
    except ConfigInvalid as error:
        raise click.BadParameter(error.message, context, parameter) from None


def agent_option(command: Any) -> Any:
    """``--agent MODULE:ATTR``, shared by ``run`` and ``chat`` (``cli/python_agent.py``)."""
    return click.option(
        "--agent",
        metavar="MODULE:ATTR",
        help="Run this Python Agent (imported from here) instead of the one the configuration describes.",
    )(command)


AGENT_DEFINES = "the agent it names is defined in Python (model, instructions, limits, compaction, caches, recording)"


def check_agent_options(agent: str | None, given: dict[str, object]) -> None:
    """With ``--agent``, the flags that would change the agent's definition are a usage error: its definition
    is its Python code. Those about the run (``--json``, ``--trace``, ``--session``, ``--yes``, ``--mode``, ...)
    apply."""
    if agent is None:
        return
    if named := [flag for flag, value in given.items() if value]:
        raise click.UsageError(f"{', '.join(named)} cannot be used with --agent: {AGENT_DEFINES}")


def definition_flags(
    model: str | None,
    system: str | None,
    no_agents_md: bool,
    no_compact: bool,
    context_window: int | None,
    record_exchanges: bool,
    cache: str | None,
) -> dict[str, object]:
    """The flags of ``run`` and ``chat`` that set the configured agent's definition, by name."""
    return {
        "--model": model,
        "--system": system,
        "--no-agents-md": no_agents_md,
        "--no-compact": no_compact,
        "--context-window": context_window,
        "--record-exchanges": record_exchanges,
        "--cache-path" if cache else "--cache": cache is not None,
    }


def check_session_options(session: str | None, continue_last: bool) -> None:
    if session is not None and continue_last:
        raise click.UsageError("--session and --continue cannot be used together")


def read_prompt(prompt: str | None) -> str:
    """PROMPT as given; ``-``, or no PROMPT while stdin is not a terminal, reads the whole prompt from stdin.

    stdin is read only when asked like this, so a run started by a script whose stdin never closes cannot hang.
    """
    if prompt is not None and prompt != "-":
        return prompt
    if prompt is None and sys.stdin.isatty():
        raise click.UsageError("Missing argument 'PROMPT' (give it, pipe it on stdin, or give - to read stdin).")
    data = sys.stdin.buffer.read()
    try:
        text = data.decode("utf-8").strip()
    except UnicodeDecodeError as error:
        raise click.UsageError(f"the prompt on stdin is not UTF-8 text (byte {error.start})") from None
    if not text:
        raise click.UsageError("the prompt on stdin is empty")
    return text


def decision_options(command: Any) -> Any:
    """``--resume STATE``, ``--approve ID``, ``--deny ID``, ``--reason R``, ``--result ID=JSON`` and
    ``--state-out FILE`` of ``tether run``: a paused run's state kept, and a paused run resumed with decisions
    (``cli/decisions.py``)."""
    command = click.option(
        "--state-out",
        metavar="FILE",
        type=click.Path(dir_okay=False, writable=True),
        help="When the run pauses, write its state (JSON) to FILE, for --resume FILE.",
    )(command)
    command = click.option(
        "--result",
        "results",
        multiple=True,
        metavar="ID=JSON",
        callback=result_pairs,
        help="Resume: the result of the external call ID, a JSON value (repeatable).",
    )(command)
    command = click.option(
        "--reason",
        metavar="TEXT",
        help="Resume: why the --deny calls are denied; the model reads it.",
    )(command)
    command = click.option("--deny", multiple=True, metavar="ID", help="Resume: deny the paused call ID (repeatable).")(
        command
    )
    command = click.option(
        "--approve", multiple=True, metavar="ID", help="Resume: approve the paused call ID (repeatable)."
    )(command)
    return click.option(
        "--resume",
        "resume_state",
        metavar="STATE.json",
        help="Resume the paused run whose state is in this file (- reads it from stdin), with the decisions given.",
    )(command)


def result_pairs(context: click.Context, parameter: click.Parameter, value: tuple[str, ...]) -> object:
    """``--result``'s ``(call id, value)`` pairs, each value parsed from JSON: a usage error when one is not
    ``ID=JSON``."""
    import json

    pairs: list[tuple[str, object]] = []
    for given in value:
        call_id, equals, text = given.partition("=")
        if not equals or not call_id.strip():
            raise click.BadParameter(f"{given!r}: give it as ID=JSON, e.g. call_1='\"sunny\"'", context, parameter)
        try:
            pairs.append((call_id.strip(), json.loads(text)))
        except ValueError:
            raise click.BadParameter(
                f"{given!r}: the result of {call_id.strip()} is not JSON (a text is quoted: {call_id.strip()}="
                f"'\"{text}\"')",
                context,
                parameter,
            ) from None
    return tuple(pairs)


def check_decision_options(
    *,
    prompt: str | None,
    resume_state: str | None,
    session: str | None,
    continue_last: bool,
    approve: tuple[str, ...],
    deny: tuple[str, ...],
    reason: str | None,
    results: tuple[tuple[str, object], ...],
    attachments: tuple[object, ...],
    schema: object = None,
) -> bool:
    """Whether ``tether run`` resumes a paused run; a usage error for a combination that cannot be meant: a
    decision with no paused run named, a PROMPT, an attachment or ``--schema`` with one, ``--reason`` without
    ``--deny``, a call decided twice."""
    decided = bool(approve or deny or results)
    if reason is not None and not deny:
        raise click.UsageError("--reason is the reason of --deny: give --deny ID with it")
    ids = [*approve, *deny, *(call_id for call_id, _ in results)]
    if twice := sorted({call_id for call_id in ids if ids.count(call_id) > 1}):
        raise click.UsageError(f"a call can have one decision: {', '.join(twice)} has more")
    if not decided and resume_state is None:
        return False
    if resume_state is None and session is None and not continue_last:
        raise click.UsageError(
            "--approve, --deny and --result decide a paused run: name it with --resume STATE.json or --session ID"
        )
    if resume_state is not None and (session is not None or continue_last):
        raise click.UsageError("--resume names the paused run: --session and --continue cannot be used with it")
    if prompt is not None:
        raise click.UsageError("a resumed run goes on from its paused calls: it takes no PROMPT")
    if attachments:
        raise click.UsageError("a resumed run goes on from its paused calls: it takes no --attach")
    if schema is not None:
        raise click.UsageError("a resumed run answers as its paused run would have, in text: it takes no --schema")
    return True
