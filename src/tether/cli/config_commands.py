"""``tether config``: show, set, init, migrate and locate the configuration.

This module imports only click: ``tether --help`` lists the group without loading pydantic or tomlkit,
which each command imports when it runs. The group's ``--config PATH`` (or ``TETHER_CONFIG``) names the file
every subcommand uses instead of ``./agent.toml``; each subcommand takes it after itself too
(:mod:`tether.cli.config_flag`). Exit codes: 0 success; 1 the configuration is invalid
(the message names the key and its line) or a file is in the way or missing; 2 a usage error (click's, or a
malformed key).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from tether.cli.config_flag import config_option, group_config_option
from tether.cli.help import WholeSummaries

if TYPE_CHECKING:
    from tether.config.load import Layer, ProjectFile


@click.group("config", cls=WholeSummaries)
@group_config_option
def config() -> None:
    """Show, edit and migrate the configuration.

    Settings come from, the first found winning: command-line flags, TETHER_* environment variables,
    ./agent.toml (or the file --config or TETHER_CONFIG names), then the user's config.toml (under
    $XDG_CONFIG_HOME/tether, else ~/.config/tether). A file in the older layout is read too, with a notice;
    `tether config migrate` rewrites it. --config PATH may come before the command or after it.
    """


def _project(config_file: str | None) -> ProjectFile:
    from tether.config.load import project_file

    return project_file(Path.cwd(), os.environ, config_file)


def _notices(notices: tuple[str, ...]) -> None:
    for notice in notices:
        click.echo(f"notice: {notice}", err=True)


@config.command("show")
@click.option("--json", "as_json", is_flag=True, help="Print the configuration as JSON.")
@config_option
def show(config_file: str | None, as_json: bool) -> None:
    """Print the effective configuration, secrets hidden, with where each value came from."""
    from tether.config.service import ConfigService
    from tether.config.show import render_json, render_toml
    from tether.errors import ConfigInvalid

    try:
        loaded = ConfigService(Path.cwd(), os.environ, config_file=config_file).load()
    except ConfigInvalid as error:
        _invalid(error.message)
    _notices(loaded.notices)
    click.echo(render_json(loaded, os.environ) if as_json else render_toml(loaded, os.environ), nl=not as_json)
    if as_json:
        click.echo()


def _user_layer() -> list[Layer]:
    """The user's file as the layer below the project's, for validating an edit of the project's file."""
    from tether.config.load import read_file, user_path

    layer = read_file(user_path(os.environ))
    return [] if layer is None else [layer]


@config.command("set")
@click.argument("key")
@click.argument("value")
@click.option("--user", is_flag=True, help="Change the user's config.toml instead of ./agent.toml (or --config).")
@config_option
def set_(config_file: str | None, key: str, value: str, user: bool) -> None:
    """Set KEY (dotted: runtime.model, runtime.limits.max_turns, tools.mode) to VALUE.

    VALUE is read as a TOML value when it is one (5, true, ["a", "b"]), else as a string. The whole file is
    validated before it is written; comments and formatting elsewhere are kept, and no copy of the file is
    left beside it (the project's directory is the agent's workspace). Changes made at once (other terminals,
    a chat's --save) wait for each other, so each keeps the others' keys.
    """
    from tether.config.load import split_key
    from tether.config.service import ConfigService
    from tether.errors import ConfigInvalid

    try:
        split_key(key)
    except ConfigInvalid as error:
        raise click.BadParameter(error.message, param_hint="KEY") from None
    try:
        path = ConfigService(Path.cwd(), os.environ, config_file=config_file).set(key, value, user=user)
    except ConfigInvalid as error:
        _invalid(error.message)
    click.echo(f"set {key} in {path}")


@config.command("init")
@click.option("--user", is_flag=True, help="Write the user's config.toml instead of ./agent.toml (or --config).")
@click.option("--force", is_flag=True, help="Overwrite an existing file (the old one is kept as <file>.bak).")
@config_option
def init(config_file: str | None, user: bool, force: bool) -> None:
    """Write a configuration file with every setting documented and commented out."""
    from tether.config.service import ConfigService
    from tether.errors import ConfigInvalid

    service = ConfigService(Path.cwd(), os.environ, config_file=config_file)
    path = service.user_file if user else service.project.path
    try:
        service.init(user=user, force=force)
    except FileExistsError:
        click.echo(f"error: {path} already exists; use --force to overwrite it", err=True)
        sys.exit(1)
    except ConfigInvalid as error:
        _invalid(error.message)
    click.echo(f"wrote {path}")


@config.command("path")
@config_option
def path(config_file: str | None) -> None:
    """Print the configuration files tether reads, lowest precedence first."""
    from tether.config.load import user_path

    project = _project(config_file)
    named = f" (named by {project.given_by})" if project.given_by else ""
    for label, file in (("user", user_path(os.environ)), ("project", project.path)):
        click.echo(f"{label}: {file}{'' if file.exists() else ' (not found)'}{named if label == 'project' else ''}")


@config.command("migrate")
@click.argument("file", metavar="[PATH]", required=False)
@config_option
def migrate(config_file: str | None, file: str | None) -> None:
    """Rewrite a file of the older layout in tether's layout, in place.

    PATH defaults to the --config (or TETHER_CONFIG) file, else ./agent.toml. Each key of the older layout
    moves to the tether key loading reads it as, the one its notice names (runtime.default_model ->
    runtime.model, llm.retry_max -> runtime.retries, ...), milliseconds becoming seconds; comments are kept.
    The result is validated before it is written, and the previous file is kept as <file>.bak. A file
    already in tether's layout is left as it is.
    """
    from tether.config.edit import backup_path
    from tether.config.load import user_path
    from tether.config.migrate import migrate_file
    from tether.errors import ConfigInvalid

    target = Path.cwd() / file if file else _project(config_file).path
    below = [] if target == user_path(os.environ) else _user_layer()
    try:
        migration = migrate_file(target, below=below, env=os.environ)
    except ConfigInvalid as error:
        _invalid(error.message)
    if not migration.moves:
        click.echo(f"{target} is already in tether's layout; nothing to change")
        return
    for line in migration.lines():
        click.echo(f"moved {line}")
    click.echo(f"migrated {target} (the previous file is {backup_path(target)})")


def _invalid(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(1)
