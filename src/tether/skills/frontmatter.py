"""A ``SKILL.md``'s front matter: the small part of YAML that skills write, read strictly.

Why not a YAML library: none is a dependency of tether (PyYAML is only a test's), and a front matter read by
PyYAML where it is installed and by something else where it is not would make a skill valid on one machine
and not on another. Skills' front matter is a handful of ``key: value`` lines, so this module reads that
subset itself, the same everywhere, and refuses, naming the line, anything it does not read (rather than
guess at it).

What it reads, between a first line ``---`` and the next line ``---``:

* ``key: value`` entries at the left margin (a key of letters, digits, ``_`` and ``-``; each key once);
  blank lines and ``#`` comments between them;
* a value is text: plain (``name: pdf-tools``; a `` #`` ends it; indented lines after it continue it, joined
  by spaces; it may begin on the line after its key), single-quoted (``''`` is a quote) or double-quoted
  (with YAML's backslash escapes), either of them over several lines too; a block (``|`` keeps the line
  breaks, ``>`` folds them into spaces; ``-`` drops the last line break, ``+`` keeps every trailing one);
  ``null``, ``~`` or nothing is no value (``None``);
* a list: ``[a, b]``, or ``- item`` lines under the key (indented or not);
* a mapping of text: ``{k: v}``, or indented ``k: v`` lines under the key (``metadata``).

Every value is text, as the Agent Skills format's fields are: ``version: 1.0`` is ``"1.0"``, never a number.
One deliberate leniency, as the format's guide for clients advises: a plain value may hold ``": "``
(``description: Use it when: the user asks``), which YAML itself would refuse. Anchors, aliases, tags,
nesting deeper than a list or a mapping of text, and flow collections inside flow collections are refused.

:func:`split` returns the fields and the body (the text after the closing ``---``); :class:`FrontMatterError`
says what is wrong and on which line of the file.
"""

from __future__ import annotations

import re

__all__ = ["FrontMatterError", "Value", "split"]

Value = str | list[str] | dict[str, str] | None
"""What a field holds: text, a list of text, a mapping of text, or nothing."""

_KEY = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_-]*)[ \t]*:(?:[ \t]+(.*))?$")
_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
_ESCAPES = {
    "0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v", "f": "\f", "r": "\r",
    "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85", "_": "\xa0", "L": "\u2028",
    "P": "\u2029",
}  # fmt: skip
_HEX = {"x": 2, "u": 4, "U": 8}
_BLOCK = re.compile(r"([|>])([+-]?)[ \t]*(?:#.*)?$")


