"""Degenerate repetition stopped: a small model that starts saying the same sentence again and again.

Greedy decoding (the embedded model's default) has a known failure: once a model repeats a sentence, the
repeat makes the next repeat more likely, and it goes on until the output limit, so the answer ends in the
same sentence twenty times and is cut mid-sentence. :class:`RepetitionGuard` watches the text as it is
generated and stops at the third copy of a span (at least :data:`MIN_UNIT` characters, with a letter in it,
at most :data:`MAX_UNIT`) written back to back: the answer keeps one copy, and the generation ends as a
normal stop.

Text cannot be taken back once the run has it, so the guard holds back the last ``2 * MAX_UNIT``
characters (the copies it may have to drop) and hands on only what is older; what it holds is released when
the generation ends. Under a JSON grammar (action mode) the answer must stay one valid JSON value: the kept
text is closed (:func:`close_json`: the open string, then the open objects and arrays), so that a ``final``
action cut at a repeat is still a ``final`` action.
"""

from __future__ import annotations

import json

MIN_UNIT = 10
"""Characters of the shortest span counted as a repeated sentence (shorter runs are lists, ASCII art, ...)."""
MAX_UNIT = 120
"""Characters of the longest span looked for; longer repeats are rare and need a bigger hold-back."""
COPIES = 3
"""Copies of a span back to back that make a repetition (the third is where the guard stops)."""


class RepetitionGuard:
    """Fed the generated text piece by piece (:meth:`feed`), says what may be handed on and when to stop."""

    __slots__ = ("_emitted", "_text", "stopped")

    def __init__(self) -> None:
        self._text = ""
        self._emitted = 0
        self.stopped = False
        """Whether a repetition was found: the generation should stop, and :meth:`finish` drops the copies."""

    def feed(self, piece: str) -> str:
        """Take ``piece``; return the text now safe to hand on (possibly empty). Once :attr:`stopped`, stop
        generating and call :meth:`finish`."""
        self._text += piece
        unit = repeated_unit(self._text)
        if unit:
            self._text = self._text[: kept_length(self._text, unit, floor=self._emitted)]
            self.stopped = True
            return ""
        safe = max(self._emitted, len(self._text) - (COPIES - 1) * MAX_UNIT)
        out, self._emitted = self._text[self._emitted : safe], safe
        return out

    def finish(self, *, json_mode: bool) -> str:
        """The text held back, to hand on at the end; closed as JSON when a repetition cut a JSON answer."""
        if self.stopped and json_mode:
            closed = close_json(self._text)
            if closed is not None:
                self._text = closed
        rest, self._emitted = self._text[self._emitted :], len(self._text)
        return rest

    @property
    def text(self) -> str:
        """Everything kept so far (handed on or held back)."""
        return self._text


def repeated_unit(text: str) -> int:
    """The length of a span :data:`COPIES` times repeated at the end of ``text`` (0: none)."""
    longest = min(MAX_UNIT, len(text) // COPIES)
    end = len(text)
    for size in range(MIN_UNIT, longest + 1):
        last = text[end - size :]
        # the comparisons first (they fail at once, in C, for nearly every size); the letter check on a hit
        if all(text[end - (k + 1) * size : end - k * size] == last for k in range(1, COPIES)) and any(
            char.isalpha() for char in last
        ):
            return size
    return 0


def kept_length(text: str, unit: int, *, floor: int = 0) -> int:
    """How much of ``text``, which ends in copies of a span of ``unit`` characters, to keep: up to the end of
    the first copy, and in it up to its last sentence end (the copies may start mid-sentence: the first is
    cut where the repeated sentence ends, not where the period happens to begin), or its last whole word for
    a phrase without one; never less than ``floor`` (what was handed on already)."""
    start = len(text) - unit
    while start > 0 and text[start - 1] == text[start - 1 + unit]:  # where the periodic tail begins
        start -= 1
    copy = text[start : start + unit]
    ends = [index + 1 for index, char in enumerate(copy) if char in _SENTENCE_ENDS]
    if not ends:  # a repeated phrase, not a sentence: at least end on a whole word
        ends = [index for index, char in enumerate(copy) if char.isspace() and index > 0]
    keep = start + (ends[-1] if ends else unit)
    return max(floor, keep)


_SENTENCE_ENDS = frozenset(".!?\n")


def close_json(text: str) -> str | None:
    """``text``, a JSON value cut short, closed: an open string ended (a dangling escape dropped), then the
    open arrays and objects; ``None`` when that does not make valid JSON (cut after a key, say)."""
    stack: list[str] = []
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            stack.append("}" if char == "{" else "]")
        elif char in "}]" and stack:
            stack.pop()
    closed = text[:-1] if escaped else text
    if in_string:
        closed = closed.rstrip() + '"'
    closed += "".join(reversed(stack))
    try:
        json.loads(closed)
    except ValueError:
        return None
    return closed
