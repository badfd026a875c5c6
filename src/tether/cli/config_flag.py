"""``--config PATH``: the one option every command that reads configuration takes, wherever it is written.

A group whose commands all read configuration (``tether config``, ``tether sessions``) takes it before its
command, and each of its commands takes it after itself too, so ``tether config --config team.toml show``
and ``tether config show --config team.toml`` do the same. Given at both places, the later one (after the
command) wins, as a repeated option does. The value travels through ``click.Context.meta``, which a group's
context shares with its command's.

This module imports only click, as the command modules must (``tether --help`` answers at once).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

F = TypeVar("F", bound=Callable[..., object])

HELP = "Read PATH instead of ./agent.toml (also TETHER_CONFIG; this flag wins)."
_META_KEY = "tether.config_file"


def _remember(context: click.Context, parameter: click.Parameter, value: str | None) -> str | None:
    """The group's ``--config``, kept for its command."""
    if value is not None:
        context.meta[_META_KEY] = value
    return value


def _resolve(context: click.Context, parameter: click.Parameter, value: str | None) -> str | None:
    """The command's ``--config``, else its group's."""
    if value is not None:
        return value
    given: str | None = context.meta.get(_META_KEY)
    return given


def group_config_option(group: F) -> F:
    """``--config PATH`` on a group, for its commands (which take :func:`config_option` too); not passed to
    the group's function."""
    option = click.option("--config", "config_file", metavar="PATH", help=HELP, callback=_remember, expose_value=False)
    return option(group)


def config_option(command: F) -> F:
    """``--config PATH`` on a command, passed as ``config_file``: the command's own, else its group's."""
    option = click.option("--config", "config_file", metavar="PATH", help=HELP, callback=_resolve)
    return option(command)
