"""``tether mcp``: tether as an MCP server (``tether mcp serve``). This module imports only click; the command
loads the rest when it runs (:mod:`tether.cli.mcp_serve`)."""

from __future__ import annotations

import sys

import click

from tether.cli.config_flag import config_option
from tether.cli.run_options import agent_option, verbose_option

__all__ = ["mcp"]


@click.group()
def mcp() -> None:
    """Serve an agent to MCP clients (editors, assistants, other agents) as one tool."""


@mcp.command("serve")
@agent_option
@click.option("--http", "http", is_flag=True, help="Serve streamable HTTP at /mcp instead of stdio.")
@click.option("--host", metavar="HOST", help="With --http: the address to bind (default 127.0.0.1).")
@click.option(
    "--port",
    type=click.IntRange(min=0, max=65535),
    metavar="N",
    help="With --http: the port (default 8000; 0: a free one).",
)
@click.option(
    "--token",
    metavar="TOKEN",
    envvar="TETHER_SERVE_TOKEN",
    show_envvar=True,
    help="With --http: the bearer token every request must carry; required for a host other than a loopback one.",
)
@click.option("--name", metavar="NAME", help="The tool's name (default: the agent's name, else 'agent').")
@click.option("--yes", "-y", is_flag=True, help="Allow tools that change files or run commands.")
@verbose_option
@config_option
def serve(
    agent: str | None,
    http: bool,
    host: str | None,
    port: int | None,
    token: str | None,
    name: str | None,
    yes: bool,
    verbose: int,
    config_file: str | None,
) -> None:
    """Serve an agent as an MCP tool over stdio (the default) or streamable HTTP (--http).

    The tool takes {"prompt": ..., "session_id": ...} and answers with the agent's text (and, for an agent
    with an output type, its output as structured content). While a call runs, a client that asked for
    progress gets a notification per turn and tool call; cancelling the call cancels the run (its session
    keeps a valid transcript). A run that stops without an answer is an error result with its stop reason.

    The agent is the one the configuration describes (as for tether run, its tools rooted here, those that
    change things refused unless --yes), or the Python Agent --agent MODULE:ATTR names. Over stdio, stdout
    carries only the protocol; a line per call goes to stderr. --http binds 127.0.0.1:8000 unless told
    otherwise; another host needs --token. Exit codes: 0 stopped, 1 configuration problem.
    """
    from tether.cli.mcp_serve import McpServeOptions
    from tether.cli.mcp_serve import main as serve_main
    from tether.cli.verbose import configure_logging

    given = [flag for flag, value in (("--host", host), ("--port", port)) if value is not None]
    if given and not http:  # a token is not checked: TETHER_SERVE_TOKEN may be set for another command
        raise click.UsageError(f"{' and '.join(given)} only apply with --http")
    configure_logging(verbose)
    options = McpServeOptions(agent, http, host or "127.0.0.1", 8000 if port is None else port, token, name, yes,
                              config_file)  # fmt: skip
    sys.exit(serve_main(options))
