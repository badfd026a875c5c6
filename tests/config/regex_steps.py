"""A deterministic measure of a regular expression's work: the steps of a backtracking matcher.

Python's ``re`` engine reports nothing about the work it does, and wall time is not a measure a test may
assert on. So this module runs the same parsed pattern (``re._parser``) through a small backtracking matcher
with the semantics of ``re`` (leftmost match, greedy, lazy and possessive repeats, atomic groups, look-ahead
and fixed-width look-behind, case-insensitive groups) and counts its steps: one per pattern item tried at a
position, one per character a repeat reads, one per start position a search tries. ``re``'s own shortcuts
(prefix scans) only skip starts that fail, so the count bounds its work up to a constant factor, and a
pattern that backtracks quadratically here does so there.

:class:`Counting` wraps a compiled pattern: it answers with the real ``re`` result and adds the emulated
steps to a shared tally, so a module's patterns can be swapped for counting ones while its code runs as is.
Only the constructs the configuration's patterns use are supported; any other raises ``NotImplementedError``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from re import _constants as C  # type: ignore[attr-defined]  # noqa: N812 - the module's own short name
from re import _parser as P  # type: ignore[attr-defined]  # noqa: N812
from typing import Any

Cont = Callable[[int], bool]
_SINGLE = {C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN}


class Tally:
    """Steps counted so far, over every pattern that shares this tally."""

    def __init__(self) -> None:
        self.steps = 0


class _Matcher:
    def __init__(self, text: str, flags: int, tally: Tally) -> None:
        self.text, self.flags, self.tally = text, flags, tally

    # --- single characters ---

    def char_ok(self, op: Any, av: Any, pos: int, flags: int) -> bool:
        if pos >= len(self.text):
            return False
        ch = self.text[pos]
        fold = bool(flags & re.IGNORECASE)
        if op is C.ANY:
            return ch != "\n" or bool(flags & re.DOTALL)
        if op is C.LITERAL or op is C.NOT_LITERAL:
            same = ch == chr(av) or (fold and ch.lower() == chr(av).lower())
            return same if op is C.LITERAL else not same
        return self.in_set(av, ch, fold)

    def in_set(self, items: list[Any], ch: str, fold: bool) -> bool:
        negate = False
        found = False
        for op, av in items:
            if op is C.NEGATE:
                negate = True
            elif op is C.LITERAL:
                found |= ch == chr(av) or (fold and ch.lower() == chr(av).lower())
            elif op is C.RANGE:
                low, high = av
                found |= any(low <= ord(c) <= high for c in ({ch, ch.lower(), ch.upper()} if fold else {ch}))
            elif op is C.CATEGORY:
                found |= _category(av, ch)
            else:
                raise NotImplementedError(op)
        return found != negate

    # --- sequences ---

    def match(self, items: list[Any], i: int, pos: int, flags: int, k: Cont) -> bool:
        while i < len(items):
            op, av = items[i]
            self.tally.steps += 1
            if op in _SINGLE:
                if not self.char_ok(op, av, pos, flags):
                    return False
                pos, i = pos + 1, i + 1
            elif op is C.AT:
                if not self.at(av, pos, flags):
                    return False
                i += 1
            elif op is C.SUBPATTERN:
                _, add, remove, body = av
                inner = (flags | add) & ~remove
                rest = i + 1
                return self.match(body.data, 0, pos, inner, self.then(items, rest, flags, k))
            elif op is C.BRANCH:
                rest = i + 1
                return any(self.match(alt.data, 0, pos, flags, self.then(items, rest, flags, k)) for alt in av[1])
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
                return self.repeat(op, av, items, i + 1, pos, flags, k)
            elif op is C.ATOMIC_GROUP:
                end = self.first_end(av.data, pos, flags)
                return end is not None and self.match(items, i + 1, end, flags, k)
            elif op in (C.ASSERT, C.ASSERT_NOT):
                direction, body = av
                if direction == 1:
                    ok = self.match(body.data, 0, pos, flags, lambda q: True)
                else:
                    width = body.getwidth()[0]
                    ok = pos >= width and self.match(body.data, 0, pos - width, flags, _at(pos))
                if ok != (op is C.ASSERT):
                    return False
                i += 1
            else:
                raise NotImplementedError(op)
        return k(pos)

    def then(self, items: list[Any], rest: int, flags: int, k: Cont) -> Cont:
        """The continuation that matches ``items[rest:]`` and then ``k``."""
        return lambda q: self.match(items, rest, q, flags, k)

    def first_end(self, items: list[Any], pos: int, flags: int) -> int | None:
        found: list[int] = []
        self.match(items, 0, pos, flags, _record(found))
        return found[0] if found else None

    def repeat(self, op: Any, av: Any, items: list[Any], rest: int, pos: int, flags: int, k: Cont) -> bool:
        low, high, body = av
        high = len(self.text) + 1 if high is C.MAXREPEAT else high
        after: Cont = lambda q: self.match(items, rest, q, flags, k)  # noqa: E731
        if len(body.data) == 1 and body.data[0][0] in _SINGLE:
            item_op, item_av = body.data[0]
            if op is C.MIN_REPEAT:
                count = 0
                while True:
                    self.tally.steps += 1
                    if count >= low and after(pos + count):
                        return True
                    if count >= high or not self.char_ok(item_op, item_av, pos + count, flags):
                        return False
                    count += 1
            run = 0
            while run < high and self.char_ok(item_op, item_av, pos + run, flags):
                self.tally.steps += 1
                run += 1
            if run < low:
                return False
            if op is C.POSSESSIVE_REPEAT:
                return after(pos + run)
            for count in range(run, low - 1, -1):
                self.tally.steps += 1
                if after(pos + count):
                    return True
            return False
        if op is C.POSSESSIVE_REPEAT:
            count, end = 0, pos
            while count < high and (nxt := self.first_end(body.data, end, flags)) is not None and nxt != end:
                count, end = count + 1, nxt
            return count >= low and after(end)
        if op is C.MIN_REPEAT:
            raise NotImplementedError("lazy repeat of a group")

        def greedy(count: int, at: int) -> bool:
            self.tally.steps += 1
            more = count < high and self.match(body.data, 0, at, flags, lambda q: q != at and greedy(count + 1, q))
            return more or (count >= low and after(at))

        return greedy(0, pos)

    def at(self, where: Any, pos: int, flags: int) -> bool:
        text, multiline = self.text, bool(flags & re.MULTILINE)
        if where is C.AT_BEGINNING:
            return pos == 0 or (multiline and text[pos - 1] == "\n")
        if where is C.AT_BEGINNING_STRING:
            return pos == 0
        if where is C.AT_END:
            at_end = pos == len(text) or (pos == len(text) - 1 and text[pos] == "\n")
            return at_end or (multiline and pos < len(text) and text[pos] == "\n")
        if where is C.AT_END_STRING:
            return pos == len(text)
        raise NotImplementedError(where)


def _record(found: list[int]) -> Cont:
    def record(end: int) -> bool:
        found.append(end)
        return True

    return record


def _at(pos: int) -> Cont:
    return lambda end: end == pos


def _category(category: Any, ch: str) -> bool:
    if category is C.CATEGORY_SPACE:
        return ch.isspace()
    if category is C.CATEGORY_NOT_SPACE:
        return not ch.isspace()
    if category is C.CATEGORY_DIGIT:
        return ch.isdecimal()
    if category is C.CATEGORY_WORD:
        return ch.isalnum() or ch == "_"
    raise NotImplementedError(category)


class Counting:
    """A compiled pattern that answers as ``re`` does and counts the emulated steps into ``tally``."""

    def __init__(self, pattern: re.Pattern[str], tally: Tally) -> None:
        self.pattern, self.tally = pattern, tally
        self.items = P.parse(pattern.pattern, pattern.flags).data
        self.flags = pattern.flags

    def _span_from(self, text: str, pos: int, anchored: bool) -> tuple[int, int] | None:
        matcher = _Matcher(text, self.flags, self.tally)
        for start in range(pos, pos + 1 if anchored else len(text) + 1):
            self.tally.steps += 1
            ends: list[int] = []
            if matcher.match(self.items, 0, start, self.flags, _record(ends)):
                return start, ends[0]
        return None

    def _scan(self, text: str) -> None:
        pos = 0
        while pos <= len(text) and (span := self._span_from(text, pos, anchored=False)) is not None:
            pos = span[1] if span[1] > span[0] else span[1] + 1

    def search(self, text: str, pos: int = 0, endpos: int | None = None) -> re.Match[str] | None:
        self._span_from(text if endpos is None else text[:endpos], pos, anchored=False)
        return self.pattern.search(text, pos, len(text) if endpos is None else endpos)

    def match(self, text: str, pos: int = 0) -> re.Match[str] | None:
        self._span_from(text, pos, anchored=True)
        return self.pattern.match(text, pos)

    def fullmatch(self, text: str) -> re.Match[str] | None:
        matcher = _Matcher(text, self.flags, self.tally)
        matcher.match(self.items, 0, 0, self.flags, lambda q: q == len(text))
        return self.pattern.fullmatch(text)

    def sub(self, repl: Any, text: str) -> str:
        self._scan(text)
        return self.pattern.sub(repl, text)

    def findall(self, text: str) -> list[Any]:
        self._scan(text)
        return self.pattern.findall(text)


def steps(pattern: re.Pattern[str], text: str, mode: str = "scan") -> int:
    """The steps ``pattern`` takes on ``text``: ``scan`` (every match, as ``sub`` and ``findall``), ``search``,
    ``match`` or ``fullmatch``."""
    tally = Tally()
    counting = Counting(pattern, tally)
    modes: dict[str, Callable[[str], object]] = {
        "scan": counting.findall,
        "search": counting.search,
        "match": counting.match,
    }
    modes.get(mode, counting.fullmatch)(text)
    return tally.steps


def spans(pattern: re.Pattern[str], text: str) -> list[tuple[int, int]]:
    """Every match the emulation finds, as ``sub`` would (to check the emulation against ``re``)."""
    counting, found, pos = Counting(pattern, Tally()), [], 0
    while pos <= len(text) and (span := counting._span_from(text, pos, anchored=False)) is not None:
        found.append(span)
        pos = span[1] if span[1] > span[0] else span[1] + 1
    return found
