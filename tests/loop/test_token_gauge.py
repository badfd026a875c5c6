"""The token gauge measures each message once: the estimate before a request and the report after it (and the
checks around a compaction) share one measurement, and a measurement is never reused for other messages
(``loop/context/tokens.py``)."""

from __future__ import annotations

from collections import Counter

import pytest

from tether.loop.context import tokens
from tether.loop.context.tokens import CHARS_PER_TOKEN, TokenGauge, message_chars
from tether.messages import Message, Text, ToolCall, ToolResult
from tether.usage import Usage


def exchange(n: int, size: int = 400) -> list[Message]:
    call = ToolCall(f"c{n}", "fetch", {"n": n}, f'{{"n": {n}}}')
    said = Text(f"Fetching item {n}.")
    return [Message("assistant", (said, call)), Message("tool", (ToolResult(f"c{n}", "fetch", "x" * size),))]


def view_of(exchanges: int) -> list[Message]:
    messages = [Message.user("go")]
    for n in range(exchanges):
        messages += exchange(n)
    return messages


@pytest.fixture
def measured(monkeypatch: pytest.MonkeyPatch) -> Counter[int]:
    """How many times each message (by identity) was measured by the gauge."""
    counts: Counter[int] = Counter()

    def counting(message: Message) -> int:
        counts[id(message)] += 1
        return message_chars(message)

    monkeypatch.setattr(tokens, "message_chars", counting)
    return counts


def test_a_step_measures_each_new_message_once(measured: Counter[int]) -> None:
    gauge = TokenGauge(fixed_chars=0)
    before = view_of(3)
    gauge.observe(tuple(before), Usage(input_tokens=900))
    added = exchange(3)
    view = [*before, *added]  # the loop's view: a list; the request sends it as a tuple
    measured.clear()
    estimated = gauge.estimate(view)
    gauge.observe(tuple(view), Usage(input_tokens=estimated))
    assert measured == Counter({id(message): 1 for message in added})


def test_the_checks_after_a_compaction_measure_the_new_view_once(measured: Counter[int]) -> None:
    gauge = TokenGauge(fixed_chars=100)
    gauge.observe(tuple(view_of(6)), Usage(input_tokens=3000))
    compacted = [Message.user("summary"), *exchange(5)]  # does not extend the last report's view
    measured.clear()
    first = gauge.estimate(compacted)
    assert gauge.estimate(compacted) == gauge.whole(compacted) == first
    gauge.observe(tuple(compacted), Usage(input_tokens=first))
    assert measured == Counter({id(message): 1 for message in compacted})


def test_other_messages_are_measured_even_where_the_last_ones_were() -> None:
    gauge = TokenGauge(fixed_chars=0)
    before = view_of(2)
    gauge.observe(tuple(before), Usage(input_tokens=400))
    anchor_chars = sum(message_chars(m) for m in before)
    gauge.estimate([*before, *exchange(2, size=100)])
    sent = [*before, *exchange(2, size=4000)]  # as many messages, after the same anchor, and larger
    gauge.observe(tuple(sent), Usage(input_tokens=2000))
    sent_chars = anchor_chars + sum(message_chars(m) for m in sent[len(before) :])
    assert gauge.ratio == pytest.approx(2000 * CHARS_PER_TOKEN / sent_chars)


def test_a_list_changed_in_place_after_it_was_measured_is_measured_again() -> None:
    gauge = TokenGauge(fixed_chars=0)
    view = view_of(2)
    small = gauge.whole(view)
    view[-1] = exchange(1, size=8000)[1]
    assert gauge.whole(view) == gauge.tokens(sum(message_chars(m) for m in view)) > small
