"""SSEDecoder: line endings (also split across chunks), comments, fields, UTF-8 across chunks, end of stream,
and a property: however the bytes of a stream are cut into chunks, the events are the same."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tether.errors import InvalidResponse
from tether.providers.http.sse import ServerSentEvent, SSEDecoder


def decode(*chunks: bytes) -> list[ServerSentEvent]:
    """Feed the chunks in order, then close: every event of the stream."""
    decoder = SSEDecoder()
    events: list[ServerSentEvent] = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    return events + decoder.close()


def fed(*chunks: bytes) -> list[ServerSentEvent]:
    """Feed the chunks without closing: only the events dispatched while the stream is still open."""
    decoder = SSEDecoder()
    events: list[ServerSentEvent] = []
    for chunk in chunks:
        events += decoder.feed(chunk)
    return events


def datas(events: Iterable[ServerSentEvent]) -> list[str]:
    return [event.data for event in events]


# --- line endings ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"], ids=["LF", "CRLF", "CR"])
def test_each_line_ending_ends_lines_and_a_blank_line_dispatches(eol: str) -> None:
    stream = f"data: one{eol}{eol}data: two{eol}data: more{eol}{eol}".encode()
    assert datas(fed(stream)) == ["one", "two\nmore"]


def test_mixed_line_endings_in_one_stream() -> None:
    stream = b"data: a\r\n\r\ndata: b\n\ndata: c\r\rdata: d\r\n\n"
    assert datas(fed(stream)) == ["a", "b", "c", "d"]


def test_crlf_split_across_two_chunks_is_one_line_break_not_two() -> None:
    # Were "\r" and "\n" counted as two breaks, the "\n" would be a blank line and dispatch "a" alone.
    events = fed(b"data: a\r", b"\ndata: b\r\n\r\n")
    assert datas(events) == ["a\nb"]


def test_crlf_split_across_two_chunks_then_a_blank_line_dispatches() -> None:
    assert datas(fed(b"data: a\r", b"\n\r\n")) == ["a"]


def test_lone_cr_at_the_end_of_a_chunk_ends_the_line_at_once() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    # The next chunk does not start with "\n": the CR was a line break on its own.
    assert datas(decoder.feed(b"data: b\r\r")) == ["a\nb"]


def test_lone_cr_at_the_end_of_a_chunk_followed_by_a_cr_blank_line_dispatches() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    assert datas(decoder.feed(b"\r")) == ["a"]


def test_crlf_split_then_an_lf_blank_line_in_the_next_chunk_dispatches() -> None:
    """The CRLF ends the data line and the next LF is a blank line: two events, whatever the chunking.

    The bytes arrive as "data: a\\r" | "\\n" | "\\ndata: b\\n\\n"; the second chunk is only the LF of the CRLF.
    """
    chunks = (b"data: a\r", b"\n", b"\ndata: b\n\n")
    assert datas(fed(b"".join(chunks))) == ["a", "b"]
    assert datas(fed(*chunks)) == ["a", "b"]


def test_a_chunk_that_is_only_the_lf_of_a_crlf_changes_nothing_else() -> None:
    assert datas(fed(b"data: a\r", b"\n", b"\r\n")) == ["a"]
    assert datas(fed(b"data: a\r", b"\n", b"data: b\n\n")) == ["a\nb"]


def test_empty_chunks_are_harmless() -> None:
    assert datas(fed(b"", b"data: a\r", b"", b"\n", b"", b"\r\n", b"")) == ["a"]


# --- comments, fields, values ---------------------------------------------------------------------------------


def test_comments_and_keep_alive_pings_produce_nothing() -> None:
    assert fed(b": ping\n\n:\n\n: keep-alive\r\n\r\n:\r\r") == []
    assert decode(b": ping\n\n") == []


def test_a_comment_inside_an_event_does_not_split_it() -> None:
    assert datas(fed(b"data: a\n: ping\ndata: b\n\n")) == ["a\nb"]


def test_multi_line_data_is_joined_with_newlines() -> None:
    assert datas(fed(b'data: {\ndata:   "a": 1\ndata: }\n\n')) == ['{\n  "a": 1\n}']


def test_data_lines_that_are_empty_keep_their_place() -> None:
    assert datas(fed(b"data: a\ndata:\ndata: b\n\n")) == ["a\n\nb"]
    assert datas(fed(b"data:\n\n")) == [""]


def test_one_leading_space_after_the_colon_is_dropped_and_only_one() -> None:
    assert datas(fed(b"data:no space\n\n")) == ["no space"]
    assert datas(fed(b"data: one space\n\n")) == ["one space"]
    assert datas(fed(b"data:  two spaces\n\n")) == [" two spaces"]
    assert datas(fed(b"data:\ttab\n\n")) == ["\ttab"]
    assert [e.event for e in fed(b"event:  name\ndata: x\n\n")] == [" name"]


def test_the_value_may_contain_colons() -> None:
    assert datas(fed(b'data: {"a": "b:c"}\n\n')) == ['{"a": "b:c"}']


def test_event_and_id_fields() -> None:
    events = fed(b"event: message_start\nid: 7\ndata: {}\n\ndata: next\n\n")
    assert events == [
        ServerSentEvent("{}", "message_start", "7"),
        # The event type is per event; the last event id stays until the stream sets another.
        ServerSentEvent("next", "", "7"),
    ]


def test_an_id_with_a_nul_is_ignored() -> None:
    assert fed(b"id: 1\ndata: a\n\nid: 2\x003\ndata: b\n\n")[-1].id == "1"


def test_unknown_fields_and_a_line_without_colon() -> None:
    assert fed(b"retry: 1000\nfoo: bar\ndata: x\n\n") == [ServerSentEvent("x")]
    assert datas(fed(b"data\n\n")) == [""]  # a field name alone has the empty value


def test_padding_spaces_inside_json_data_are_kept() -> None:
    """Anthropic pads some events with trailing spaces; they are part of the data and still valid JSON."""
    line = b'event: ping\ndata: {"type": "ping"}      \n\n'
    [event] = fed(line)
    assert event.event == "ping"
    assert event.data == '{"type": "ping"}      '
    assert json.loads(event.data) == {"type": "ping"}


# --- bytes and the end of the stream ----------------------------------------------------------------------------


def test_a_multi_byte_character_split_across_chunks_is_kept_whole() -> None:
    raw = "data: héllo → 🦜 世界\n\n".encode()
    for cut in range(len(raw) + 1):
        assert datas(fed(raw[:cut], raw[cut:])) == ["héllo → 🦜 世界"], cut
    # one byte at a time
    assert datas(fed(*(raw[i : i + 1] for i in range(len(raw))))) == ["héllo → 🦜 世界"]


def test_a_missing_blank_line_at_the_end_still_dispatches_the_last_event_on_close() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: first\n\ndata: last\n") == [ServerSentEvent("first")]
    assert decoder.close() == [ServerSentEvent("last")]


def test_a_last_line_without_its_line_break_is_dispatched_on_close() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"event: done\ndata: [DONE]") == []
    assert decoder.close() == [ServerSentEvent("[DONE]", "done")]


def test_close_after_a_complete_stream_adds_nothing() -> None:
    decoder = SSEDecoder()
    assert datas(decoder.feed(b"data: a\n\n")) == ["a"]
    assert decoder.close() == []


def test_blank_line_only_blocks_produce_nothing() -> None:
    assert decode(b"\n\n\r\n\r\n\r\r\n") == []
    assert decode(b"event: ping\n\n") == []  # no data line: nothing to dispatch
    assert datas(decode(b"\n\n\ndata: a\n\n\n\n\n")) == ["a"]


def test_an_event_type_without_data_does_not_leak_into_the_next_event() -> None:
    assert fed(b"event: ping\n\ndata: x\n\n") == [ServerSentEvent("x")]


# --- property: chunking never changes the events ----------------------------------------------------------------

EOLS = ("\n", "\r\n", "\r")
VALUE = st.text(st.characters(codec="utf-8", exclude_characters="\r\n\x00"), max_size=12)


@dataclass(frozen=True)
class Spec:
    """One event to encode: its data lines, type, id, an optional comment, and the line endings it uses."""

    data: tuple[str, ...]
    event: str = ""
    id: str | None = None
    comment: str | None = None
    eols: tuple[str, ...] = ("\n",)
    extra_blank_lines: int = 0


SPECS = st.builds(
    Spec,
    data=st.lists(VALUE, min_size=1, max_size=3).map(tuple),
    event=st.one_of(st.just(""), VALUE.filter(bool)),
    id=st.none() | VALUE,
    comment=st.none() | VALUE,
    eols=st.lists(st.sampled_from(EOLS), min_size=1, max_size=4).map(tuple),
    extra_blank_lines=st.integers(0, 2),
)


def encode(specs: list[Spec], ending: str) -> bytes:
    """SSE text for ``specs``. ``ending``: "blank" (well formed), "no_blank" (no last blank line) or
    "no_break" (the last line without its line break either)."""
    out = ""
    for spec in specs:
        lines = [f":{spec.comment}"] if spec.comment is not None else []
        lines += [f"event: {spec.event}"] if spec.event else []
        lines += [f"id: {spec.id}"] if spec.id is not None else []
        lines += [f"data: {value}" for value in spec.data]
        lines += [""] * (1 + spec.extra_blank_lines)
        for n, line in enumerate(lines):
            eol = spec.eols[n % len(spec.eols)]
            if not line and eol == "\n" and out.endswith("\r"):
                eol = "\r\n"  # "\r" + "\n" would be one CRLF break, not a blank line
            out += line + eol
    if ending != "blank" and specs:
        out = out.rstrip("\r\n")
        if ending == "no_blank":
            out += "\n"
    return out.encode()


def expected(specs: list[Spec]) -> list[ServerSentEvent]:
    events, last_id = [], None
    for spec in specs:
        last_id = spec.id if spec.id is not None else last_id
        events.append(ServerSentEvent("\n".join(spec.data), spec.event, last_id))
    return events


def pieces(raw: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({cut % (len(raw) + 1) for cut in cuts})
    return [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]


@settings(max_examples=300, derandomize=True, deadline=None)
@given(
    specs=st.lists(SPECS, max_size=5),
    ending=st.sampled_from(["blank", "no_blank", "no_break"]),
    cuts=st.lists(st.integers(0, 10_000), max_size=12),
)
@example(specs=[Spec(("a",), eols=("\r\n", "\n")), Spec(("b",))], ending="blank", cuts=[8, 9])
@example(specs=[Spec(("é🦜",), eols=("\r",))], ending="no_blank", cuts=[7, 8, 9, 10, 11])
def test_any_chunking_gives_the_events_of_the_whole_stream(specs: list[Spec], ending: str, cuts: list[int]) -> None:
    raw = encode(specs, ending)
    whole = decode(raw)
    assert whole == expected(specs)
    assert decode(*pieces(raw, cuts)) == whole


def test_one_event_per_chunk_reads_as_the_same_events_byte_by_byte() -> None:
    """The common shape (each chunk one ``data:`` line and its blank line) is read the way the general rules
    read the same bytes cut anywhere: fields kept or reset, empty data, bad UTF-8, an event named before."""
    chunks = [
        b": hello\n\n",
        b"data: first\n\n",
        b"id: 7\nevent: delta\n\n",
        b'data: {"a": 1}\n\n',
        b"event: named\n",
        b"data: second \xff\n\n",
        b"data: \n\n",
        b"data: third\n\n",
        b"data: fourth\r\n\r\n",
    ]
    whole = SSEDecoder()
    by_chunk = [event for chunk in chunks for event in whole.feed(chunk)] + whole.close()
    single = SSEDecoder()
    by_byte = [event for byte in b"".join(chunks) for event in single.feed(bytes([byte]))] + single.close()
    assert by_chunk == by_byte
    assert [(e.data, e.event, e.id) for e in by_chunk] == [
        ("first", "", None),
        ('{"a": 1}', "", "7"),
        ("second \ufffd", "named", "7"),
        ("", "", "7"),
        ("third", "", "7"),
        ("fourth", "", "7"),
    ]


def test_one_event_per_chunk_past_the_event_limit_is_refused() -> None:
    decoder = SSEDecoder(max_event_bytes=16)
    decoder.feed(b": start\n\n")
    assert [e.data for e in decoder.feed(b"data: 0123456789\n\n")] == ["0123456789"]
    with pytest.raises(InvalidResponse):
        decoder.feed(b"data: 0123456789ab\n\n")
