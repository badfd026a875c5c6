"""``tether serve``'s work (``cli/serve_commands.py`` has its options and contract): the agent chosen, the bind
checked, the app made and served by uvicorn in the command's event loop."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tether.cli import eventloop, exits
from tether.cli.build import NoModel, Setup, close_store, config_problem, load_python_setup, load_setup, mcp_tools
from tether.errors import ConfigInvalid, TetherError

__all__ = ["GRACE", "ServeOptions", "main"]

GRACE = 3
"""Seconds the open streams get to end on SIGINT or SIGTERM; then their runs are cancelled (and saved)."""


@dataclass(frozen=True, slots=True)
class ServeOptions:
    """What ``tether serve`` was asked."""

    agent: str | None = None
    host: str = "127.0.0.1"
    port: int = 8000
    token: str | None = None
    cors: tuple[str, ...] = ()
    on_disconnect: str = "cancel"
    max_runs: int = 64
    db: str | None = None
    yes: bool = False
    config_file: str | None = None


def main(options: ServeOptions, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> int:
    """Serve until stopped; the exit code."""
    from tether.serve.security import check_bind

    env = os.environ if env is None else env
    cwd = cwd or Path.cwd()
    try:
        check_bind(options.host, token=options.token)
        durable, setup = _chosen(options, cwd, env)
    except (ConfigInvalid, NoModel) as error:
        print(config_problem(error), file=sys.stderr)
        return exits.CONFIG
    for notice in setup.notices if setup is not None else ():
        print(f"notice: {notice}", file=sys.stderr)
    try:
        return eventloop.run(_serve(options, durable, setup), env)
    except ConfigInvalid as error:
        print(f"error: {error.message}", file=sys.stderr)
        return exits.CONFIG
    except (TetherError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return exits.ERROR


def _chosen(options: ServeOptions, cwd: Path, env: Mapping[str, str]) -> tuple[Any, Setup | None]:
    """A ``DurableAgent`` that ``--agent`` names (launched on ``--db``), or the setup of a plain agent."""
    if options.agent is not None:
        from tether.cli.python_agent import python_agent

        value = python_agent(options.agent, cwd)
        if hasattr(value, "enqueue"):  # a DurableAgent: its runs on the workflow database
            from tether.cli.runs_db import runs_database
            from tether.durable import launch

            launch(**runs_database(options.db, cwd, env).launch_arguments())  # type: ignore[arg-type]
            return value, None
        return None, load_python_setup(options.agent, cwd, env, options.config_file)
    return None, load_setup(cwd, env, {}, options.config_file)


async def _serve(options: ServeOptions, durable: Any, setup: Setup | None) -> int:
    if setup is None:
        return await _run_server(options, durable)
    try:
        async with mcp_tools(setup) as connected:
            agent = connected.agent(yes=options.yes, interactive=False)
            return await _run_server(options, agent)
    finally:
        await close_store(setup.store)


async def _run_server(options: ServeOptions, agent: Any) -> int:
    import uvicorn

    from tether.serve.app import create_app

    app = create_app(
        agent,
        token=options.token,
        cors_origins=options.cors,
        on_disconnect=options.on_disconnect,  # type: ignore[arg-type]  # click's choice
        max_concurrent_runs=options.max_runs,
    )
    config = uvicorn.Config(
        app, host=options.host, port=options.port, log_level="warning", lifespan="on", timeout_graceful_shutdown=GRACE
    )
    server = _server(config, options)
    await server.serve()
    return exits.OK if server.started else exits.ERROR


def _server(config: Any, options: ServeOptions) -> Any:
    """uvicorn's server, which says on stderr where it listens once it does (the port it got, for ``--port 0``)."""
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            """SIGINT or SIGTERM stops the server, which then exits 0 (uvicorn would raise the signal again
            once stopped); a second SIGINT stops it without waiting for its streams."""
            if self.should_exit and sig == signal.SIGINT:
                self.force_exit = True
            self.should_exit = True

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.should_exit:  # it could not bind: uvicorn said why
                return
            port = self.servers[0].sockets[0].getsockname()[1] if self.servers else options.port
            host = f"[{options.host}]" if ":" in options.host else options.host
            print(f"tether serve: listening on http://{host}:{port}/ (Ctrl-C stops it)", file=sys.stderr, flush=True)

    return Server(config)
