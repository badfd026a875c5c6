"""``tether skills list``: the skills ``tether run`` and ``tether chat`` would give the model, and where each is.

The same skills the agent gets (``cli/build.py``'s :func:`~tether.cli.build.find_skills`): ``[agent] skills``,
then the project's ``.tether/skills/``, then the user's ``skills/`` beside their ``config.toml``; a skill
shadowed by one of the same name found earlier is listed too, marked so, and so is a broken one found there
(which a run skips with a warning), with why. This module imports only click; the command loads the
configuration (``--config`` read as everywhere) when it runs. Exit codes: 0, or 1 for a configuration problem
or a malformed ``SKILL.md`` named in ``[agent] skills`` (the message names the file and what to change).
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
    kept, shadowed, broken = list(found), list(found.shadowed), list(found.broken)
    if as_json:
        rows: list[dict[str, object]] = [
            {"name": s.name, "description": s.description, "folder": str(s.folder), "shadowed": hidden, "broken": None}
            for hidden, group in ((False, kept), (True, shadowed))
            for s in group
        ]
        rows += [
            {
                "name": e.skill_folder.name, "description": None, "folder": str(e.skill_folder), "shadowed": False,
                "broken": {"code": e.code, "reason": e.reason, "path": str(e.path), "message": e.problem},
            }
            for e in broken
        ]  # fmt: skip
        click.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    if not kept and not broken:
        click.echo("no skills: put them in .tether/skills/, or name their folders in [agent] skills")
        return
    table = [("NAME", "FOLDER", "DESCRIPTION")]
    table += [(s.name, str(s.folder), s.description) for s in kept]
    table += [(s.name, f"{s.folder} (shadowed)", s.description) for s in shadowed]
    table += [(e.skill_folder.name, f"{e.skill_folder} (broken)", f"{e.reason}: {e.problem}") for e in broken]
    click.echo("\n".join(aligned(table, free_last=True)))
