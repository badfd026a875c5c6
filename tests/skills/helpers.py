"""Skills written to disk for the tests."""

from __future__ import annotations

from pathlib import Path


def write_skill(parent: Path, name: str, description: str = "", *, body: str = "", front: str | None = None) -> Path:
    """A folder ``parent/name`` holding a SKILL.md (``front``: its front matter's lines, else a name and a
    description); returns the folder."""
    folder = parent / name
    folder.mkdir(parents=True, exist_ok=True)
    lines = front if front is not None else f"name: {name}\ndescription: {description or 'Does ' + name + '.'}\n"
    (folder / "SKILL.md").write_text(f"---\n{lines}---\n{body or '# ' + name}\n")
    return folder
