"""One skill: a folder in the Agent Skills layout, read and checked; its body, its files, and reading one.

A skill is a folder holding a ``SKILL.md``: front matter (:mod:`tether.skills.frontmatter`, every value read as
text) whose ``name`` and ``description`` say what it is and when to use it, then a Markdown body of
instructions; beside it, any files (``scripts/``, ``references/``, ``assets/``, ...). The checks are the format's:

* ``name``: 1-64 characters, lowercase letters, digits and single hyphens, neither first nor last
  (``pdf-tools``), and the folder's own name;
* ``description``: text, not empty, at most 1,024 characters;
* ``license``: text; ``compatibility``: text, 1-500 characters; ``metadata``: a mapping of text to text;
  ``allowed-tools``: a space-separated text or a list of text (kept, never acted on: tether's permissions
  decide what runs). Other fields (other clients' own) are left alone.

A ``SKILL.md`` that breaks one is refused with :class:`SkillInvalid` (code ``skill_invalid``, a
``ConfigInvalid``), whose ``details`` name the file and the reason (one of :data:`REASONS`), and whose message
says what to change.

Reading a skill's files is confined to its folder, as the workspace's tools are to theirs
(:mod:`tether.tools.workspace`): a path leading outside it (``..``, an absolute path, a symlink whose target is
outside) is refused with ``permission_denied``; only regular text files are read, and only up to
:data:`MAX_FILE_BYTES`. The body and the files are read when asked for, not when the skill is found, so an
edited skill shows its new text to the next load.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Literal

from tether.bounded import NotRegular, TooLarge, read_bounded
from tether.errors import ConfigInvalid, ErrorCode, PermissionDenied, ToolError
from tether.skills.frontmatter import FrontMatterError, Value, split
from tether.tools.files import SNIFF_BYTES, looks_binary
from tether.tools.workspace import Workspace

__all__ = ["MAX_FILE_BYTES", "MAX_SKILL_BYTES", "REASONS", "SKILL_FILE", "Skill", "SkillInvalid", "read_skill"]

SKILL_FILE = "SKILL.md"
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
MAX_SKILL_BYTES = 1024 * 1024
"""The largest ``SKILL.md`` read (the format advises a body under 5,000 tokens: a few tens of kilobytes)."""
MAX_FILE_BYTES = 1024 * 1024
"""The largest file of a skill the load tool returns; a larger one is for ``bash`` (``head``, ``sed -n``)."""
MAX_LISTED = 200
"""Files of a skill listed when it is loaded; the rest are counted."""
MAX_WALKED = 10_000
"""Files of a skill looked at to list them: a folder holding more costs a bounded time, its count a lower bound."""
SKIPPED = frozenset({"__pycache__", "node_modules"})
"""Folders whose files are never listed (nor are hidden ones, whose names begin with ``.``)."""

_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")

Reason = Literal[
    "not_found", "no_skill", "unreadable", "too_large", "no_front_matter", "front_matter", "missing_field",
    "bad_name", "name_mismatch", "bad_field", "duplicate",
]  # fmt: skip
REASONS: tuple[str, ...] = Reason.__args__  # type: ignore[attr-defined]
"""Why a skill is refused, as ``SkillInvalid.details["reason"]`` says it."""


class SkillInvalid(ConfigInvalid):
    """A skill, or a folder named as one, cannot be used: ``details["path"]`` is the file or folder, and
    ``details["reason"]`` one of :data:`REASONS` (``bad_name``, ``name_mismatch``, ``duplicate``, ...)."""

    code: ClassVar[ErrorCode] = "skill_invalid"

    def __init__(self, path: str | os.PathLike[str], reason: Reason, message: str) -> None:
        super().__init__(f"{os.fspath(path)}: {message}", details={"path": os.fspath(path), "reason": reason})
        self.path = Path(path)
        self.reason = reason
        self.problem = message
        """What is wrong, without the path."""

    @property
    def skill_folder(self) -> Path:
        """The folder of the skill refused (the path itself when it is not a ``SKILL.md``)."""
        return self.path.parent if self.path.name == SKILL_FILE else self.path


@dataclass(frozen=True, slots=True)
class Skill:
    """A skill found on disk: what its front matter says, and where it is. Its body and files are read when
    asked for (:meth:`body`, :meth:`files`, :meth:`read`)."""

    name: str
    description: str
    folder: Path
    """The skill's folder, absolute and with every symlink resolved: its files are read from here, and its
    scripts run from here."""
    license: str | None = None
    compatibility: str | None = None
    metadata: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    allowed_tools: tuple[str, ...] = ()
    """The ``allowed-tools`` the skill names (an experimental field of the format): kept, never acted on."""

    @property
    def file(self) -> Path:
        """The skill's ``SKILL.md``."""
        return self.folder / SKILL_FILE

    def body(self) -> str:
        """The instructions: ``SKILL.md`` after its front matter, read now. ``SkillInvalid`` when the file is
        gone or no longer a skill's."""
        return _parse(self.file, None)[1]

    def files(self) -> tuple[list[str], int]:
        """The skill's files but ``SKILL.md``, as paths relative to its folder, sorted, at most
        :data:`MAX_LISTED` of them; and how many more there are. Hidden files and folders, ``__pycache__``
        and ``node_modules`` are left out, and so is a symlink leading outside the folder."""
        found: list[str] = []
        root = str(self.folder)
        for where, folders, names in os.walk(root):
            folders[:] = sorted(f for f in folders if not f.startswith(".") and f not in SKIPPED)
            for name in names:
                path = os.path.join(where, name)
                if name.startswith(".") or path == str(self.file) or not _inside(root, os.path.realpath(path)):
                    continue
                found.append(os.path.relpath(path, root))
            if len(found) >= MAX_WALKED:
                break
        found.sort()
        return found[:MAX_LISTED], max(0, len(found) - MAX_LISTED)

    def read(self, file: str) -> str:
        """The text of the skill's ``file`` (a path relative to its folder). ``PermissionDenied`` for a path
        leading outside the folder; ``ToolError`` for a file that is missing, not a regular file, binary, or
        larger than :data:`MAX_FILE_BYTES`."""
        root = str(self.folder)
        if not file.strip():
            raise ToolError("The file is empty; give a path relative to the skill's folder.")
        if "\0" in file:
            raise PermissionDenied(f"The path {file!r} contains a NUL character.")
        if os.path.isabs(file):
            raise PermissionDenied(f"Refused: {file!r} is absolute; give a path relative to the skill's folder.")
        joined = os.path.join(root, file)
        real = os.path.realpath(joined)
        if not _inside(root, real):
            how = "goes through a symlink that leads" if _inside(root, os.path.normpath(joined)) else "is"
            raise PermissionDenied(f"Refused: {file!r} {how} outside the folder of skill {self.name!r}.")
        folder = Workspace(root)
        resolved = folder.resolve(real)  # loops, devices, FIFOs: refused as the workspace refuses them
        if resolved.is_dir():
            raise ToolError(f"{file!r} is a folder of skill {self.name!r}, not a file; load a file inside it.")
        fd = folder.open_file(resolved)  # O_NOFOLLOW, a regular file, still inside after the open
        with os.fdopen(fd, "rb") as stream:
            data = stream.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise ToolError(
                f"{file!r} is larger than {MAX_FILE_BYTES // 1024} KiB, too large to load: read parts of it with "
                f"bash (head, sed -n) at {resolved}."
            )
        if looks_binary(data[:SNIFF_BYTES]):
            raise ToolError(f"{file!r} is a binary file; use it by its path, {resolved}.")
        return data.decode("utf-8", "replace")


