"""How big the next request is, in tokens, without a tokenizer: what the provider last reported, plus an
estimate of what was added since.

After each call the provider reports the input tokens of the request it got (``Usage``: normal, cached and
cache-written input). A :class:`TokenGauge` keeps that figure with the messages it covered (its *anchor*);
the next request is estimated as the anchor plus the messages added after it, at about four characters a
token. The rate is calibrated on every report: when a request was larger than its character estimate said
(code, JSON and non-Latin text have fewer characters a token), later estimates grow by the same factor. A
view that no longer extends the anchor's (it was compacted) is estimated whole. Nothing is downloaded and
no tokenizer runs: the estimate costs a length per new part, and the gauge remembers the last messages it
measured, so the estimate before a request and the report after it (or the checks around a compaction)
measure each message once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from operator import is_

from tether.media import attachment_tokens
from tether.messages import Attachment, Message, Part, Text, Thinking, ToolCall, ToolResult
from tether.providers.base import ToolDefinition
from tether.usage import Usage

CHARS_PER_TOKEN = 4.0
"""The uncalibrated rate: about right for English prose in every provider's tokenizer."""
MESSAGE_OVERHEAD = 12
"""Characters counted for each message and part besides its text: roles, ids, separators."""
MIN_RATIO, MAX_RATIO = 0.5, 4.0
"""Bounds of the calibration factor: one odd report cannot make the gauge wildly wrong."""


def part_chars(part: Part) -> int:
    """Characters a part puts in a request (a signature or encrypted reasoning rides along, so it counts; an
    attachment counts as the characters of the tokens it stands for, ``media.py``)."""
    if type(part) is Text:
        return len(part.text) + MESSAGE_OVERHEAD
    if type(part) is Attachment:
        return int(attachment_tokens(part) * CHARS_PER_TOKEN) + MESSAGE_OVERHEAD
    if type(part) is ToolResult:
        return len(part.content) + len(part.name) + MESSAGE_OVERHEAD
    if type(part) is ToolCall:
        arguments = part.raw_arguments
        if arguments is None:
            arguments = json.dumps(part.arguments) if part.arguments is not None else ""
        return len(part.name) + len(arguments) + len(part.id) + MESSAGE_OVERHEAD
    assert type(part) is Thinking, f"not a part: {part!r}"
    return len(part.text) + len(part.signature or "") + _opaque_chars(part) + MESSAGE_OVERHEAD


def _opaque_chars(part: Thinking) -> int:
    """Encrypted reasoning and similar data a provider replays from ``provider_data``."""
    data = part.provider_data
    if not data:
        return 0
    return sum(len(value) for value in data.values() if isinstance(value, str))


def message_chars(message: Message) -> int:
    chars = MESSAGE_OVERHEAD
    for part in message.parts:  # a loop, not sum() over a generator: this runs for every new message
        chars += part_chars(part)
    return chars


def fixed_chars(system: str | None, tools: Sequence[ToolDefinition]) -> int:
    """Characters every request carries besides its messages: the system prompt, the tool definitions."""
    chars = len(system or "")
    for tool in tools:
        chars += len(tool.name) + len(tool.description) + len(json.dumps(tool.parameters)) + MESSAGE_OVERHEAD
    return chars


def reported_input(usage: Usage) -> int:
    """The size of the request a call's usage reports: its input tokens, cached or not."""
    return usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens


class TokenGauge:
    """Estimates the size of a run's next request (see the module docstring).

    ``fixed_chars`` is what every request carries besides its messages: the system prompt and the tool
    definitions.
    """

    __slots__ = (
        "_anchor_chars", "_anchor_last", "_anchor_length", "_anchor_tokens", "_measured", "_measured_chars",
        "fixed_chars", "ratio",
    )  # fmt: skip

    def __init__(self, fixed_chars: int) -> None:
        self.fixed_chars = fixed_chars
        self.ratio = 1.0
        self._anchor_length = 0
        self._anchor_last: Message | None = None
        self._anchor_tokens = 0
        self._anchor_chars = 0
        self._measured: tuple[Message, ...] = ()
        self._measured_chars = 0

    def tokens(self, chars: int) -> int:
        """``chars`` characters in tokens, at the calibrated rate (rounded up)."""
        return int(chars * self.ratio / CHARS_PER_TOKEN) + 1

    def messages(self, messages: Sequence[Message]) -> int:
        """The estimated tokens of ``messages`` alone."""
        return self.tokens(self._chars(messages))

    def _chars(self, messages: Sequence[Message]) -> int:
        """The characters of ``messages``; those of the same messages as last time (the same objects, which
        are immutable) are not counted again."""
        measured = self._measured
        if len(messages) == len(measured) and all(map(is_, messages, measured)):
            return self._measured_chars
        chars = 0
        for message in messages:
            chars += message_chars(message)
        self._measured, self._measured_chars = tuple(messages), chars  # a copy: a caller's list may change
        return chars

    def estimate(self, view: Sequence[Message]) -> int:
        """The estimated tokens of a request sending ``view`` (the system prompt and tools included)."""
        if self._extends_anchor(view):
            return self._anchor_tokens + self.tokens(self._chars(view[self._anchor_length :]))
        return self.whole(view)

    def _extends_anchor(self, view: Sequence[Message]) -> bool:
        length = self._anchor_length
        return bool(length) and len(view) >= length and view[length - 1] is self._anchor_last

    def whole(self, view: Sequence[Message]) -> int:
        """The estimate of ``view`` from its characters alone, ignoring the last report."""
        return self.tokens(self.fixed_chars + self._chars(view))

    def observe(self, view: Sequence[Message], usage: Usage) -> None:
        """A request sending ``view`` was answered with ``usage``: anchor later estimates on it and calibrate.

        A report of no input tokens (a server that does not count) changes nothing.
        """
        reported = reported_input(usage)
        if reported <= 0 or not view:
            return
        if self._extends_anchor(view):  # only the new messages are measured: a step costs what it added
            chars = self._anchor_chars + self._chars(view[self._anchor_length :])
        else:
            chars = self.fixed_chars + self._chars(view)
        self.ratio = min(max(reported * CHARS_PER_TOKEN / max(chars, 1), MIN_RATIO), MAX_RATIO)
        self._anchor_length, self._anchor_last = len(view), view[-1]
        self._anchor_tokens, self._anchor_chars = reported, chars

    def overflowed(self, view: Sequence[Message], window: int, sent: int | None = None) -> None:
        """The provider refused ``view`` as too long for a ``window``-token context: estimates were low.

        The rate is raised so that this view is estimated above the window (with a margin), or at ``sent``
        when the provider said how many tokens it counted; the anchor is dropped: the next estimate is made
        from characters.
        """
        chars = self.fixed_chars + self._chars(view)
        needed = max(window * 1.05, sent or 0) * CHARS_PER_TOKEN / max(chars, 1)
        self.ratio = min(max(self.ratio, needed), MAX_RATIO)
        self._anchor_length, self._anchor_last = 0, None
