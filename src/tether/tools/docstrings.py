"""Read a tool's description and its parameters' descriptions from a docstring.

Three styles are understood, since users write all three: Google (``Args:``), NumPy (``Parameters`` over a
line of dashes) and Sphinx (``:param name: ...``). The description is the text before the first section;
sections other than the parameters (returns, raises, examples) are left out of what the model reads.
"""

from __future__ import annotations

import inspect
import re
import textwrap
from dataclasses import dataclass, field

_GOOGLE_PARAM_SECTIONS = {"args", "arguments", "parameters", "params", "keyword args", "keyword arguments"}
_GOOGLE_SECTIONS = _GOOGLE_PARAM_SECTIONS | {
    "returns", "return", "yields", "yield", "raises", "raise", "examples", "example", "note", "notes",
    "attributes", "see also", "warning", "warnings", "references", "todo",
}  # fmt: skip
_NUMPY_PARAM_SECTIONS = {"parameters", "other parameters", "keyword arguments", "arguments"}
_SPHINX_FIELD = re.compile(r"^:(param|parameter|arg|argument|key|keyword|type|returns?|rtype|raises?|except)\b")
_SPHINX_PARAM = re.compile(r"^:(?:param|parameter|arg|argument|key|keyword)\s+(?:[^:]*\s)?\*{0,2}(\w+)\s*:(.*)$")
_GOOGLE_ENTRY = re.compile(r"^\*{0,2}(\w+)\s*(?:\((?:[^()]|\([^()]*\))*\))?\s*:(.*)$")
_NUMPY_ENTRY = re.compile(r"^(\*{0,2}\w+(?:\s*,\s*\*{0,2}\w+)*)\s*(?::.*)?$")


@dataclass(frozen=True, slots=True)
class Docstring:
    description: str = ""
    params: dict[str, str] = field(default_factory=dict)


def parse_docstring(doc: str | None) -> Docstring:
    """The description and per-parameter descriptions of ``doc`` (any of the three styles)."""
    if not doc or not doc.strip():
        return Docstring()
    lines = _clean(doc).splitlines()
    params: dict[str, str] = {}
    description_end = len(lines)
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if _is_numpy_header(lines, i):
            description_end = min(description_end, i)
            i = _read_numpy_section(lines, i, params)
        elif _is_google_header(lines[i]):
            description_end = min(description_end, i)
            i = _read_google_section(lines, i, params)
        elif _SPHINX_FIELD.match(stripped):
            description_end = min(description_end, i)
            i = _read_sphinx_field(lines, i, params)
        else:
            i += 1
    description = "\n".join(lines[:description_end]).strip()
    return Docstring(description=description, params=params)


def _clean(doc: str) -> str:
    """The docstring without its common indentation.

    ``inspect.cleandoc`` leaves the first line out when measuring the indentation, which is right for a
    summary line but wrong for a docstring that opens with a section (``Args:``) already dedented by
    ``inspect.getdoc``: it would flatten the section's entries to the header's level.
    """
    first = doc.lstrip("\n").split("\n", 1)[0].strip()
    if _is_google_header(first) or _SPHINX_FIELD.match(first):
        return textwrap.dedent(doc.expandtabs()).strip("\n")
    return inspect.cleandoc(doc)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _is_numpy_header(lines: list[str], i: int) -> bool:
    if i + 1 >= len(lines) or not lines[i].strip():
        return False
    underline = lines[i + 1].strip()
    return len(underline) >= 3 and set(underline) == {"-"} and _indent(lines[i + 1]) == _indent(lines[i])


def _is_google_header(line: str) -> bool:
    stripped = line.strip()
    return stripped.endswith(":") and stripped[:-1].strip().lower() in _GOOGLE_SECTIONS


def _block_end(lines: list[str], start: int, indent: int) -> int:
    """The first line at or after ``start`` that is not blank and not indented deeper than ``indent``."""
    i = start
    while i < len(lines) and (not lines[i].strip() or _indent(lines[i]) > indent):
        i += 1
    return i


def _read_google_section(lines: list[str], i: int, params: dict[str, str]) -> int:
    header_indent = _indent(lines[i])
    is_params = lines[i].strip()[:-1].strip().lower() in _GOOGLE_PARAM_SECTIONS
    end = _block_end(lines, i + 1, header_indent)
    body = lines[i + 1 : end]
    if is_params:
        entry_indent = min((_indent(line) for line in body if line.strip()), default=0)
        name: str | None = None
        for line in body:
            match = _GOOGLE_ENTRY.match(line.strip()) if _indent(line) == entry_indent else None
            if match:
                name = match.group(1)
                params[name] = match.group(2).strip()
            elif name is not None and line.strip():
                params[name] = f"{params[name]} {line.strip()}".strip()
    return end


def _read_numpy_section(lines: list[str], i: int, params: dict[str, str]) -> int:
    header_indent = _indent(lines[i])
    is_params = lines[i].strip().lower() in _NUMPY_PARAM_SECTIONS
    j = i + 2
    names: list[str] = []  # the entry being read; ``x, y : float`` documents two names at once
    while j < len(lines) and not _is_numpy_header(lines, j):
        line = lines[j]
        if is_params and line.strip():
            match = _NUMPY_ENTRY.match(line.strip()) if _indent(line) == header_indent else None
            if match:
                names = [name.strip().lstrip("*") for name in match.group(1).split(",")]
                for name in names:
                    params.setdefault(name, "")
            else:
                for name in names:
                    params[name] = f"{params[name]} {line.strip()}".strip()
        j += 1
    return j


def _read_sphinx_field(lines: list[str], i: int, params: dict[str, str]) -> int:
    end = _block_end(lines, i + 1, _indent(lines[i]))
    text = " ".join(line.strip() for line in lines[i:end] if line.strip())
    match = _SPHINX_PARAM.match(text)
    if match:
        params[match.group(1)] = match.group(2).strip()
    return end
