"""Known keys are masked wherever they sit: across the cut of a long bash output (a key at every offset around
each cut), and in every part of an exception's chain (its cause, its context, its notes, an exception group's
members), so that neither a result nor ``logger.exception`` shows one."""

from __future__ import annotations

import traceback

from hypothesis import given, settings
from hypothesis import strategies as st

from tether.loop.executor import mask_exception
from tether.secrets import Masker, mask_exception_in_place
from tether.tools.shell import HeadTail

KEY = "sk-proj-" + "Q7x9Zt2LmN4vB8cR1yW6kP3sJ5hD0gFa"  # 41 characters
MASKER = Masker([KEY])
LIMIT = 400


def fragments(text: str, size: int = 8) -> list[str]:
    return [text[at : at + size] for at in range(len(text) - size + 1)]


def shown(offset: int, total: int) -> str:
    data = ("." * offset + KEY).ljust(total, ".").encode()
    buffer = HeadTail(LIMIT)
    for at in range(0, len(data), 97):  # a pipe delivers in pieces
        buffer.feed(data[at : at + 97])
    return buffer.text(MASKER.mask)


def test_a_key_at_any_offset_around_either_cut_is_never_partly_shown() -> None:
    total = 3_000
    head_cut, tail_cut = LIMIT - LIMIT // 2, total - LIMIT // 2
    offsets = [*range(head_cut - len(KEY) - 2, head_cut + 3), *range(tail_cut - len(KEY) - 2, tail_cut + 3)]
    for offset in offsets:
        text = shown(offset, total)
        assert "bytes elided" in text
        leaked = [piece for piece in fragments(KEY) if piece in text]
        assert leaked == [], (offset, text)


@settings(max_examples=200, deadline=None)
@given(offset=st.integers(0, 5_000), extra=st.integers(0, 5_000))
def test_a_key_anywhere_in_an_output_of_any_length_is_never_partly_shown(offset: int, extra: int) -> None:
    text = shown(offset, offset + len(KEY) + extra)
    assert not any(piece in text for piece in fragments(KEY))


def chained(where: str) -> BaseException:
    """An exception with the key in one part of its chain."""
    try:
        try:
            raise ValueError(f"inner {KEY}" if where == "cause" else "inner")
        except ValueError as inner:
            outer = RuntimeError(f"outer {KEY}" if where == "top" else "outer")
            if where == "note":
                outer.add_note(f"while using {KEY}")
            if where == "group":
                raise ExceptionGroup("many", [KeyError("k"), OSError(f"os {KEY}")]) from inner
            raise outer from inner
    except BaseException as error:  # noqa: BLE001 - the chain is what is tested
        if where == "context":
            try:
                raise LookupError(f"context {KEY}")
            except LookupError:
                try:
                    raise TypeError("while handling")
                except TypeError as late:
                    return late
        return error
    raise AssertionError("unreachable")


@given(where=st.sampled_from(["top", "cause", "context", "note", "group"]))
def test_a_key_in_any_part_of_an_exception_chain_is_masked(where: str) -> None:
    error = chained(where)
    assert KEY in "".join(traceback.format_exception(error)), "the key is there before masking"
    mask_exception_in_place(error, MASKER)
    printed = "".join(traceback.format_exception(error))
    assert KEY not in printed, printed
    masked = mask_exception(chained(where), MASKER)
    assert KEY not in "".join(traceback.format_exception(masked))
