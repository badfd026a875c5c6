"""Skills: folders of instructions, scripts and files in the Agent Skills layout, loaded by the model on demand
(docs/agents.md, "Skills").

``Agent(skills=[paths])`` lists each skill's name and description in the system prompt and gives the model
the read-only tool ``load_skill``, which returns a skill's instructions and the list of its files, or one of
its files; a skill's scripts run through the ``bash`` tool, inside its sandbox.

* ``frontmatter.py``: the front matter of a ``SKILL.md``, the part of YAML skills write, read strictly;
* ``folder.py``: ``Skill``, one skill's folder read and checked, its body and files; ``SkillInvalid``;
* ``tool.py``: the instructions block and the ``load_skill`` tool;
* ``discovery.py``: ``Skills``, the skills of several folders, each name once, and which folder wins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether._lazy import lazy_face

_EXPORTS: dict[str, str] = {
    "Skill": "tether.skills.folder",
    "SkillInvalid": "tether.skills.folder",
    "Skills": "tether.skills.discovery",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_face(__name__, _EXPORTS)

if TYPE_CHECKING:
    from tether.skills.discovery import Skills as Skills
    from tether.skills.folder import Skill as Skill
    from tether.skills.folder import SkillInvalid as SkillInvalid
