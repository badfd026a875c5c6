"""OutputCache on its own: previews, refs, reading and searching, the reader's arguments, and persistence
through a real (memory) session store."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.errors import ConfigInvalid, InvalidArguments, SessionInvalid
from tether.messages import Message, ToolCall, ToolResult
from tether.sessions import FileSessionStore, MemorySessionStore
from tether.sessions.base import output_ref
from tether.tools.output_cache import (
    MAX_CACHED,
    READ_TOOL,
    OutputCache,
    holds_reference,
    preview,
    reference_in,
    reference_stub,
)


def numbered(lines: int, width: int = 40) -> str:
    """A log of ``lines`` numbered lines: every slice of it says where it comes from."""
    return "".join(f"line {i:07d} {'x' * width}\n" for i in range(lines))


LOG = numbered(20_000)  # about a megabyte
SPAN = re.compile(r"offsets (\d+) to (\d+)")


def parts_of(shown: str, content: str) -> tuple[str, str, str]:
    """A preview split into the head of ``content``, the reference line and the tail of ``content``."""
    start = int(SPAN.search(shown).group(1))  # type: ignore[union-attr]
    end = int(SPAN.search(shown).group(2)) + 1  # type: ignore[union-attr]
    tail = content[end:]
    return shown[:start], shown[start : len(shown) - len(tail)], tail


# --- previews -----------------------------------------------------------------------------------------------


def test_a_preview_is_the_head_a_reference_line_and_the_tail_within_the_threshold() -> None:
    cache = OutputCache(8_000)
    shown = cache.put(LOG, name="logs")

    head, line, tail = parts_of(shown, LOG)
    assert len(shown) <= 8_000
    assert LOG.startswith(head)
    assert LOG.endswith(tail)
    assert 2_000 < len(head) <= 8_000 // 2 * 2 // 3
    assert 1_000 < len(tail) <= 8_000 // 2 // 3 + 1
    assert head.endswith("\n")
    assert tail.startswith("line ")
    ref = output_ref(LOG)
    assert f"{len(LOG) - len(head) - len(tail)} of {len(LOG)} characters not shown" in line
    assert f'read_tool_output(ref="{ref}", offset={len(head)})' in line
    assert "output of logs" in line
    assert reference_in(shown) == ref


@settings(max_examples=80, deadline=None)
@given(budget=st.integers(100, 4_000), data=st.data())
def test_any_preview_is_bounded_and_its_parts_are_the_outputs_own(budget: int, data: st.DataObject) -> None:
    pieces = st.sampled_from(["a", "bb ", "\n", "\u00e9", "\u4e2d", "line\n", "x" * 50])
    content = "".join(data.draw(st.lists(pieces, min_size=budget // 10 + 1, max_size=budget)))
    content = content if len(content) > budget else content + "z" * (budget + 1 - len(content))
    shown = preview(content, output_ref(content), budget, name="t")

    head, line, tail = parts_of(shown, content)
    assert content.startswith(head)
    assert content.endswith(tail)
    assert len(head) + len(tail) <= budget // 2
    assert len(shown) <= max(budget, len(line))
    assert reference_in(shown) == output_ref(content)


def test_a_tiny_limit_gets_the_reference_line_alone_and_it_still_names_the_output() -> None:
    cache = OutputCache(8_000)
    shown = cache.put(LOG, name="t", limit=100)

    assert shown.startswith("\n[... ")
    assert shown.endswith("...]\n")
    assert f"{len(LOG)} of {len(LOG)} characters not shown (offsets 0 to {len(LOG) - 1})" in shown
    assert reference_in(shown) == output_ref(LOG)


def test_the_limit_of_the_agent_lowers_the_threshold() -> None:
    cache = OutputCache(8_000, cap=3_000)

    assert cache.threshold == 3_000
    assert not cache.keeps("t", 3_000)
    assert cache.keeps("t", 3_001)
    assert len(cache.put(LOG, name="t")) <= 3_000


def test_what_is_kept_the_threshold_a_tools_limit_the_reader_and_outputs_too_long_to_keep() -> None:
    cache = OutputCache(8_000)

    assert not cache.keeps("t", 8_000)
    assert cache.keeps("t", 8_001)
    assert cache.keeps("t", 2_001, limit=2_000)
    assert not cache.keeps("t", 2_000, limit=2_000)
    assert not cache.keeps(READ_TOOL, 100_000)
    assert cache.keeps("t", MAX_CACHED)
    assert not cache.keeps("t", MAX_CACHED + 1)


def test_a_tool_output_that_quotes_a_preview_line_is_not_taken_for_a_preview() -> None:
    shown = OutputCache(8_000).put(LOG, name="t")
    line = parts_of(shown, LOG)[1]

    assert reference_in(f"some text\n{line}\nmore") is None
    assert reference_in("line 1\n" * 10) is None
    quoted = "".join(f"{i}: {shown}\n" for i in range(300))  # a tool printing previews, previewed in turn
    assert reference_in(preview(quoted, output_ref(quoted), 8_000)) == output_ref(quoted)


def test_the_stub_of_a_preview_names_the_tool_the_size_and_the_ref() -> None:
    shown = OutputCache(8_000).put(LOG, name="logs")
    ref = output_ref(LOG)

    stub = reference_stub(ToolResult("c1", "logs", shown))

    assert stub is not None
    assert len(stub) < 250
    assert stub.startswith(f"[output of logs, {len(LOG)} characters, stored as {ref}: ")
    assert f'read_tool_output(ref="{ref}")' in stub
    assert reference_stub(ToolResult("c1", "logs", "short")) is None


def test_the_history_holds_a_reference_only_when_a_tool_result_is_a_preview() -> None:
    shown = OutputCache(8_000).put(LOG, name="t")
    call = Message("assistant", (ToolCall("c1", "t", {}),))

    assert holds_reference([Message.user("hi"), call, Message("tool", (ToolResult("c1", "t", shown),))])
    assert not holds_reference([Message.user(shown), call, Message("tool", (ToolResult("c1", "t", "ok"),))])


def test_identical_outputs_are_kept_once_under_one_ref() -> None:
    cache = OutputCache(8_000, store=MemorySessionStore(), session_id="s1")

    first, second = cache.put(LOG, name="a"), cache.put(LOG, name="b")

    assert reference_in(first) == reference_in(second) == output_ref(LOG)
    assert cache.pending == (output_ref(LOG),)


def test_a_store_needs_the_sessions_id() -> None:
    with pytest.raises(ConfigInvalid, match="session's id"):
        OutputCache(store=MemorySessionStore())


# --- reading and searching ------------------------------------------------------------------------------------


async def test_pages_are_exact_slices_under_a_header_saying_where_to_read_on() -> None:
    cache = OutputCache(8_000)
    ref = reference_in(cache.put(LOG, name="t"))
    assert ref is not None

    page = await cache.page(ref, 1_000, 500)
    header, text = page.split("\n", 1)

    assert text == LOG[1_000:1_500]
    assert header == f"[{ref}: characters 1000 to 1499 of {len(LOG)}; read on with offset=1500]"
    last = await cache.page(ref, len(LOG) - 10)
    assert last.endswith(LOG[-10:])
    assert "this is the end" in last
    assert "nothing more to read" in await cache.page(ref, len(LOG))
    assert await cache.read(ref, 5, 7) == LOG[5:12]


async def test_a_read_gives_at_most_max_read_characters_and_that_by_default() -> None:
    cache = OutputCache(8_000)
    ref = reference_in(cache.put(LOG, name="t"))
    assert ref is not None

    assert cache.max_read == 7_800
    assert await cache.read(ref) == LOG[: cache.max_read]
    assert await cache.read(ref, 0, 10**30) == LOG[: cache.max_read]
    assert len(await cache.page(ref, 0, 10**30)) <= cache.threshold


async def test_unknown_refs_and_offsets_past_the_end_are_invalid_arguments_saying_so() -> None:
    cache = OutputCache(8_000)
    ref = reference_in(cache.put(LOG, name="t"))
    assert ref is not None

    with pytest.raises(InvalidArguments, match="no output out-0123456789abcdef is stored in this run") as unknown:
        await cache.page("out-0123456789abcdef")
    assert unknown.value.code == "invalid_arguments"
    with pytest.raises(InvalidArguments, match="'not-a-ref' is not a ref"):
        await cache.page("not-a-ref")
    with pytest.raises(InvalidArguments, match=f"offset {len(LOG) + 1} is past the end of {ref}"):
        await cache.page(ref, len(LOG) + 1)
    with pytest.raises(InvalidArguments, match="past the end"):
        await cache.find(ref, "line", 10**40)


async def test_find_lists_the_matching_lines_with_their_offsets_and_numbers_ignoring_case() -> None:
    content = "alpha\nAn ERROR here\nbeta\nerror again, Error\ngamma"
    cache = OutputCache(1_000)
    ref = reference_in(cache.put(content + " " * 2_000, name="t"))
    assert ref is not None

    listing = await cache.find(ref, "error")

    header, *lines = listing.split("\n")
    assert header == f"[{ref}: 2 lines containing 'error' (any case) from offset 0; no more]"
    assert lines == ["offset=6 line=2: An ERROR here", "offset=25 line=4: error again, Error"]
    assert (await cache.find(ref, "error", 7)).split("\n")[1:] == lines  # the line of offset 7 is searched
    assert (await cache.find(ref, "error", 21)).split("\n")[1:] == ["offset=25 line=4: error again, Error"]
    assert "0 lines" in await cache.find(ref, "absent")


async def test_find_stops_at_its_limit_and_says_where_to_search_on() -> None:
    cache = OutputCache(8_000)
    ref = reference_in(cache.put(LOG, name="t"))
    assert ref is not None

    first = await cache.find(ref, "X" * 40, limit=1_000)
    resume = int(re.search(r"find again with offset=(\d+)", first).group(1))  # type: ignore[union-attr]
    listed = first.split("\n")[1:]
    second = (await cache.find(ref, "x" * 40, resume, limit=1_000)).split("\n")[1:]

    assert sum(len(line) + 1 for line in listed) <= 1_000
    assert listed[0].startswith("offset=0 line=1: line 0000000 ")
    assert second[0] == f"offset={resume} line={len(listed) + 1}: " + LOG[resume:].split("\n")[0]


async def test_find_searches_a_long_output_whole_and_names_the_line_of_each_match() -> None:
    big = numbered(200_000)  # 10 MB: searched in a worker thread
    cache = OutputCache(8_000)
    ref = reference_in(cache.put(big, name="t"))
    assert ref is not None

    listing = await cache.find(ref, "LINE 0199999")

    offset = big.index("line 0199999")
    assert listing.split("\n")[1] == f"offset={offset} line=200000: " + big[offset:].rstrip("\n")


async def test_an_empty_find_is_invalid() -> None:
    cache = OutputCache(8_000)
    ref = reference_in(cache.put(LOG, name="t"))
    assert ref is not None
    with pytest.raises(InvalidArguments, match="find must not be empty"):
        await cache.find(ref, "")


# --- the reader's arguments -------------------------------------------------------------------------------


def reader_call(cache: OutputCache, **arguments: Any) -> Any:
    return cache.tool.bind(arguments)


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        pytest.param({}, "ref: required", id="no-ref"),
        pytest.param({"ref": 7}, "ref: required, a string", id="ref-not-a-string"),
        pytest.param({"ref": "out-x", "offset": -1}, "offset: must be a whole number, 0 or more", id="negative"),
        pytest.param({"ref": "out-x", "limit": 0}, "limit: must be a whole number, 1 or more", id="limit-zero"),
        pytest.param({"ref": "out-x", "offset": 2.5}, "offset: must be a whole number", id="fraction"),
        pytest.param({"ref": "out-x", "offset": True}, "offset: must be a whole number", id="boolean"),
        pytest.param({"ref": "out-x", "offset": float("inf")}, "offset: must be a whole number", id="infinite"),
        pytest.param({"ref": "out-x", "offset": float("nan")}, "offset: must be a whole number", id="nan"),
        pytest.param({"ref": "out-x", "offset": "-3"}, "offset: must be a whole number", id="negative-text"),
        pytest.param({"ref": "out-x", "offset": [1]}, "offset: must be a whole number", id="a-list"),
        pytest.param({"ref": "out-x", "limit": "9" * 30}, "limit: must be a whole number", id="huge-text"),
        pytest.param({"ref": "out-x", "find": 3}, "find: must be a string", id="find-not-a-string"),
        pytest.param({"ref": "out-x", "mode": "raw"}, "mode: unexpected field", id="extra-field"),
    ],
)
def test_hostile_arguments_are_invalid_arguments_naming_the_field(arguments: dict[str, Any], problem: str) -> None:
    with pytest.raises(InvalidArguments, match=re.escape(problem)) as raised:
        reader_call(OutputCache(8_000), **arguments)
    assert raised.value.code == "invalid_arguments"


async def test_whole_numbers_written_as_floats_or_digits_are_read_and_huge_ones_are_bounded() -> None:
    cache = OutputCache(8_000)
    ref = reference_in(cache.put(LOG, name="t"))

    assert await reader_call(cache, ref=ref, offset=10.0, limit="5")() == (
        f"[{ref}: characters 10 to 14 of {len(LOG)}; read on with offset=15]\n" + LOG[10:15]
    )
    assert len(await reader_call(cache, ref=ref, limit=10**100)()) <= cache.threshold
    with pytest.raises(InvalidArguments, match="past the end"):
        await reader_call(cache, ref=ref, offset=10**100)()


def test_the_reader_is_a_read_only_tool_with_a_schema_the_model_can_follow() -> None:
    reader = OutputCache(8_000).tool

    assert (reader.name, reader.read_only) == (READ_TOOL, True)
    assert reader.parameters["required"] == ["ref"]
    assert set(reader.parameters["properties"]) == {"ref", "offset", "limit", "find"}
    assert "7800" in reader.description


# --- persistence --------------------------------------------------------------------------------------------


async def test_outputs_are_pending_until_flushed_and_then_readable_by_a_later_run() -> None:
    store = MemorySessionStore()
    cache = OutputCache(8_000, store=store, session_id="s1")
    ref = reference_in(cache.put(LOG, name="t"))
    assert ref is not None
    assert await store.load_output("s1", ref) is None

    await cache.flush()

    assert cache.pending == ()
    assert await store.load_output("s1", ref) == LOG
    later = OutputCache(8_000, store=store, session_id="s1")
    assert await later.read(ref, 100, 20) == LOG[100:120]
    other_session = OutputCache(8_000, store=store, session_id="s2")
    with pytest.raises(InvalidArguments, match="is stored in this session"):
        await other_session.read(ref)


async def test_a_write_that_fails_keeps_the_output_pending_and_raises_why(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    cache = OutputCache(8_000, store=store, session_id="s1")
    cache.put(LOG, name="t")
    (tmp_path / "s1.outputs").write_text("in the way")

    with pytest.raises(SessionInvalid, match="not a directory"):
        await cache.flush()

    assert cache.pending == (output_ref(LOG),)
    (tmp_path / "s1.outputs").unlink()
    await cache.flush()
    assert not cache.pending
    assert await store.load_output("s1", output_ref(LOG)) == LOG


async def test_stored_outputs_leave_memory_past_the_budget_and_pending_ones_never_do() -> None:
    store = MemorySessionStore()
    cache = OutputCache(8_000, store=store, session_id="s1", memory_budget=len(LOG))
    one, two = LOG, numbered(20_000, width=41)
    ref_one, ref_two = reference_in(cache.put(one, name="t")), reference_in(cache.put(two, name="t"))
    assert ref_one is not None
    assert ref_two is not None
    assert await cache.read(ref_one, 0, 5) == one[:5]  # over the budget, but nothing is stored yet

    await cache.flush()
    await store.delete("s1")  # what is no longer in memory can no longer be read

    assert await cache.lookup(ref_one) == one  # read last: kept
    assert await cache.lookup(ref_two) is None  # the least recently used: left to the store


async def test_without_a_store_every_output_stays_in_memory_and_flush_does_nothing() -> None:
    cache = OutputCache(8_000, memory_budget=10)
    refs = [reference_in(cache.put(numbered(1_000, width=w), name="t")) for w in (40, 41, 42)]

    await cache.flush()

    assert cache.pending == ()
    assert [len(await cache.read(ref, 0, 3)) for ref in refs if ref is not None] == [3, 3, 3]


# --- find: linear, and off the event loop -------------------------------------------------------------------


async def test_find_is_linear_whatever_the_pattern_and_runs_off_the_event_loop_when_long() -> None:
    """A 3,000-character pattern over a 500,000-character output: a regular expression of the literal is
    quadratic there (seconds, and it ran on the event loop below 1,000,000 characters); the search is a
    lower-cased ``str.find`` on a worker thread, so another task of the loop runs while it searches."""
    content = "a" * 499_999 + "\n"
    cache = OutputCache(8_000)
    ref = reference_in(cache.put(content, name="t"))
    assert ref is not None
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    try:
        await asyncio.sleep(0)
        before = ticks
        found = await cache.find(ref, "a" * 2_999 + "b")
        assert ticks > before, "the loop ran other tasks while the output was searched"
    finally:
        task.cancel()
    assert found.startswith(f"[{ref}: 0 lines containing")


async def test_find_ignores_case_and_keeps_offsets_where_lower_case_is_longer() -> None:
    cache = OutputCache(1_000)
    plain = "".join(f"line {n}: value\n" for n in range(200)) + "Needle here\n"
    ref = reference_in(cache.put(plain, name="t"))
    assert ref is not None
    found = await cache.find(ref, "NEEDLE")
    assert f"offset={plain.index('Needle')} line=201: Needle here" in found
    widened = "İstanbul\n" * 200 + "the NEEDLE\n"  # "İ" lowers to two characters: the offsets must still hold
    ref = reference_in(cache.put(widened, name="t"))
    assert ref is not None
    found = await cache.find(ref, "needle")
    assert f"offset={widened.index('the NEEDLE')} line=201: the NEEDLE" in found
