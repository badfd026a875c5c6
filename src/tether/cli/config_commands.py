"""``tether config``: show, set, init and locate the configuration.

This module imports only click: ``tether --help`` lists the group without loading pydantic or tomlkit,
which each command imports when it runs. Exit codes: 0 success; 1 the configuration is invalid (the
message names the key and its line) or a file is in the way; 2 a usage error (click's, or a malformed key).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import NoReturn

import click


@click.group("config")
def config() -> None:
    """Show and edit the configuration.

    Settings come from, the first found winning: command-line flags, TETHER_* environment variables,
    ./agent.toml, then the user's config.toml (under $XDG_CONFIG_HOME/tether, else ~/.config/tether).
    """


@config.command("show")
@click.option("--json", "as_json", is_flag=True, help="Print the configuration as JSON.")
def show(as_json: bool) -> None:
    """Print the effective configuration, secrets hidden, with where each value came from."""
    from tether.config.load import load
    from tether.config.show import render_json, render_toml
    from tether.errors import ConfigInvalid

    try:
        loaded = load(Path.cwd(), os.environ)
    except ConfigInvalid as error:
        _invalid(error.message)
    click.echo(render_json(loaded, os.environ) if as_json else render_toml(loaded, os.environ), nl=not as_json)
    if as_json:
        click.echo()


@config.command("set")
@click.argument("key")
@click.argument("value")
@click.option("--user", is_flag=True, help="Change the user's config.toml instead of ./agent.toml.")
def set_(key: str, value: str, user: bool) -> None:
    """Set KEY (dotted: runtime.model, runtime.limits.max_turns, tools.mode) to VALUE.

    VALUE is read as a TOML value when it is one (5, true, ["a", "b"]), else as a string. The whole file is
    validated before it is written; comments and formatting elsewhere are kept, and the previous file is
    kept as <file>.bak.
    """
    from tether.config.edit import set_value
    from tether.config.load import Layer, project_path, read_file, split_key, user_path
    from tether.errors import ConfigInvalid

    try:
        split_key(key)
    except ConfigInvalid as error:
        raise click.BadParameter(error.message, param_hint="KEY") from None
    user_file = user_path(os.environ)
    path = user_file if user else project_path(Path.cwd())
    try:
        below: list[Layer] = []
        if not user and (layer := read_file(user_file)) is not None:
            below.append(layer)
        set_value(path, key, value, below=below, env=os.environ)
    except ConfigInvalid as error:
        _invalid(error.message)
    click.echo(f"set {key} in {path}")


@config.command("init")
@click.option("--user", is_flag=True, help="Write the user's config.toml instead of ./agent.toml.")
@click.option("--force", is_flag=True, help="Overwrite an existing file (the old one is kept as <file>.bak).")
def init(user: bool, force: bool) -> None:
    """Write a configuration file with every setting documented and commented out."""
    from tether.config.edit import init_file
    from tether.config.load import project_path, user_path

    path = user_path(os.environ) if user else project_path(Path.cwd())
    try:
        init_file(path, force=force)
    except FileExistsError:
        click.echo(f"error: {path} already exists; use --force to overwrite it", err=True)
        sys.exit(1)
    click.echo(f"wrote {path}")


@config.command("path")
def path() -> None:
    """Print the configuration files tether reads, lowest precedence first."""
    from tether.config.load import project_path, user_path

    for label, file in (("user", user_path(os.environ)), ("project", project_path(Path.cwd()))):
        click.echo(f"{label}: {file}{'' if file.exists() else ' (not found)'}")


def _invalid(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(1)
