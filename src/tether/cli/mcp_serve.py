"""``tether mcp serve``: the command's agent served as an MCP tool (:mod:`tether.serve.mcp_server`).

Contract:

* The agent is the configuration's (as ``tether run`` builds it, with the configured MCP servers' tools;
  tools that change things refused unless ``--yes``, since no one is there to ask) or the Python ``Agent``
  ``--agent MODULE:ATTR`` names (a ``DurableAgent`` is refused: the runs are this process's). Its sessions
  are kept in its store, or the configured one.
* stdio: stdout carries the protocol and nothing else; the server ends when the client closes stdin (exit 0).
  ``--http``: streamable HTTP at ``/mcp``, its URL a line on stderr once it listens, until SIGINT or
  SIGTERM (exit 0). A host other than a loopback one without a token is refused (exit 1).
* Each call ended is one line on stderr: its run id, stop reason and turns.
* Exit codes: 0 stopped, 1 a configuration problem (a bad ``--agent``, no model, a refused host, a port taken).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.cli import exits
from tether.cli.build import NoModel, Setup, close_store, config_problem, load_python_setup, load_setup, mcp_tools
from tether.errors import ConfigInvalid

if TYPE_CHECKING:
    from tether.events import RunResult


@dataclass(frozen=True, slots=True)
class McpServeOptions:
    """What ``tether mcp serve`` was asked."""

    agent: str | None = None
    http: bool = False
    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = None
    name: str | None = None
    yes: bool = False
    config_file: str | None = None


def main(options: McpServeOptions, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> int:
    """Serve until the client leaves (stdio) or a signal stops it (HTTP); the exit code."""
    import importlib.util

    env = os.environ if env is None else env
    cwd = cwd or Path.cwd()
    try:
        if importlib.util.find_spec("mcp") is None:
            raise ConfigInvalid("tether mcp serve needs the MCP SDK: pip install 'tether[mcp]'")
        if options.http:
            from tether.serve.security import check_bind

            check_bind(options.host, token=options.token)
        if options.agent is not None:
            setup = load_python_setup(options.agent, cwd, env, options.config_file)
        else:
            setup = load_setup(cwd, env, {}, options.config_file)
    except (ConfigInvalid, NoModel) as error:
        _say(config_problem(error))
        return exits.CONFIG
    for notice in setup.notices:
        _say(notice)
    from tether.cli.eventloop import run

    try:
        return run(_serve(setup, options), env)
    except KeyboardInterrupt:
        return exits.OK


async def _serve(setup: Setup, options: McpServeOptions) -> int:
    from tether.serve.mcp_server import MCPAgentServer
    from tether.serve.mcp_transports import serve_mcp_http, serve_mcp_stdio

    try:
        async with mcp_tools(setup) as connected:
            agent = connected.agent(yes=options.yes, interactive=False)
            server = MCPAgentServer(agent, name=options.name, on_run_end=_ended)
            if options.http:
                await serve_mcp_http(
                    server, host=options.host, port=options.port, token=options.token,
                    on_ready=lambda url: _say(f"serving the tool {server.name!r} at {url}"),
                )  # fmt: skip
            else:
                await serve_mcp_stdio(server)
    except ConfigInvalid as error:
        _say(f"error: {error.message}")
        return exits.CONFIG
    finally:
        await close_store(setup.store)
    return exits.OK


def _ended(result: RunResult[Any]) -> None:
    _say(f"run {result.run_id}: {result.stop_reason} after {result.turns} turn{'' if result.turns == 1 else 's'}")


def _say(line: str) -> None:
    """A line on stderr: over stdio, stdout is the protocol's."""
    print(line, file=sys.stderr, flush=True)
