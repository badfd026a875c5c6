"""Where each key of a TOML text is written: key path -> line, so that messages can say "line 7".

Neither ``tomllib`` nor ``tomlkit`` reports positions of keys, so this module reads the text once more. It
is given only text that already parsed, which keeps it small: it follows table headers (``[a.b]``), arrays of
tables (``[[mcp.servers]]``, numbered from 0 like the parsed list), dotted and quoted keys, and steps over
values (strings of every kind, arrays and inline tables that span lines, comments) without reading them.
A key inside an inline value is reported at the line of the key that holds the value.

The work is linear in the text: lines are counted once, as the scan moves forward, and key paths are
recorded down to :data:`DEPTH_LIMIT` levels only (a deeper key is reported at the line of its ancestor at
that depth), so neither a file of a hundred thousand keys nor a header of ten thousand dotted parts makes it
slow. :func:`nesting_line` finds where a text nests its values too deeply, for a file ``tomllib`` gave up on.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence

Path = tuple[str | int, ...]

_BARE = re.compile(r"[A-Za-z0-9_-]+")

DEPTH_LIMIT = 32
"""The deepest key path a configuration may hold (tables, arrays and their elements all count as levels);
the schema's deepest is five (``mcp.servers[0].env.NAME``)."""


def key_lines(text: str) -> dict[Path, int]:
    """Every key and table of ``text`` (valid TOML) with the 1-based line where it is first written."""
    return _Scanner(text).scan()


def line_of(lines: dict[Path, int], loc: Sequence[str | int]) -> int | None:
    """The line of ``loc``, or of the nearest enclosing key or table that is written in the text."""
    for end in range(len(loc), 0, -1):
        line = lines.get(tuple(loc[:end]))
        if line is not None:
            return line
    return None


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.line_at = (0, 1)
        """The last position whose line was counted, and its line: counting resumes from there."""
        self.lines: dict[Path, int] = {}
        self.tables: Path = ()
        self.arrays: dict[tuple[str, ...], int] = {}
        """Arrays of tables seen so far (by their header's key path) -> the index of their last element."""

    def scan(self) -> dict[Path, int]:
        text = self.text
        while True:
            self._skip_blank(newlines=True)
            if self.i >= len(text):
                return self.lines
            line = self._line()
            if text[self.i] == "[":
                self._header(line)
            else:
                keys = self._key()
                self._record(self.tables, keys, line)
                self._skip_blank(newlines=False)
                self.i += 1  # "="
                self._skip_value()

    def _line(self) -> int:
        counted, line = self.line_at
        line += self.text.count("\n", counted, self.i)
        self.line_at = (self.i, line)
        return line

    def _header(self, line: int) -> None:
        is_array = self.text.startswith("[[", self.i)
        self.i += 2 if is_array else 1
        keys = self._key()
        self._skip_blank(newlines=False)
        self.i += 2 if is_array else 1
        path: list[str | int] = []
        keys = keys[:DEPTH_LIMIT]
        for end, key in enumerate(keys, start=1):
            path.append(key)
            index = self.arrays.get(tuple(keys[:end]))
            if end == len(keys) and is_array:
                index = -1 if index is None else index
                self.arrays[tuple(keys)] = index + 1
                self.lines.setdefault(tuple(path), line)
                path.append(index + 1)
            elif index is not None:
                path.append(index)
            self.lines.setdefault(tuple(path), line)
        self.tables = tuple(path)

    def _record(self, base: Path, keys: list[str], line: int) -> None:
        path = list(base)
        for key in keys[: max(0, DEPTH_LIMIT - len(path))]:
            path.append(key)
            self.lines.setdefault(tuple(path), line)

    def _key(self) -> list[str]:
        """A (dotted) key starting at ``self.i``; leaves ``self.i`` after it."""
        keys: list[str] = []
        text = self.text
        while True:
            self._skip_blank(newlines=False)
            char = text[self.i]
            if char == '"':
                end = self._basic_string_end(self.i + 1)
                keys.append(tomllib.loads(f"k = {text[self.i : end]}")["k"])
                self.i = end
            elif char == "'":
                end = text.index("'", self.i + 1) + 1
                keys.append(text[self.i + 1 : end - 1])
                self.i = end
            else:
                match = _BARE.match(text, self.i)
                assert match is not None, "the text parsed, so a key is here"
                keys.append(match.group())
                self.i = match.end()
            self._skip_blank(newlines=False)
            if self.i < len(text) and text[self.i] == ".":
                self.i += 1
                continue
            return keys

    def _skip_blank(self, *, newlines: bool) -> None:
        text = self.text
        while self.i < len(text):
            char = text[self.i]
            if char in " \t\r" or (newlines and char == "\n"):
                self.i += 1
            elif char == "#" and newlines:
                end = text.find("\n", self.i)
                self.i = len(text) if end < 0 else end
            else:
                return

    def _basic_string_end(self, i: int) -> int:
        """Just past the closing quote of a one-line basic string whose content starts at ``i``."""
        text = self.text
        while text[i] != '"':
            i += 2 if text[i] == "\\" else 1
        return i + 1

    def _skip_value(self) -> None:
        """Step over one value (it may span lines), then past the end of its line."""
        text, i, depth = self.text, self.i, 0
        while i < len(text):
            if text.startswith('"""', i):
                i += 3
                while not text.startswith('"""', i):
                    i += 2 if text[i] == "\\" else 1
                i += 3
                while i < len(text) and text[i] == '"':
                    i += 1
                continue
            if text.startswith("'''", i):
                i = text.index("'''", i + 3) + 3
                while i < len(text) and text[i] == "'":
                    i += 1
                continue
            char = text[i]
            if char == '"':
                i = self._basic_string_end(i + 1)
            elif char == "'":
                i = text.index("'", i + 1) + 1
            elif char == "#":
                end = text.find("\n", i)
                i = len(text) if end < 0 else end
            elif char in "[{":
                depth, i = depth + 1, i + 1
            elif char in "]}":
                depth, i = depth - 1, i + 1
            elif char == "\n" and depth == 0:
                break
            else:
                i += 1
        self.i = i


