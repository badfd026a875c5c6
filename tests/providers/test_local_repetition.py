"""The embedded model's repetition guard: a sentence said again and again ends the generation, one copy kept."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tether.loop.actions import FinalAction, read_action
from tether.providers.local.provider import _stream_tokens
from tether.providers.local.repetition import MAX_UNIT, RepetitionGuard, close_json, repeated_unit

SENTENCE = "The capital of France is Paris. "


def chunks(pieces: list[str], finish: str = "length") -> Iterator[dict[str, Any]]:
    """llama-cpp-python's streamed chat chunks, one per piece, the last with ``finish``."""
    for index, piece in enumerate(pieces):
        last = index == len(pieces) - 1
        yield {"choices": [{"delta": {"content": piece}, "finish_reason": finish if last else None}]}


def tokens(text: str, size: int = 4) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def generate(pieces: list[str], *, json_mode: bool) -> tuple[str, str, int]:
    sent: list[str] = []
    finish, count = _stream_tokens(chunks(pieces), threading.Event(), lambda kind, text: sent.append(text), json_mode)
    return "".join(sent), finish, count


def test_a_sentence_repeated_until_the_limit_ends_after_its_first_copy_as_a_normal_stop() -> None:
    text, finish, count = generate(tokens("Hello! " + SENTENCE * 20), json_mode=False)
    assert text == "Hello! " + SENTENCE.rstrip()
    assert finish == "stop", "not cut by the output limit: stopped at the repeat"
    assert count < len(tokens("Hello! " + SENTENCE * 20)), "generation stopped early"


def test_a_final_action_cut_at_a_repeat_is_still_a_final_action() -> None:
    raw = '{"type": "final", "text": "' + SENTENCE * 15
    text, finish, _ = generate(tokens(raw), json_mode=True)
    assert finish == "stop"
    assert read_action(text) == FinalAction(SENTENCE.strip())


def test_text_without_repeats_is_handed_on_whole_and_in_order() -> None:
    prose = " ".join(f"Sentence number {n} says something new." for n in range(30))
    text, finish, _ = generate(tokens(prose, 3), json_mode=False)
    assert (text, finish) == (prose, "length")


def test_only_the_last_spans_are_held_back_while_generating() -> None:
    guard = RepetitionGuard()
    prose = "".join(f"line {n:03} of a long answer\n" for n in range(40))
    handed = "".join(guard.feed(piece) for piece in tokens(prose))
    assert len(prose) - len(handed) <= 2 * MAX_UNIT + 4
    assert handed + guard.finish(json_mode=False) == prose


@pytest.mark.parametrize(
    ("text", "unit"),
    [
        (SENTENCE * 3, len(SENTENCE)),
        ("intro " + "Bonjour le monde. " * 3, len("Bonjour le monde. ")),
        (SENTENCE * 2, 0),  # twice is not yet a repetition
        ("=" * 60, 0),  # no letter: a rule, not a sentence
        ("|---|---|" * 5, 0),
        ("ab" * 30, 10),  # a short stutter, caught as a span of at least MIN_UNIT
        ("a b c d e f", 0),
    ],
)
def test_a_repetition_is_three_copies_back_to_back_of_a_span_with_a_letter(text: str, unit: int) -> None:
    assert repeated_unit(text) == unit


@pytest.mark.parametrize(
    ("cut", "closed"),
    [
        ('{"type": "final", "text": "Paris. ', '{"type": "final", "text": "Paris."}'),
        ('{"a": ["x", "y', '{"a": ["x", "y"]}'),
        ('{"a": "tab\\', '{"a": "tab"}'),
        ('{"a": 1', '{"a": 1}'),
    ],
)
def test_a_cut_json_value_is_closed(cut: str, closed: str) -> None:
    assert close_json(cut) == closed
    json.loads(closed)


def test_json_that_cannot_be_closed_is_left_alone() -> None:
    assert close_json('{"type": "final", "te') is None
    assert close_json('{"a": ') is None


@pytest.mark.parametrize("offset", range(8))
def test_the_copy_kept_ends_where_the_repeated_sentence_ends_wherever_generation_stopped(offset: int) -> None:
    guard = RepetitionGuard()
    text = "Hello! " + SENTENCE * 5
    for piece in tokens(text[:offset]) + tokens(text[offset:], 5):
        guard.feed(piece)
        if guard.stopped:
            break
    assert guard.stopped
    assert guard.text.rstrip() == "Hello! The capital of France is Paris."


def test_a_repeated_phrase_without_a_sentence_end_is_cut_after_a_whole_word() -> None:
    guard = RepetitionGuard()
    text = "It is the tool that provides a tool that provides a tool that provides a tool that provides a"
    for piece in tokens(text, 3):
        guard.feed(piece)
        if guard.stopped:
            break
    assert guard.stopped
    kept = guard.text
    assert kept.startswith("It is the tool that")
    assert kept.count("provides") <= 1
    assert kept.split()[-1] in {"tool", "that", "provides", "a"}, "whole words only"