class FrontMatterError(ValueError):
    """What is wrong with a front matter; ``line`` is the line of the file it is on (1 is the first)."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(f"line {line}: {message}")
        self.message = message
        self.line = line


def split(text: str) -> tuple[dict[str, Value], str] | None:
    """The fields of ``text``'s front matter and the body after it; ``None`` when ``text`` does not begin with
    one (its first line is not ``---``). :class:`FrontMatterError` when it begins one that is not closed or
    that this reader refuses."""
    lines = text.removeprefix("\ufeff").replace("\r\n", "\n").split("\n")
    if lines[0].rstrip() != "---":
        return None
    for end in range(1, len(lines)):
        if lines[end].rstrip() == "---":
            break
    else:
        raise FrontMatterError("the front matter has no closing '---' line", len(lines))
    fields = _Reader(lines[1:end]).fields()
    return fields, "\n".join(lines[end + 1 :])


class _Reader:
    """The front matter's lines (the file's line ``n + 2`` is ``lines[n]``), read entry by entry."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.at = 0

    def fail(self, message: str, index: int | None = None) -> FrontMatterError:
        return FrontMatterError(message, (self.at if index is None else index) + 2)

    def fields(self) -> dict[str, Value]:
        fields: dict[str, Value] = {}
        while self.at < len(self.lines):
            line = self.lines[self.at]
            if _skipped(line):
                self.at += 1
                continue
            if line[0] in " \t":
                raise self.fail("an indented line where a 'key: value' entry should begin")
            match = _KEY.match(line.rstrip())
            if match is None:
                raise self.fail(f"not a 'key: value' entry: {line.strip()[:60]!r}")
            key = match.group(1)
            if key in fields:
                raise self.fail(f"{key!r} is given twice")
            self.at += 1
            fields[key] = self.value(key, match.group(2) or "")
        return fields

    def value(self, key: str, text: str) -> Value:
        """The value of ``key``, whose line (already passed) ended with ``text``."""
        text = text.strip()
        if text.startswith("#"):
            text = ""
        if text in _NULLS:
            return self.nested(key)
        block = _BLOCK.match(text)
        if block is not None:
            return self.block(block.group(1), block.group(2))
        if text[0] in "[{":
            return self.flow(text, self.at - 1)
        return self.scalar(text, self.at - 1, indent=1)

    # --- values on the lines after the key ----------------------------------------------------------------

    def nested(self, key: str) -> Value:
        """What follows a key without a value on its line: a list, a mapping, or nothing."""
        start = self.at
        while start < len(self.lines) and _skipped(self.lines[start]):
            start += 1
        if start == len(self.lines):
            return None
        first = self.lines[start]
        indent = len(first) - len(first.lstrip(" "))
        if first.lstrip(" ").startswith("- ") or first.strip() == "-":
            self.at = start
            return self.sequence(indent)
        if indent == 0:
            return None
        if _KEY.match(first.strip()) is None:  # the value itself, on the lines after its key
            self.at = start + 1
            return self.scalar(first.strip(), start, indent=1)
        self.at = start
        return self.mapping(key, indent)

    def sequence(self, indent: int) -> list[str]:
        items: list[str] = []
        while self.at < len(self.lines):
            line = self.lines[self.at]
            if _skipped(line):
                self.at += 1
                continue
            here = len(line) - len(line.lstrip(" "))
            body = line.lstrip(" ")
            if here != indent or not (body.startswith("- ") or body.strip() == "-"):
                if here > indent:
                    raise self.fail("a list item holds more than one line of text: quote it, or give it on its line")
                break
            item = body[1:].strip()
            if not item or item.startswith("#"):
                raise self.fail("an empty list item")
            if item[0] in "[{" or item.startswith("- ") or _KEY.match(item):
                raise self.fail("a list item must be text, not a list or a mapping")
            self.at += 1
            items.append(self.scalar(item, self.at - 1, indent=indent + 1, continued=False))
        return items

    def mapping(self, key: str, indent: int) -> dict[str, str]:
        entries: dict[str, str] = {}
        while self.at < len(self.lines):
            line = self.lines[self.at]
            if _skipped(line):
                self.at += 1
                continue
            here = len(line) - len(line.lstrip(" "))
            if here < indent:
                if here > 0:
                    raise self.fail(f"the entries of {key!r} must line up")
                break
            if here > indent:
                raise self.fail(f"the entries of {key!r} must line up (a value over several lines: quote it)")
            match = _KEY.match(line.strip())
            if match is None:
                raise self.fail(f"not a 'key: value' entry of {key!r}: {line.strip()[:60]!r}")
            name, text = match.group(1), (match.group(2) or "").strip()
            if name in entries:
                raise self.fail(f"{key}.{name} is given twice")
            if text in _NULLS or text.startswith("#"):
                raise self.fail(f"{key}.{name} has no value: the values of {key!r} are text")
            if text[0] in "[{" or _BLOCK.match(text):
                raise self.fail(f"{key}.{name} must be text on its line (the values of {key!r} are text)")
            self.at += 1
            entries[name] = self.scalar(text, self.at - 1, indent=indent + 1, continued=False)
        return entries

    def block(self, style: str, chomp: str) -> str:
        """A ``|`` or ``>`` block: the indented lines after the key, blank ones within it kept."""
        taken: list[str] = []
        indent: int | None = None
        while self.at < len(self.lines):
            line = self.lines[self.at]
            if not line.strip():
                taken.append("")
                self.at += 1
                continue
            here = len(line) - len(line.lstrip(" "))
            if here == 0:
                break
            if indent is None:
                indent = here
            elif here < indent:
                raise self.fail("a block's lines must be indented at least as far as its first")
            taken.append(line[indent:])
            self.at += 1
        content = len(taken)
        while content and not taken[content - 1]:
            content -= 1
        trailing = len(taken) - content
        lines = taken[:content]
        text = "\n".join(lines) if style == "|" else _fold(lines)
        if not lines or chomp == "-":
            return text
        return text + ("\n" * (trailing + 1) if chomp == "+" else "\n")

    # --- values on one line (or continued on the next) ---------------------------------------------------

    def scalar(self, text: str, index: int, *, indent: int, continued: bool = True) -> str:
        """Text that begins on line ``index``: quoted (perhaps over more lines) or plain."""
        if text[0] in "&*!":
            raise self.fail("anchors, aliases and tags are not read here: write the value itself", index)
        if text[0] in "@`":
            raise self.fail(f"a value beginning with {text[0]!r} must be quoted", index)
        if text[0] in "'\"":
            return self.quoted(text, index, indent)
        words = [_plain(text)]
        while continued and self.at < len(self.lines):
            line = self.lines[self.at]
            if not line.strip() or len(line) - len(line.lstrip(" ")) < indent or line.lstrip(" ").startswith("#"):
                break
            words.append(_plain(line.strip()))
            self.at += 1
        return " ".join(word for word in words if word)

    def quoted(self, text: str, index: int, indent: int) -> str:
        quote = text[0]
        pieces = [text]
        while not _closes(" ".join(pieces), quote):
            if self.at >= len(self.lines) or len(self.lines[self.at]) - len(self.lines[self.at].lstrip()) < indent:
                raise self.fail(f"a {quote}quoted{quote} value is not closed", index)
            pieces.append(self.lines[self.at].strip())
            self.at += 1
        joined = " ".join(pieces)
        end = _closes(joined, quote)
        assert end is not None
        rest = joined[end + 1 :].strip()
        if rest and not rest.startswith("#"):
            raise self.fail(f"text after the closing {quote}: {rest[:40]!r}", index)
        inner = joined[1:end]
        return inner.replace("''", "'") if quote == "'" else self.unescape(inner, index)

    def unescape(self, inner: str, index: int) -> str:
        out: list[str] = []
        at = 0
        while (slash := inner.find("\\", at)) >= 0:
            out.append(inner[at:slash])
            code = inner[slash + 1 : slash + 2]
            if code in _HEX:
                digits = inner[slash + 2 : slash + 2 + _HEX[code]]
                if len(digits) != _HEX[code] or not all(c in "0123456789abcdefABCDEF" for c in digits):
                    raise self.fail(f"\\{code} needs {_HEX[code]} hexadecimal digits", index)
                out.append(chr(int(digits, 16)))
                at = slash + 2 + _HEX[code]
            elif code in _ESCAPES:
                out.append(_ESCAPES[code])
                at = slash + 2
            else:
                raise self.fail(f"unknown escape \\{code} in a double-quoted value", index)
        out.append(inner[at:])
        return "".join(out)

    def flow(self, text: str, index: int) -> list[str] | dict[str, str]:
        """``[a, "b"]`` or ``{k: v}`` on one line, of text only."""
        close = "]" if text[0] == "[" else "}"
        items: list[str] = []
        current: list[str] = []
        quote: str | None = None
        at = 1
        while at < len(text):
            char = text[at]
            if quote is not None:
                current.append(char)
                if char == quote and not (quote == "'" and text[at + 1 : at + 2] == "'"):
                    quote = None
                elif quote == "'" and char == "'":
                    current.append("'")
                    at += 1
                elif quote == '"' and char == "\\":
                    current.append(text[at + 1 : at + 2])
                    at += 1
            elif char in "'\"":
                quote = char
                current.append(char)
            elif char in "[{":
                raise self.fail("a list or mapping inside a list or mapping is not read here", index)
            elif char in ",]}":
                items.append("".join(current).strip())
                current = []
                if char != ",":
                    if char != close:
                        raise self.fail(f"{text[0]!r} is closed by {char!r}", index)
                    break
            else:
                current.append(char)
            at += 1
        else:
            raise self.fail(f"{text[0]!r} is not closed on its line", index)
        rest = text[at + 1 :].strip()
        if rest and not rest.startswith("#"):
            raise self.fail(f"text after {close!r}: {rest[:40]!r}", index)
        if items and not items[-1]:
            items.pop()  # a trailing comma
        if any(not item for item in items):
            raise self.fail("an empty item", index)
        if close == "]":
            return [self.scalar(item, index, indent=0, continued=False) for item in items]
        entries: dict[str, str] = {}
        for item in items:
            match = _KEY.match(item)
            if match is None or not match.group(2):
                raise self.fail(f"not a 'key: value' entry: {item[:40]!r}", index)
            entries[match.group(1)] = self.scalar(match.group(2).strip(), index, indent=0, continued=False)
        return entries


def _skipped(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


def _plain(text: str) -> str:
    """A plain value's text on one line: up to a comment (`` #``)."""
    cut = text.find(" #")
    return (text if cut < 0 else text[:cut]).strip()


def _closes(text: str, quote: str) -> int | None:
    """Where the quoted value that opens ``text`` closes, or ``None`` when it does not on this text."""
    at = 1
    while at < len(text):
        char = text[at]
        if quote == '"' and char == "\\":
            at += 2
            continue
        if char == quote:
            if quote == "'" and text[at + 1 : at + 2] == "'":
                at += 2
                continue
            return at
        at += 1
    return None


def _fold(lines: list[str]) -> str:
    """A ``>`` block's lines folded: a line break between two lines of text becomes a space, a blank line a
    line break; lines indented further than the block keep their breaks."""
    out = ""
    previous: str | None = None
    for line in lines:
        if previous is None:
            out = line
        elif not line:
            out += "\n"
        elif not previous or line[0] in " \t" or previous[0] in " \t":
            out += ("\n" if previous else "") + line
        else:
            out += " " + line
        previous = line
    return out
