"""SSEDecoder against hostile input: a leading byte-order mark, events past ``max_event_bytes`` (refused while
they are still being read, however the bytes are cut), and a long line that costs each chunk only its own
size (measured as allocations with tracemalloc, never as time)."""

from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tether.errors import InvalidResponse
from tether.providers.http.sse import BOM, ServerSentEvent, SSEDecoder


def decode(decoder: SSEDecoder, chunks: list[bytes]) -> list[ServerSentEvent]:
    events: list[ServerSentEvent] = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    return events + decoder.close()


def feed_all(decoder: SSEDecoder, chunks: list[bytes]) -> None:
    for chunk in chunks:
        decoder.feed(chunk)


def cut(raw: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({point % (len(raw) + 1) for point in cuts})
    return [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]


# --- the byte-order mark ------------------------------------------------------------------------------------


def test_a_leading_byte_order_mark_does_not_cost_the_first_event() -> None:
    assert decode(SSEDecoder(), [BOM + b"data: first\n\ndata: second\n\n"]) == [
        ServerSentEvent("first"),
        ServerSentEvent("second"),
    ]


def test_only_one_leading_byte_order_mark_is_dropped() -> None:
    # The second one is part of the first line's field name, which no longer reads "data": the standard's rule.
    assert decode(SSEDecoder(), [BOM + BOM + b"data: a\n\ndata: b\n\n"]) == [ServerSentEvent("b")]


def test_a_byte_order_mark_later_in_the_stream_is_kept() -> None:
    assert decode(SSEDecoder(), [b"data: a\n\ndata: \xef\xbb\xbfb\n\n"]) == [
        ServerSentEvent("a"),
        ServerSentEvent("\ufeffb"),
    ]


@settings(max_examples=100, derandomize=True, deadline=None)
@given(cuts=st.lists(st.integers(0, 64), max_size=6), bom=st.booleans())
@example(cuts=[1, 2], bom=True)
def test_a_byte_order_mark_split_across_chunks_is_dropped_all_the_same(cuts: list[int], bom: bool) -> None:
    stream = b"data: one\r\n\r\ndata: two\n\n"
    raw = (BOM if bom else b"") + stream
    assert decode(SSEDecoder(), cut(raw, cuts)) == [ServerSentEvent("one"), ServerSentEvent("two")]


@pytest.mark.parametrize("cut", range(1, 5))
@pytest.mark.parametrize("rest", [1, 2])
def test_a_byte_order_mark_cut_at_each_byte_boundary_is_dropped(cut: int, rest: int) -> None:
    # ``rest`` splits what follows the first cut again, so a mark can come in three chunks.
    raw = BOM + b"data: one\n\ndata: two\n\n"
    pieces = [raw[:cut], raw[cut : cut + rest], raw[cut + rest :]]
    assert decode(SSEDecoder(), pieces) == [ServerSentEvent("one"), ServerSentEvent("two")]


def test_a_stream_that_is_only_part_of_a_byte_order_mark_yields_nothing() -> None:
    assert decode(SSEDecoder(), [BOM[:2]]) == []


# --- the size of an event -----------------------------------------------------------------------------------


@settings(max_examples=150, derandomize=True, deadline=None)
@given(
    cap=st.integers(1, 400),
    size=st.integers(0, 800),
    cuts=st.lists(st.integers(0, 1000), max_size=10),
    wide=st.booleans(),
)
@example(cap=10, size=4, cuts=[], wide=False)  # "data: xxxx" is exactly 10 bytes: accepted
@example(cap=10, size=5, cuts=[], wide=False)  # one byte more: refused
def test_a_line_past_the_cap_is_refused_as_soon_as_its_bytes_pass_it(
    cap: int, size: int, cuts: list[int], wide: bool
) -> None:
    """The line has no line break yet: the decoder must refuse it at the first chunk that takes the bytes
    received past the cap, and accept any line within it. The cap counts bytes, not characters."""
    value = ("é" * (size // 2)) if wide else "x" * size
    line = b"data: " + value.encode()
    decoder = SSEDecoder(max_event_bytes=cap)
    fed = 0
    for chunk in cut(line, cuts):
        fed += len(chunk)
        if fed > cap:
            with pytest.raises(InvalidResponse, match="max_event_bytes") as caught:
                decoder.feed(chunk)
            assert caught.value.details["limit"] == "max_event_bytes"
            return
        assert decoder.feed(chunk) == []
    assert len(line) <= cap
    assert decoder.feed(b"\n\n") == [ServerSentEvent(value)]


@settings(max_examples=60, derandomize=True, deadline=None)
@given(lines=st.integers(2, 12), width=st.integers(1, 40), cuts=st.lists(st.integers(0, 600), max_size=8))
def test_an_event_of_many_lines_counts_them_together(lines: int, width: int, cuts: list[int]) -> None:
    """Every line fits the cap, the event does not: it is refused before its blank line arrives."""
    line = b"data: " + b"y" * width + b"\n"
    cap = (len(line) - 1) * lines - 1  # line breaks are not counted
    decoder = SSEDecoder(max_event_bytes=cap)
    with pytest.raises(InvalidResponse, match="max_event_bytes"):
        feed_all(decoder, cut(line * lines, cuts))


def test_the_cap_is_per_event_not_per_stream() -> None:
    decoder = SSEDecoder(max_event_bytes=16)
    events = decode(decoder, [b"data: 0123456789\n\n" * 1000])
    assert len(events) == 1000


def test_comments_and_keep_alives_do_not_add_to_an_event() -> None:
    decoder = SSEDecoder(max_event_bytes=20)
    assert decode(decoder, [b": ping\n" * 100 + b"data: ok\n\n"]) == [ServerSentEvent("ok")]


def test_the_error_names_the_provider_and_how_to_raise_the_limit() -> None:
    decoder = SSEDecoder(max_event_bytes=8, provider="openai")
    with pytest.raises(InvalidResponse) as caught:
        decoder.feed(b"data: 123456789")
    assert caught.value.code == "invalid_response"
    assert "openai" in caught.value.message
    assert "ResponseLimits(max_event_bytes=" in caught.value.message


# --- linear cost ----------------------------------------------------------------------------------------------


def test_a_chunk_that_extends_a_long_line_costs_its_own_size_not_the_lines() -> None:
    """With 8 MB of an unfinished line held, each further 1 KB chunk may allocate about its own size: a
    decoder that re-joins its tail on every chunk would allocate 8 MB per chunk (quadratic in the line)."""
    decoder = SSEDecoder()
    piece = b"x" * (64 * 1024)
    decoder.feed(b"data: ")
    for _ in range(128):
        decoder.feed(piece)
    small = b"z" * 1024
    tracemalloc.start()
    try:
        for _ in range(500):
            decoder.feed(small)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024
    (event,) = decoder.feed(b"\n\n")
    assert len(event.data) == 128 * len(piece) + 500 * len(small)


def test_a_long_line_is_joined_once_when_its_line_break_arrives() -> None:
    """The memory a long line takes at its end is a small multiple of its size, however many chunks it came in."""
    decoder = SSEDecoder()
    size = 4 * 1024 * 1024
    decoder.feed(b"data: ")
    tracemalloc.start()
    try:
        for _ in range(size // 512):
            decoder.feed(b"q" * 512)
        (event,) = decoder.feed(b"\n\n")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(event.data) == size
    assert peak < 4 * size