_TOKEN = re.compile(r"\"\"\"|'''|[\"'#\[\]{}]")
_BASIC = re.compile(r'"(?:[^"\\\n]|\\.)*+"?')
_TRIPLE_LITERAL = "'" * 3
_TRIPLE_END = {'"""': re.compile(r'(?:[^"\\]|\\.|"(?!""))*+"""'), _TRIPLE_LITERAL: re.compile(_TRIPLE_LITERAL)}


def nesting_line(text: str, limit: int = DEPTH_LIMIT) -> int | None:
    """The 1-based line where arrays and inline tables of ``text`` first nest more than ``limit`` deep.

    For a file that failed to parse because of its nesting: brackets inside strings and comments are not
    counted; a header's brackets open and close on its line. ``None`` when no value nests that deep.
    """
    depth, i = 0, 0
    while (match := _TOKEN.search(text, i)) is not None:
        token, i = match.group(), match.end()
        if token in _TRIPLE_END:
            pattern = _TRIPLE_END[token]
            closing = pattern.search(text, i) if token == _TRIPLE_LITERAL else pattern.match(text, i)
            i = len(text) if closing is None else closing.end()
        elif token == '"':
            basic = _BASIC.match(text, i - 1)
            i = basic.end() if basic is not None else i
        elif token in "'#":
            end = text.find("'" if token == "'" else "\n", i)
            i = len(text) if end < 0 else end + (token == "'")
        elif token in "[{":
            depth += 1
            if depth > limit:
                return text.count("\n", 0, i) + 1
        else:
            depth = max(0, depth - 1)
    return None


_KEY_PART = r"""(?:[A-Za-z0-9_-]++|"(?:[^"\\\n]|\\.)*+"|'[^'\n]*+')"""
_DEEP_KEY = re.compile(
    rf"^[ \t]*+\[{{0,2}}[ \t]*+(?:{_KEY_PART}[ \t]*+\.[ \t]*+){{{DEPTH_LIMIT}}}{_KEY_PART}", re.MULTILINE
)


def deep_key_line(text: str) -> tuple[str, int] | None:
    """The first key or table header of ``text`` written with more than ``DEPTH_LIMIT`` dotted parts, and
    its 1-based line; checked before parsing, since ``tomllib``'s work grows with the square of the parts.

    Each line start is tried once and reads at most ``DEPTH_LIMIT + 1`` parts, so the work is linear.
    """
    match = _DEEP_KEY.search(text)
    if match is None:
        return None
    return match.group().strip(" \t["), text.count("\n", 0, match.start()) + 1
