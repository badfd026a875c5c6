"""The command lists of ``--help``: each command's summary whole, wrapped, never cut with ``...``.

Why: click shortens a command's summary to what fits on one line beside its name (about 45 characters at 80
columns) and ends it with ``...``; tether's summaries are one sentence that says what the command is for, and
cut, they say half of it. Every group of the command line takes :class:`WholeSummaries` as its class; like
the modules of the commands, this one imports only click, so ``tether --help`` answers at once.
"""

from __future__ import annotations

import click

WHOLE = 1_000
"""Characters a summary may have before click would cut it: more than any first sentence."""


class WholeSummaries(click.Group):
    """A click group whose command list shows each command's first sentence whole, wrapped beside its name."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(WHOLE)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
