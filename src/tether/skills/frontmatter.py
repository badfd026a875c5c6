"""A ``SKILL.md``'s front matter: the YAML between a first line ``---`` and the next, read by PyYAML.

Why PyYAML: the front matter is YAML, written by people and by other clients' tools, and a reader of its
subset kept here would be one more YAML dialect to maintain, test and explain; PyYAML (``pyyaml``, a core
dependency) is the library every Python client of the format uses, reads the whole language the same
everywhere (the C loader, ``CSafeLoader``, when libyaml is there, else the pure-Python one, which agree on
what they accept), and says on which line a document goes wrong. It is imported here, when a ``SKILL.md``
is first read, never by ``import tether``.

How it is read, on top of ``yaml.safe_load``:

* **every value is text**, as the Agent Skills format's fields are: a scalar keeps the text it was written
  with (``version: 1.0`` is ``"1.0"``, ``date: 2025-01-01`` is ``"2025-01-01"``, ``x: yes`` is ``"yes"``),
  except ``null``, ``~`` and nothing, which are no value (``None``). The loader is a ``SafeLoader`` whose only
  implicit type is null; checking each field against the format's rules is ``folder.py``'s job;
* **anchors, aliases and tags are refused**, naming the line: no skill needs them, and an alias is how a small
  document grows large; so is nesting deeper than :data:`MAX_DEPTH`, refused before anything is built;
* **a key given twice is refused**, naming its second line (YAML forbids it; PyYAML would keep the last);
* **one leniency**, as the format's guide for clients advises: a plain value holding ``": "``
  (``description: Use it when: the user asks``), which YAML refuses, is read as if it were quoted. On the
  scanner's error for such a line, the line's value (and the indented lines continuing it) is quoted and the
  text read again.

Malformed YAML is :class:`FrontMatterError`, with the line of the file it is on (yaml's ``problem_mark``) and
yaml's own words for what is wrong.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    import yaml

__all__ = ["MAX_DEPTH", "MAX_QUOTED", "FrontMatterError", "Value", "split"]

Value = Any
"""What a field holds once read: text, ``None``, or lists and mappings of them (``folder.py`` checks which)."""

MAX_DEPTH = 32
"""Collections inside collections, at most (a skill's fields need two or three)."""

MAX_QUOTED = 64
"""Lines quoted by the leniency, at most (each is one more reading of the whole front matter)."""

FIRST_LINE = 2
"""The file's line of the front matter's first line (the file's first line is ``---``)."""

_NULL = "tag:yaml.org,2002:null"
_PLAIN_ENTRY = re.compile(r"(?P<key>[ \t]*[^\s#'\"\[\]{}&*!|>%@`,?:-][^:]*?)[ \t]*:[ \t]+(?P<value>\S.*)$")
_NOT_PLAIN = tuple("'\"[{|>&*!%@`")
_COLON = re.compile(r":(?:[ \t]|$)")


class FrontMatterError(ValueError):
    """What is wrong with a front matter; ``line`` is the line of the file it is on (1 is the first)."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(f"line {line}: {message}")
        self.message = message
        self.line = line


def split(text: str) -> tuple[dict[str, Value], str] | None:
    """The fields of ``text``'s front matter and the body after it; ``None`` when ``text`` does not begin with
    one (its first line is not ``---``). :class:`FrontMatterError` when it begins one that is not closed or
    not read (see the module docstring)."""
    lines = text.removeprefix("\ufeff").replace("\r\n", "\n").split("\n")
    if lines[0].rstrip() != "---":
        return None
    for end in range(1, len(lines)):
        if lines[end].rstrip() == "---":
            break
    else:
        raise FrontMatterError("the front matter has no closing '---' line", len(lines))
    return _fields(lines[1:end]), "\n".join(lines[end + 1 :])


def _fields(lines: list[str]) -> dict[str, Value]:
    """The front matter's lines read: a mapping of keys to values, the leniency applied line by line."""
    import yaml

    quoted: set[int] = set()
    while True:
        try:
            return _read("\n".join(lines))
        except yaml.scanner.ScannerError as error:
            mark = error.problem_mark
            if (
                mark is None
                or mark.line in quoted
                or len(quoted) >= MAX_QUOTED
                or not _quote_value(lines, mark.line, mark.column)
            ):
                refusal = _refusal(error, "\n".join(lines))
                if len(quoted) >= MAX_QUOTED:
                    refusal = FrontMatterError(f"{refusal.message}: quote the values that hold ': '", refusal.line)
                raise refusal from None
            quoted.add(mark.line)
        except yaml.YAMLError as error:
            raise _refusal(error, "\n".join(lines)) from None


def _read(text: str) -> dict[str, Value]:
    import yaml

    loader = _text_loader()
    _check_events(yaml.parse(text, Loader=loader))
    fields = yaml.load(text, Loader=loader)  # a SafeLoader, whose scalars are text
    if fields is None:
        return {}
    if not isinstance(fields, dict):
        raise FrontMatterError("the front matter must be 'key: value' lines", FIRST_LINE)
    return fields


def _check_events(events: Any) -> None:
    """Refuse anchors, aliases, tags and deep nesting, from the parser's events: before anything is built."""
    import yaml

    depth = 0
    for event in events:
        line = event.start_mark.line + FIRST_LINE
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise FrontMatterError("anchors, aliases and tags are not read here: write the value itself", line)
        if isinstance(event, yaml.ScalarEvent | yaml.CollectionStartEvent) and event.tag is not None:
            raise FrontMatterError(f"anchors, aliases and tags are not read here: remove {event.tag!r}", line)
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise FrontMatterError(f"nested deeper than {MAX_DEPTH} lists or mappings", line)
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _quote_value(lines: list[str], index: int, column: int) -> bool:
    """Quote the plain value of ``lines[index]`` (a ``key: value`` line whose value holds ``": "``, the
    scanner's complaint being at ``column``, inside the value) and of the more indented lines continuing it;
    the continuing lines are left blank, so that every line keeps its number. ``False``: not such a line."""
    entry = _PLAIN_ENTRY.match(lines[index]) if index < len(lines) else None
    if entry is None or column < entry.start("value") or entry["value"].startswith(_NOT_PLAIN):
        return False
    if not _COLON.search(entry["value"]):
        return False
    indent = len(entry["key"]) - len(entry["key"].lstrip())
    parts = [_uncommented(entry["value"])]
    following = index + 1
    while following < len(lines) and lines[following].strip() and _indent(lines[following]) > indent:
        parts.append(_uncommented(lines[following].strip()))
        lines[following] = ""
        following += 1
    value = " ".join(part for part in parts if part)
    lines[index] = f"{entry['key']}: '{value.replace(chr(39), chr(39) * 2)}'"
    return True


def _uncommented(text: str) -> str:
    """A plain value without the comment that `` #`` begins."""
    return text.split(" #", 1)[0].split("\t#", 1)[0].strip()


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _refusal(error: yaml.YAMLError, text: str) -> FrontMatterError:
    """``error`` said on the line of the file it is on, in yaml's words."""
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    # a reader's error (a character YAML does not take) has a position instead of a mark
    at = mark.line if mark is not None else text[: getattr(error, "position", 0)].count("\n")
    line = at + FIRST_LINE
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    context = getattr(error, "context", None)
    context_mark = getattr(error, "context_mark", None)
    if context and context_mark is not None and context_mark.line + FIRST_LINE != line:
        problem = f"{problem} ({context} on line {context_mark.line + FIRST_LINE})"
    elif context:
        problem = f"{problem} ({context})"
    return FrontMatterError(problem, line)


@functools.cache
def _text_loader() -> type[Any]:
    """A safe loader (the C one when libyaml is there) whose scalars are the text written, null aside, and
    which refuses a key given twice or a key that is not text."""
    import yaml

    base: type[Any] = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader

    class TextLoader(base):  # type: ignore[misc]
        yaml_implicit_resolvers: ClassVar[dict[Any, Any]] = {
            first: [(tag, pattern) for tag, pattern in resolvers if tag == _NULL]
            for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
            if any(tag == _NULL for tag, _ in resolvers)
        }

        def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
            seen: set[object] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                if not isinstance(key, str):
                    raise FrontMatterError("a key must be text", key_node.start_mark.line + FIRST_LINE)
                if key in seen:
                    raise FrontMatterError(f"{key!r} is given twice", key_node.start_mark.line + FIRST_LINE)
                seen.add(key)
            mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
            return mapping

    return TextLoader
