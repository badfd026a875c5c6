"""The ``tether`` command: a click group, one subcommand per job: ``run``, ``chat``, ``py``, ``sessions``,
``models``, ``config``, ``batch``, ``worker``, ``runs``, ``serve``, ``mcp``, ``probe`` and ``doctor``.

``tether --help`` and ``tether run --help`` must answer at once, so this module imports only click and
``tether`` itself; each command imports what it needs (rich, prompt_toolkit, aiohttp, pydantic, providers)
when it runs. Exit codes: 0 success, 1 the command's own failure (a configuration problem; for ``probe``: the
server is not usable; for ``doctor``: a check failed), 2 a usage error (click's); ``run`` adds 3 (a guard
stopped the run), 4 (the run failed), 5 (the run paused) and 130 (cancelled): see :mod:`tether.cli.exits`.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from tether._version import __version__
from tether.cli.config_commands import config as config_group
from tether.cli.config_flag import config_option
from tether.cli.help import WholeSummaries
from tether.cli.mcp_commands import mcp as mcp_group
from tether.cli.models_commands import models as models_group
from tether.cli.run_options import (
    MODES,
    agent_option,
    attachments_option,
    cache_choice,
    cache_options,
    check_agent_options,
    check_decision_options,
    check_session_options,
    compaction_options,
    decision_options,
    definition_flags,
    instruction_options,
    read_prompt,
    record_option,
    schema_option,
    session_options,
    verbose_option,
)
from tether.cli.runs_decisions import runs as runs_group  # the group, every command of it joined
from tether.cli.serve_commands import serve as serve_command
from tether.cli.sessions_commands import sessions as sessions_group
from tether.cli.skills_commands import skills as skills_group

if TYPE_CHECKING:
    from tether.providers.probe import ProbeResult


@click.group(cls=WholeSummaries, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", "-V", prog_name="tether", message="%(prog)s %(version)s")
def main() -> None:
    """Run LLM agents from the command line."""


@main.command()
@click.argument("url")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=5.0,
    show_default=True,
    metavar="S",
    help="Seconds to wait for each request.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option(
    "--api-key",
    metavar="KEY",
    envvar="TETHER_PROBE_API_KEY",
    show_envvar=True,
    help="API key for a server that wants one.",
)
def probe(url: str, timeout: float, as_json: bool, api_key: str | None) -> None:
    """Check that the model server at URL is up and list its models.

    URL is host:port, http://host:port or the server's base URL ending in /v1, for example localhost:11434
    (Ollama), localhost:8000 (vLLM) or localhost:8080 (llama.cpp). Exits with 0 when tether can use the
    server, 1 when it cannot.
    """
    import asyncio

    from tether.errors import ConfigInvalid
    from tether.providers.probe import probe as run_probe

    try:
        result = asyncio.run(run_probe(url, timeout=timeout, api_key=api_key))
    except ConfigInvalid as error:
        raise click.BadParameter(error.message, param_hint="URL") from None
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
    else:
        click.echo(probe_summary(result), err=not result.ok)
    sys.exit(0 if result.ok else 1)


def probe_summary(result: ProbeResult) -> str:
    """A few lines for people: the verdict, what answered, the base URL, the models, the message."""
    lines = [f"{'ok' if result.ok else 'not ok'}: {result.url} ({result.latency_ms:g} ms)"]
    if result.kinds:
        lines.append(f"answered as: {', '.join(result.kinds)}")
    if result.ok:
        lines.append(f"base URL: {result.base_url}")
    if result.kinds:
        lines.append(f"models ({len(result.models)}):")
        lines.extend(f"  {model}" for model in result.models)
    lines.append(result.message)
    return "\n".join(lines)


@main.command()
@click.argument("prompt", required=False)
@click.option(
    "--model",
    "-m",
    metavar="PROVIDER:MODEL",
    help="The model, e.g. openai:gpt-4o-mini; a,b: a fallback list (runtime.model).",
)
@session_options
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout, and nothing else there.")
@click.option("--yes", "-y", is_flag=True, help="Allow tools that change files or run commands without asking.")
@click.option("--mode", type=MODES, help="read-only offers only tools that change nothing (tools.mode).")
@click.option("--max-turns", type=click.IntRange(min=1), metavar="N", help="Stop after N model turns.")
@click.option("--trace", is_flag=True, help="After the answer, print its model and tool calls as a tree on stderr.")
@click.option(
    "--attach",
    "-a",
    "attachments",
    multiple=True,
    metavar="PATH",
    callback=attachments_option,
    help="Attach a file to the prompt: an image, a PDF, audio or a text file (repeatable).",
)
@click.option(
    "--schema",
    metavar="FILE|JSON|MODULE:NAME",
    callback=schema_option,
    help="Answer as JSON valid under this JSON Schema (a file or JSON text) or type; print that JSON.",
)
@instruction_options
@compaction_options
@record_option
@cache_options
@decision_options
@verbose_option
@agent_option
@config_option
def run(
    prompt: str | None,
    model: str | None,
    session: str | None,
    continue_last: bool,
    as_json: bool,
    yes: bool,
    mode: str | None,
    max_turns: int | None,
    trace: bool,
    attachments: tuple[Any, ...],
    schema: object,
    system: str | None,
    no_agents_md: bool,
    no_discover_skills: bool,
    no_compact: bool,
    context_window: int | None,
    record_exchanges: bool,
    use_cache: bool,
    cache_path: str | None,
    resume_state: str | None,
    approve: tuple[str, ...],
    deny: tuple[str, ...],
    reason: str | None,
    results: tuple[tuple[str, object], ...],
    state_out: str | None,
    verbose: int,
    agent: str | None,
    config_file: str | None,
) -> None:
    """Run an agent on PROMPT in the current directory and stream its answer.

    PROMPT - (or no PROMPT, with stdin not a terminal) reads the prompt from stdin: tether run - < task.md.

    The agent has the file tools (read, write, edit) and bash, rooted here. Tools that change things ask first
    in a terminal ([y/N]); elsewhere they are refused unless --yes. Every run is saved as a session: --session
    ID continues one, --continue the latest. Usage and cost go to stderr at the end. With cli.stream = false
    in the configuration, the answer is printed whole once written instead of as it comes. --trace adds a tree
    of the run's model calls and tool calls with their times; OTEL_EXPORTER_OTLP_ENDPOINT set exports its
    spans (with tether[otel]). A history nearing the model's context window is summarized to fit
    ([compaction]; --context-window for a model whose window tether does not know, --no-compact never).
    --record-exchanges keeps each model request and its raw answer in the session (keys masked).
    --cache answers a request identical to an earlier one from a SQLite file, replayed, no model call
    ([cache]; --cache-path names the file). --agent MODULE:ATTR runs a Python Agent instead (its model, tools
    and permissions its own; --model and the other flags that would change it are refused).

    A run whose tool calls wait for a decision (a call to approve with no terminal to ask in, a tool whose
    result comes from outside) pauses: it lists them and exits with 5. --session ID --approve CALL (or --deny
    CALL --reason R, --result CALL=JSON) resumes it; --state-out FILE (or --json's state) keeps its state for
    --resume FILE instead.

    Exit codes: 0 answered, 1 configuration problem (or a state or decision that cannot be used), 2 usage
    error, 3 a limit stopped the run, 4 the run failed, 5 paused, 130 cancelled (Ctrl-C).
    """
    check_session_options(session, continue_last)
    resuming = check_decision_options(
        prompt=prompt, resume_state=resume_state, session=session, continue_last=continue_last, approve=approve,
        deny=deny, reason=reason, results=results, attachments=attachments, schema=schema,
    )  # fmt: skip
    cache = cache_choice(use_cache, cache_path)
    definition = definition_flags(model, system, no_agents_md, no_compact, context_window, record_exchanges, cache)
    check_agent_options(agent, {**definition, "--max-turns": max_turns})
    from tether.cli.decisions import Resume
    from tether.cli.runner import RunOptions
    from tether.cli.runner import main as run_main
    from tether.cli.verbose import configure_logging

    options = RunOptions(
        "" if resuming else read_prompt(prompt),
        model,
        session,
        continue_last,
        as_json,
        yes,
        mode,
        max_turns,
        config_file,
        trace,
        no_compact=no_compact,
        context_window=context_window,
        system=system,
        no_agents_md=no_agents_md,
        no_discover_skills=no_discover_skills,
        schema=schema,
        attachments=attachments,
        record_exchanges=record_exchanges,
        cache=cache,
        agent=agent,
        resume=Resume(resume_state, approve, deny, reason or "", results) if resuming else None,
        state_out=state_out,
    )
    configure_logging(verbose)
    sys.exit(run_main(options))


@main.command()
@click.option("--model", "-m", metavar="PROVIDER:MODEL", help="The model, e.g. openai:gpt-4o-mini (runtime.model).")
@session_options
@click.option("--yes", "-y", is_flag=True, help="Allow tools that change files or run commands without asking.")
@click.option("--mode", type=MODES, help="read-only offers only tools that change nothing (tools.mode).")
@instruction_options
@compaction_options
@record_option
@cache_options
@verbose_option
@agent_option
@config_option
def chat(
    model: str | None,
    session: str | None,
    continue_last: bool,
    yes: bool,
    mode: str | None,
    system: str | None,
    no_agents_md: bool,
    no_discover_skills: bool,
    no_compact: bool,
    context_window: int | None,
    record_exchanges: bool,
    use_cache: bool,
    cache_path: str | None,
    verbose: int,
    agent: str | None,
    config_file: str | None,
) -> None:
    """Talk with an agent in the current directory; /help lists the commands.

    Ctrl-C stops the answer being written (the conversation stays and is saved); at the prompt it clears the
    line. Ctrl-D or /exit leaves. Esc then Enter, or a line ending in a backslash, starts a new line.
    --agent MODULE:ATTR talks with a Python Agent instead (as for tether run).
    """
    check_session_options(session, continue_last)
    cache = cache_choice(use_cache, cache_path)
    check_agent_options(
        agent, definition_flags(model, system, no_agents_md, no_compact, context_window, record_exchanges, cache)
    )
    from tether.cli.chat_terminal import ChatOptions
    from tether.cli.chat_terminal import main as chat_main
    from tether.cli.verbose import configure_logging

    configure_logging(verbose)
    options = ChatOptions(
        model, session, continue_last, yes, mode, config_file, no_compact=no_compact, context_window=context_window,
        system=system, no_agents_md=no_agents_md, no_discover_skills=no_discover_skills,
        record_exchanges=record_exchanges, agent=agent, cache=cache,
    )  # fmt: skip
    sys.exit(chat_main(options))


@main.command(context_settings={"allow_interspersed_args": False})
@click.argument("script", required=False, type=click.Path(exists=True, dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.option("--model", "-m", metavar="PROVIDER:MODEL", help="The model, e.g. openai:gpt-4o-mini (runtime.model).")
@click.option("--no-eval", is_flag=True, help="The assistant only looks: it runs none of the model's code.")
@click.option(
    "--tool-mode",
    type=click.Choice(["native", "json"]),
    default="native",
    show_default=True,
    help="json: the model calls the session's functions through JSON in its text (the embedded model can).",
)
@verbose_option
@config_option
def py(
    script: str | None,
    args: tuple[str, ...],
    model: str | None,
    no_eval: bool,
    tool_mode: str,
    verbose: int,
    config_file: str | None,
) -> None:
    """A Python console whose assistant answers questions about the session: ?QUESTION.

    Python's own console (continuation lines, tracebacks as Python prints them) with line editing and a
    history. A line starting with ? (or %ask, /ask) asks the assistant, which looks at the session's variables
    and its last exception through functions: ?why did the last line fail. The answer streams; Ctrl-C stops
    it and the session goes on. At the prompt Ctrl-C clears the line; Ctrl-D leaves.

    SCRIPT runs first, as with python -i (its ARGS in sys.argv), then the console starts with its names and,
    if it raised, its exception. The model comes from where tether chat takes it; one that cannot call tools
    natively leaves the console working, without questions, unless --tool-mode json (the embedded model, with
    no key). The assistant may evaluate expressions the model writes, in this session (code that would end
    the process is refused); --no-eval makes it only look.
    """
    from tether.cli.py_terminal import PyOptions
    from tether.cli.py_terminal import main as py_main
    from tether.cli.verbose import configure_logging

    configure_logging(verbose)
    json_actions = tool_mode == "json"
    sys.exit(py_main(PyOptions(script, tuple(args), model, config_file, no_eval=no_eval, json_actions=json_actions)))


@main.command()
@click.argument("prompts", type=click.Path(exists=True, dir_okay=False))
@click.option("--output", "-o", required=True, type=click.Path(dir_okay=False), help="The results file (JSON Lines).")
@click.option("--db", metavar="URL", help="The workflow database: postgresql://..., sqlite:///... or a file.")
@click.option("--concurrency", type=click.IntRange(min=1), default=4, show_default=True, metavar="N")
@click.option("--model", "-m", metavar="PROVIDER:MODEL", help="The model, e.g. openai:gpt-4o-mini (runtime.model).")
@click.option("--yes", "-y", is_flag=True, help="Allow tools that change files or run commands.")
@config_option
def batch(
    prompts: str,
    output: str,
    db: str | None,
    concurrency: int,
    model: str | None,
    yes: bool,
    config_file: str | None,
) -> None:
    """Run every prompt of PROMPTS (JSON Lines) as a durable run; write each result to --output as it ends.

    A line is a JSON string or {"prompt": "...", "id": "..."}. Stopped (Ctrl-C, kill -9) and run again with
    the same files, the batch goes on: items with a result are not run again, runs under way go on from their
    last finished step. Runs are kept in a SQLite file in tether's state directory unless --db says otherwise
    (postgresql://... to share them between machines). Exit codes: 0 every item answered, 1 configuration
    problem, 4 some item failed, 130 interrupted.
    """
    from tether.cli.batch import BatchOptions
    from tether.cli.batch import main as batch_main

    options = BatchOptions(prompts, output, db, concurrency, yes, model, config_file)
    sys.exit(batch_main(options))


@main.command()
@click.option("--queue", "-q", default="default", show_default=True, metavar="NAME", help="The queue to serve.")
@click.option("--agent", metavar="MODULE:ATTR", help="An Agent or DurableAgent to run, instead of agent.toml's.")
@click.option("--db", metavar="URL", help="The workflow database: postgresql://..., sqlite:///... or a file.")
@click.option("--concurrency", type=click.IntRange(min=1), default=4, show_default=True, metavar="N")
@click.option("--worker-id", metavar="ID", help="This worker's id (default: a unique worker-<host>-<pid>-<hex>).")
@click.option(
    "--dead-after",
    type=click.FloatRange(min=0, min_open=True),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="Seconds without this worker's heartbeat after which the other workers recover its runs.",
)
@click.option(
    "--grace", type=click.FloatRange(min=0), default=10.0, show_default=True, metavar="SECONDS",
    help="On SIGTERM or Ctrl-C, how long the runs under way may go on before the worker exits.",
)  # fmt: skip
@click.option("--yes", "-y", is_flag=True, help="Allow tools that change files or run commands.")
@click.option("--verbose", "-v", count=True, help="Log tether's records on stderr, the engine's own among them.")
@config_option
def worker(
    queue: str,
    agent: str | None,
    db: str | None,
    concurrency: int,
    worker_id: str | None,
    dead_after: float,
    grace: float,
    yes: bool,
    verbose: int,
    config_file: str | None,
) -> None:
    """Take durable runs from a queue and run them, until SIGTERM or Ctrl-C (exit 0).

    The agent is agent.toml's (named "agent") unless --agent names a Python Agent or DurableAgent. Runs are
    put on the queue with tether.durable (DurableAgent.enqueue), on the database --db names (as for tether
    batch). Each run taken and ended is a line on stderr. Each worker beats in the database; the runs of one
    silent for --dead-after seconds (or stopped) are recovered by a live one. An id held by a live worker is
    refused (exit 1). Exit codes: 0 stopped, 1 configuration problem.
    """
    from tether.cli.worker import WorkerOptions
    from tether.cli.worker import main as worker_main

    options = WorkerOptions(
        queue, agent, db, concurrency, worker_id, yes, config_file, dead_after, grace=grace, verbose=verbose
    )
    sys.exit(worker_main(options))


@main.command()
@click.option("--model", "-m", metavar="PROVIDER:MODEL", help="Check this model instead of the configured one.")
@click.option("--db", metavar="URL", help="The workflow database to check: postgresql://..., sqlite:///... or a file.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=10.0,
    show_default=True,
    metavar="S",
    help="Seconds each check may take.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON on stdout, and nothing else there.")
@config_option
def doctor(model: str | None, db: str | None, timeout: float, as_json: bool, config_file: str | None) -> None:
    """Check that everything a run needs works here: one line per check, with a hint when it fails.

    The configuration, the model, its API key (named, never shown), the provider reached (no token spent),
    each configured MCP server started and listing its tools, the session store written to (a probe session,
    deleted), the workflow database of durable runs (--db, or the default one when it exists), and the bash
    tool's sandbox (bubblewrap). Exit codes: 0 every check passed or was skipped, 1 a check failed, 2 usage
    error.
    """
    from tether.cli.doctor import DoctorOptions
    from tether.cli.doctor import main as doctor_main

    sys.exit(doctor_main(DoctorOptions(model, config_file, db, timeout), as_json=as_json))


main.add_command(config_group)  # its module imports only click; each command loads what it needs
main.add_command(sessions_group)
main.add_command(runs_group)
main.add_command(models_group)
main.add_command(skills_group)
main.add_command(mcp_group)
main.add_command(serve_command)


if __name__ == "__main__":
    main(prog_name="tether")
