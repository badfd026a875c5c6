"""``tether serve``: the agent over HTTP (the page, the JSON API, AG-UI, ``useChat``) with uvicorn.

Contract:

* The agent is the one the configuration describes (as ``tether run`` builds it, its MCP servers connected
  for the server's life; tools that change files or run commands are refused unless ``--yes``: nobody is at
  a terminal to be asked), or the Python ``Agent`` or ``DurableAgent`` ``--agent MODULE:ATTR`` names (a durable
  one's runs on the workflow database ``--db`` names, as for ``tether worker``).
* It binds ``--host`` (127.0.0.1 by default) and ``--port`` (8000). Another host needs ``--token`` (or
  ``TETHER_SERVE_TOKEN``): without one the command refuses to start (exit 1, the reason on stderr) before
  anything is bound. Every API request then carries ``Authorization: Bearer <token>``; the page's address with
  ``#token=<token>`` signs it in. ``--cors ORIGIN`` (repeatable) lets a browser page on ORIGIN call the API.
* ``--on-disconnect cancel|detach``: what a client that goes does to its run (``tether.serve.app``).
* One line on stderr says where it listens; SIGINT or SIGTERM stops it: the runs in flight are cancelled and
  saved, and it exits 0. Exit codes otherwise: 1 a configuration problem, 4 the server failed.
"""

from __future__ import annotations

import sys

import click

from tether.cli.config_flag import config_option

__all__ = ["serve"]

TOKEN_VARIABLE = "TETHER_SERVE_TOKEN"


@click.command()
@click.option("--agent", metavar="MODULE:ATTR", help="Serve this Python Agent or DurableAgent instead of agent.toml's.")
@click.option(
    "--host", default="127.0.0.1", show_default=True, help="The address to bind; another than loopback needs --token."
)
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="The port to bind (0: any free one)."
)
@click.option(
    "--token",
    envvar=TOKEN_VARIABLE,
    metavar="TOKEN",
    help=f"The bearer token every API request must carry (or {TOKEN_VARIABLE}).",
)
@click.option("--cors", multiple=True, metavar="ORIGIN", help="An origin whose pages may call the API (repeatable).")
@click.option(
    "--on-disconnect",
    type=click.Choice(["cancel", "detach"]),
    default="cancel",
    show_default=True,
    help="What a client's disconnect does to its run: cancel it, or let it finish.",
)
@click.option(
    "--max-runs",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    metavar="N",
    help="Runs in flight at once (429 beyond).",
)
@click.option(
    "--db", metavar="URL", help="A DurableAgent's workflow database: postgresql://..., sqlite:///... or a file."
)
@click.option("--yes", "-y", is_flag=True, help="Allow tools that change files or run commands.")
@config_option
def serve(
    agent: str | None,
    host: str,
    port: int,
    token: str | None,
    cors: tuple[str, ...],
    on_disconnect: str,
    max_runs: int,
    db: str | None,
    yes: bool,
    config_file: str | None,
) -> None:  # fmt: skip
    """Serve the agent over HTTP: a chat page at /, the JSON API under /api/, AG-UI at /agui and the AI SDK's
    useChat at /api/chat, until Ctrl-C or SIGTERM (exit 0).

    It binds 127.0.0.1 unless --host says otherwise; any other host needs --token (or TETHER_SERVE_TOKEN),
    else it refuses to start (exit 1). Exit codes: 0 stopped, 1 configuration problem, 4 the server failed.
    """
    from tether.cli.serving import ServeOptions
    from tether.cli.serving import main as serve_main

    options = ServeOptions(agent, host, port, token or None, cors, on_disconnect, max_runs, db, yes, config_file)
    sys.exit(serve_main(options))