def read_skill(folder: str | os.PathLike[str]) -> Skill:
    """The skill in ``folder`` (which holds its ``SKILL.md``), checked; ``SkillInvalid`` saying why not."""
    given = Path(folder)
    real = Path(os.path.realpath(given))
    fields, _ = _parse(real / SKILL_FILE, given.name)
    return Skill(
        name=str(fields["name"]),
        description=" ".join(str(fields["description"]).split()),
        folder=real,
        license=_text(fields, "license", real / SKILL_FILE),
        compatibility=_text(fields, "compatibility", real / SKILL_FILE, limit=MAX_COMPATIBILITY),
        metadata=MappingProxyType(_metadata(fields, real / SKILL_FILE)),
        allowed_tools=_allowed_tools(fields, real / SKILL_FILE),
    )


def _parse(path: Path, folder_name: str | None) -> tuple[dict[str, Value], str]:
    """``SKILL.md``'s fields, checked (``name``, against ``folder_name`` unless it is ``None``, and
    ``description``), and its body."""
    try:
        text = read_bounded(path, MAX_SKILL_BYTES).decode("utf-8", "replace")
    except FileNotFoundError:
        raise SkillInvalid(path, "not_found", f"there is no {SKILL_FILE} here") from None
    except TooLarge:
        kib = MAX_SKILL_BYTES // 1024
        raise SkillInvalid(path, "too_large", f"larger than {kib} KiB: move details to files beside it") from None
    except NotRegular as error:
        raise SkillInvalid(path, "unreadable", f"{SKILL_FILE} is {error.strerror}, not a file") from None
    except OSError as error:
        raise SkillInvalid(path, "unreadable", f"cannot be read: {error.strerror or error}") from None
    try:
        parsed = split(text)
    except FrontMatterError as error:
        raise SkillInvalid(path, "front_matter", f"its front matter, {error}") from None
    if parsed is None:
        raise SkillInvalid(
            path, "no_front_matter", "no front matter: the file must begin with a '---' line, then 'name: ...' "
            "and 'description: ...' lines, then a '---' line"
        )  # fmt: skip
    fields, body = parsed
    if folder_name is not None:
        _check_name(path, fields.get("name"), folder_name)
    description = fields.get("description")
    if description is None or (isinstance(description, str) and not description.strip()):
        raise SkillInvalid(path, "missing_field", "no description: say what the skill does and when to use it")
    if not isinstance(description, str):
        raise SkillInvalid(path, "bad_field", "the description must be text")
    if len(description) > MAX_DESCRIPTION:
        raise SkillInvalid(
            path, "bad_field", f"the description has {len(description)} characters, more than {MAX_DESCRIPTION}"
        )
    return fields, body.strip("\n")


