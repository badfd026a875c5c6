"""``tether skills list``: the skills ``tether run`` and ``tether chat`` would give the model, and where each is.

The same skills the agent gets (``cli/build.py``'s :func:`~tether.cli.build.find_skills`): ``[agent] skills``,
then the project's ``.tether/skills/``, then the user's ``skills/`` beside their ``config.toml``; a skill
shadowed by one of the same name found earlier is listed too, marked so. This module imports only click; the
command loads the configuration (``--config`` read as everywhere) when it runs. Exit codes: 0, or 1 for a
configuration problem or a malformed ``SKILL.md`` (the message names the file and what to change).
"""

from __future__ import annotations

import sys

import click

from tether.cli.config_flag import config_option, group_config_option
from tether.cli.help import WholeSummaries


@click.group("skills", cls=WholeSummaries)
@group_config_option
def skills() -> None:
    """List the skills the agent is given ([agent] skills, .tether/skills/, the user's skills/)."""


@skills.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@config_option
def list_(as_json: bool, config_file: str | None) -> None:
    """List the skills by name, with their folder and description."""
    import json
    import os
    from pathlib import Path

    from tether.cli.build import find_skills
    from tether.cli.table import aligned
    from tether.config import load_config
    from tether.errors import ConfigInvalid

    try:
        config = load_config(Path.cwd(), os.environ, config_file=config_file)
        found = find_skills(config.agent, Path.cwd(), os.environ)
    except ConfigInvalid as error:
        click.echo(f"error: {error.message}", err=True)
        sys.exit(1)
    kept = list(found) if found is not None else []
    shadowed = list(found.shadowed) if found is not None else []
    if as_json:
        rows = [
            {"name": s.name, "description": s.description, "folder": str(s.folder), "shadowed": hidden}
            for hidden, group in ((False, kept), (True, shadowed))
            for s in group
        ]
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    if not kept:
        click.echo("no skills: put them in .tether/skills/, or name their folders in [agent] skills")
        return
    table = [("NAME", "FOLDER", "DESCRIPTION")]
    table += [(s.name, str(s.folder), s.description) for s in kept]
    table += [(s.name, f"{s.folder} (shadowed)", s.description) for s in shadowed]
    click.echo("\n".join(aligned(table, free_last=True)))
