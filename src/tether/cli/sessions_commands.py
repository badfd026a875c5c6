"""``tether sessions``: list, show, delete and export the saved conversations.

This module imports only click; each command opens the configured store (``[session]``; SQLite in the XDG
data directory by default) when it runs, the configuration being the ``--config`` file when one is given
(before the command or after it, :mod:`tether.cli.config_flag`). Exit codes: 0 success, 1 no such session or
a configuration or storage problem, 2 a usage error.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, NoReturn, TypeVar

import click

from tether.cli.config_flag import config_option, group_config_option
from tether.cli.help import WholeSummaries

if TYPE_CHECKING:
    from tether.sessions import SessionStore

T = TypeVar("T")


@click.group("sessions", cls=WholeSummaries)
@group_config_option
def sessions() -> None:
    """List, show, delete and export saved sessions (every run and chat is one).

    The store is the one the configuration names ([session]); --config PATH reads PATH instead of
    ./agent.toml, before the command or after it.
    """


def _with_store(config_file: str | None, operation: Callable[[SessionStore], Awaitable[T]]) -> T:
    """Open the store the configuration (``config_file``: ``--config``) names, run ``operation`` on it, close
    it; problems exit with 1."""
    import asyncio
    import os
    from pathlib import Path

    from tether.cli.build import close_store, open_store, store_failures
    from tether.config import load_config
    from tether.errors import ConfigInvalid, SessionInvalid

    try:
        config = load_config(Path.cwd(), os.environ, config_file=config_file)
    except ConfigInvalid as error:
        _fail(error.message)
    store = open_store(config.session, Path.cwd(), os.environ)

    async def go() -> T:
        try:
            return await operation(store)
        finally:
            await close_store(store)

    try:
        return asyncio.run(go())
    except SessionInvalid as error:
        _fail(f"{error.message} (`tether sessions list` shows the sessions)")
    except store_failures(store) as error:
        _fail(f"the session store failed: {' '.join(str(error).split())}")


@sessions.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@config_option
def list_(as_json: bool, config_file: str | None) -> None:
    """List the sessions, most recent first."""
    import json

    from tether.cli.transcript import summary_json, summary_table

    summaries = _with_store(config_file, lambda store: store.list())
    if as_json:
        click.echo(json.dumps([summary_json(s) for s in summaries], indent=2))
    elif not summaries:
        click.echo("no sessions yet: `tether run` and `tether chat` save theirs")
    else:
        click.echo(summary_table(summaries))


@sessions.command("show")
@click.argument("session_id", metavar="ID")
@config_option
def show(session_id: str, config_file: str | None) -> None:
    """Print the conversation of session ID."""
    from tether.cli.transcript import to_markdown

    session = _with_store(config_file, lambda store: store.load(session_id))
    click.echo(to_markdown(session, full=False), nl=False)


@sessions.command("delete")
@click.argument("session_id", metavar="ID")
@config_option
def delete(session_id: str, config_file: str | None) -> None:
    """Delete session ID."""

    async def remove(store: SessionStore) -> None:
        await store.load(session_id)  # SessionNotFound for an unknown id: say so rather than do nothing
        await store.delete(session_id)

    _with_store(config_file, remove)
    click.echo(f"deleted {session_id}")


@sessions.command("export")
@click.argument("session_id", metavar="ID")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "markdown"]),
    default="json",
    show_default=True,
    help="json: the whole session, messages as tether stores them; markdown: for people.",
)
@config_option
def export(session_id: str, fmt: str, config_file: str | None) -> None:
    """Print session ID as JSON or Markdown on stdout."""
    import json

    from tether.cli.transcript import session_json, to_markdown

    session = _with_store(config_file, lambda store: store.load(session_id))
    if fmt == "json":
        click.echo(json.dumps(session_json(session), indent=2, ensure_ascii=False))
    else:
        click.echo(to_markdown(session, full=True), nl=False)


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(1)