def _check_name(path: Path, name: Value, folder_name: str) -> None:
    if name is None:
        raise SkillInvalid(path, "missing_field", f"no name: give 'name: {folder_name}' (the folder's name)")
    if not isinstance(name, str) or not _NAME.fullmatch(name) or len(name) > MAX_NAME:
        raise SkillInvalid(
            path, "bad_name", f"the name {name!r} must be 1-{MAX_NAME} lowercase letters, digits and single "
            "hyphens, neither first nor last (such as 'pdf-tools')"
        )  # fmt: skip
    if name != folder_name:
        raise SkillInvalid(
            path, "name_mismatch", f"the name {name!r} is not the folder's, {folder_name!r}: rename one of them"
        )


def _text(fields: Mapping[str, Value], key: str, path: Path, limit: int | None = None) -> str | None:
    value = fields.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise SkillInvalid(path, "bad_field", f"{key} must be text, not empty")
    if limit is not None and len(value) > limit:
        raise SkillInvalid(path, "bad_field", f"{key} has {len(value)} characters, more than {limit}")
    return value


def _metadata(fields: Mapping[str, Value], path: Path) -> dict[str, str]:
    value = fields.get("metadata")
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(item, str) for item in value.values()):
        raise SkillInvalid(path, "bad_field", "metadata must be a mapping of names to text (indented 'key: value')")
    return dict(value)


def _allowed_tools(fields: Mapping[str, Value], path: Path) -> tuple[str, ...]:
    value: Any = fields.get("allowed-tools")
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(value.split())
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise SkillInvalid(path, "bad_field", "allowed-tools must be text (names separated by spaces) or a list")


def _inside(root: str, real: str) -> bool:
    return real == root or real.startswith(root.rstrip(os.sep) + os.sep)
