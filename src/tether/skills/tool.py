"""What the model is told of its skills, and the built-in tool that loads one.

* **The instructions** (:func:`instructions`): a block appended to the system prompt listing each skill's
  name and description (sorted by name, descriptions on one line) and how to load one. Nothing in it changes
  from one run to the next (no path of the machine, no time, no count of anything that grows), so a provider's
  prompt cache keeps holding the system prompt.
* **The tool** ``load_skill(name, file=None)`` (:func:`skill_tool`): read-only, so it is offered in read-only
  mode too. ``name`` is one of the skills' names (an ``enum`` in its schema: the model cannot ask for one that
  does not exist). Without ``file`` it returns the skill's body (``SKILL.md`` without its front matter), headed
  by where its folder is, and followed by the list of its files; with ``file`` (relative to the folder), that
  file's text. A path outside the folder is ``permission_denied``; a missing, binary or too large file is a
  plain error the model reads (:meth:`tether.skills.folder.Skill.read`). Nothing of a skill but its name and
  description reaches the model before it calls the tool.
* **Scripts** are not run by this tool: the body says where the skill's folder is, and the model runs a
  script with the ``bash`` tool, by its absolute path, so that the sandbox of ``bash`` confines it like any
  other command. The sandbox must be able to see the folder: ``Skills.folders`` are what to give the ``bash``
  tool as ``read_only_paths`` (the command line does).
"""

from __future__ import annotations

from collections.abc import Sequence

from tether.errors import InvalidArguments, ToolError
from tether.messages import JsonObject
from tether.skills.folder import Skill, SkillInvalid
from tether.tools.base import Tool

__all__ = ["LOAD_TOOL", "instructions", "skill_tool"]

LOAD_TOOL = "load_skill"
"""The built-in tool's name, reserved in an agent with skills."""

_HEAD = (
    "Skills: instructions, scripts and other files for particular tasks, one folder each. When a task matches "
    f"a skill's description, call {LOAD_TOOL} with its name before you begin, and follow what it says; "
    f"{LOAD_TOOL} with a file (a path relative to the skill's folder) reads one of the skill's files."
)
_SCRIPTS = " Run a skill's scripts with the bash tool, by their absolute paths: loading a skill names its folder."


def instructions(skills: Sequence[Skill], *, scripts: bool = True) -> str:
    """The block of the system prompt that lists ``skills`` (see the module docstring)."""
    lines = [_HEAD + (_SCRIPTS if scripts else ""), "", "Available skills:"]
    lines += [f"- {skill.name}: {skill.description}" for skill in sorted(skills, key=lambda skill: skill.name)]
    return "\n".join(lines)


def skill_tool(skills: Sequence[Skill]) -> Tool:
    """The ``load_skill`` tool over ``skills`` (at least one)."""
    by_name = {skill.name: skill for skill in skills}
    parameters: JsonObject = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "enum": sorted(by_name), "description": "The skill's name."},
            "file": {
                "type": "string",
                "description": "A file of the skill, relative to its folder (as the skill's file list gives it); "
                "leave it out to load the skill's instructions.",
            },
        },
        "required": ["name"],
        "additionalProperties": False,
    }

    def load_skill(arguments: JsonObject) -> str:
        skill = by_name.get(str(arguments["name"]))
        if skill is None:  # the schema's enum already refuses it; kept for a caller of the function itself
            raise InvalidArguments(f"No skill is named {arguments['name']!r}: choose one of {', '.join(by_name)}.")
        file = arguments.get("file")
        if file is not None and str(file).strip() not in ("", "SKILL.md"):
            return skill.read(str(file))
        return _loaded(skill)

    description = (
        "Load a skill: its instructions and the list of its files; or, with file, one of its files. "
        "Skills are listed in the system prompt."
    )
    return Tool.from_schema(LOAD_TOOL, description, parameters, load_skill, read_only=True, concurrent=True)


def _loaded(skill: Skill) -> str:
    """The skill's body, headed by its folder, followed by its files."""
    try:
        body = skill.body()
    except SkillInvalid as error:  # edited or removed since it was found
        raise ToolError(f"The skill {skill.name!r} cannot be loaded now: {error.message}") from None
    files, more = skill.files()
    parts = [
        f'<skill name="{skill.name}" folder="{skill.folder}">',
        body.strip("\n"),
        "</skill>",
    ]
    if files:
        listing = "\n".join(f"- {file}" for file in files)
        extra = f"\n(and {more} more)" if more else ""
        parts.append(
            f"Files of the skill (relative to {skill.folder}; load one with {LOAD_TOOL} and file, run a script "
            f"by its absolute path):\n{listing}{extra}"
        )
    else:
        parts.append("The skill has no other files.")
    return "\n".join(parts[:3]) + "\n\n" + parts[3]
