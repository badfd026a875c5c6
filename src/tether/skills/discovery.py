"""Skills: the skills an agent has, found in folders, each name once; what the model is told of them.

A path given is a skill's folder (it holds a ``SKILL.md``) or a folder of skills (each of its folders that holds
a ``SKILL.md`` is one; hidden folders and folders without one are passed over). :meth:`Skills.load` takes paths
that must exist: a path that is neither is ``SkillInvalid`` (``not_found``, ``no_skill``), and so is a name two
of them give (``duplicate``), since neither can be said to be meant.

:meth:`Skills.discover` takes levels of paths, the first level first: a skill of an earlier level shadows a
skill of the same name in a later one (kept in :attr:`Skills.shadowed`, and logged), and a folder of a later
level that does not exist is passed over. The command line's levels are ``[agent] skills`` (explicit paths),
then the project's ``.tether/skills/``, then the user's ``skills/`` beside their ``config.toml``
(``cli/build.py``): what a project or its user named wins over what is merely installed.

Every skill is checked when it is found, so a broken ``SKILL.md`` is reported before any run, not in the middle
of one: a skill named (:meth:`Skills.load`, the first level of :meth:`Skills.discover`) is ``SkillInvalid``,
since it was asked for; a skill merely found in a later level is skipped, kept in :attr:`Skills.broken` and
logged as a warning (``tether: skipped the skill ...``, naming the file, the code and the reason), so that a
broken skill in a user's folder does not stop every command in every project.

The skills are kept sorted by name, so the instructions they make are the same for the same folders, whatever
order the file system lists them in (the prompt cache keeps working).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tether._logging import get_logger
from tether.skills.folder import SKILL_FILE, Skill, SkillInvalid, read_skill
from tether.skills.tool import instructions, skill_tool

if TYPE_CHECKING:
    from tether.tools.base import Tool

__all__ = ["Skills", "skills_at"]

log = get_logger("tether.skills")


class Skills:
    """The skills an agent has, by name (see the module docstring): ``Agent(skills=...)`` takes paths or one of
    these. Iterating gives the skills sorted by name."""

    __slots__ = ("_skills", "broken", "shadowed")

    def __init__(
        self, skills: Iterable[Skill] = (), *, shadowed: Iterable[Skill] = (), broken: Iterable[SkillInvalid] = ()
    ) -> None:
        by_name: dict[str, Skill] = {}
        for skill in skills:
            if not isinstance(skill, Skill):
                raise TypeError(f"Skills holds Skill objects, not {type(skill).__name__}")
            other = by_name.get(skill.name)
            if other is not None and other.folder != skill.folder:
                raise _duplicate(skill, other)
            by_name[skill.name] = skill
        self._skills = tuple(sorted(by_name.values(), key=lambda skill: skill.name))
        self.shadowed: tuple[Skill, ...] = tuple(shadowed)
        """Skills passed over because one of an earlier level had their name (:meth:`discover`)."""
        self.broken: tuple[SkillInvalid, ...] = tuple(broken)
        """Why each skill found but not named was skipped (:meth:`discover`): its ``path``, ``reason``, ``problem``."""

    @classmethod
    def load(cls, paths: Iterable[str | os.PathLike[str]]) -> Skills:
        """The skills at ``paths`` (each a skill's folder or a folder of skills), all of which must exist."""
        if isinstance(paths, str | bytes | os.PathLike):
            raise SkillInvalid(str(paths), "not_found", "skills must be a list of paths, not one path")
        found: list[Skill] = []
        for path in paths:
            found.extend(skills_at(path, required=True))
        return cls(found)

    @classmethod
    def discover(cls, *levels: Iterable[str | os.PathLike[str]]) -> Skills:
        """The skills of ``levels``, an earlier level's shadowing a later one's of the same name. The first
        level's paths were named: they must exist, and a broken skill there is ``SkillInvalid``; a folder of a
        later level that does not exist is passed over, and a broken skill there is skipped with a warning
        (:attr:`broken`)."""
        kept: dict[str, Skill] = {}
        shadowed: list[Skill] = []
        broken: list[SkillInvalid] = []
        for number, level in enumerate(levels):
            here: list[Skill] = []
            for path in level:
                here.extend(skills_at(path, required=number == 0, broken=None if number == 0 else broken))
            for skill in Skills(here):  # a name twice in one level is refused
                if skill.name in kept:
                    shadowed.append(skill)
                    log.info(
                        "skill %r in %s is shadowed by the one in %s", skill.name, skill.folder, kept[skill.name].folder
                    )
                else:
                    kept[skill.name] = skill
        for error in broken:
            log.warning(
                "tether: skipped the skill %s: %s (%s): %s", error.path, error.code, error.reason, error.problem
            )
        return cls(kept.values(), shadowed=shadowed, broken=broken)

    @property
    def names(self) -> list[str]:
        return [skill.name for skill in self._skills]

    @property
    def folders(self) -> tuple[str, ...]:
        """Every skill's folder (absolute, symlinks resolved): give them to the ``bash`` tool's sandbox as
        ``read_only_paths`` so that the skills' scripts can run in it."""
        return tuple(str(skill.folder) for skill in self._skills)

    def instructions(self, *, scripts: bool = True) -> str | None:
        """What the system prompt says of the skills: each one's name and description and how to load it
        (``scripts``: and how to run its scripts, for an agent with the ``bash`` tool); ``None`` for none."""
        return instructions(self._skills, scripts=scripts) if self._skills else None

    def tool(self) -> Tool | None:
        """The read-only ``load_skill`` tool over these skills; ``None`` for none (no tool is offered then)."""
        return skill_tool(self._skills) if self._skills else None

    def __getitem__(self, name: str) -> Skill:
        for skill in self._skills:
            if skill.name == name:
                return skill
        raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        return any(skill.name == name for skill in self._skills)

    def __iter__(self) -> Iterator[Skill]:
        return iter(self._skills)

    def __len__(self) -> int:
        return len(self._skills)

    def __bool__(self) -> bool:
        return bool(self._skills)

    def __repr__(self) -> str:
        return f"Skills({self.names!r})"


def skills_at(
    path: str | os.PathLike[str], *, required: bool, broken: list[SkillInvalid] | None = None
) -> Sequence[Skill]:
    """The skills at ``path``: its own, when it holds a ``SKILL.md``, else those of its folders that do.
    ``required``: a path that does not exist, or holds no skill, is ``SkillInvalid``; else it gives none.
    ``broken``: a skill that cannot be read is added to it and skipped, instead of raising."""
    folder = Path(os.path.expanduser(os.fspath(path)))
    if not folder.is_dir():
        if required:
            raise SkillInvalid(folder, "not_found", "no such folder (skills are folders holding a SKILL.md)")
        return ()
    if (folder / SKILL_FILE).exists():
        return _read([folder], broken)
    try:
        entries = sorted(entry for entry in os.listdir(folder) if not entry.startswith("."))
    except OSError as error:
        refused = SkillInvalid(folder, "unreadable", f"cannot be listed: {error.strerror or error}")
        if broken is None:
            raise refused from None
        broken.append(refused)
        return ()
    found = _read([folder / entry for entry in entries if (folder / entry / SKILL_FILE).exists()], broken)
    if not found and required:
        raise SkillInvalid(folder, "no_skill", f"holds no {SKILL_FILE}, nor any folder with one")
    return found


def _read(folders: Iterable[Path], broken: list[SkillInvalid] | None) -> list[Skill]:
    found: list[Skill] = []
    for folder in folders:
        try:
            found.append(read_skill(folder))
        except SkillInvalid as error:
            if broken is None:
                raise
            broken.append(error)
    return found


def _duplicate(skill: Skill, other: Skill) -> SkillInvalid:
    return SkillInvalid(
        skill.file, "duplicate", f"the skill {skill.name!r} is also in {other.folder}: remove or rename one of them"
    )
