"""The tool-output cache in whole runs: a scripted model gets a 5 MB output as a bounded preview, pages
through it and searches it with the reader; sessions on a real SQLite file keep the output once and a resumed
session reads it; known keys are masked in what is kept; mistakes are results; the cache off cuts as before.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import assert_valid
from tether import Agent, Done, tool
from tether.errors import ConfigInvalid
from tether.messages import Message, ToolResult
from tether.providers.base import Request
from tether.providers.scripted import ScriptedProvider, Step, call, reply
from tether.sessions import FileSessionStore, MemorySessionStore, Session, SessionNotFound, SQLiteSessionStore
from tether.sessions.base import output_ref
from tether.tools.output_cache import READ_TOOL, reference_in

BIG = "".join(f"line {i:07d} {'x' * 40}\n" for i in range(100_000))  # 5,400,000 characters
KEY = "sk-test-9b8a7c6d5e4f3a2b1c0d"


@tool
def dump() -> str:
    """Print the big log."""
    return BIG


@tool
def small() -> str:
    """Print a little."""
    return "a little"


def last_result(request: Request) -> ToolResult:
    return request.messages[-1].tool_results[0]


def tool_names(request: Request) -> list[str]:
    return [definition.name for definition in request.tools]


def results(messages: tuple[Message, ...]) -> list[ToolResult]:
    return [result for message in messages for result in message.tool_results]


def read(ref: str | None, **arguments: Any) -> Step:
    return call(READ_TOOL, {"ref": ref, **arguments})


def number_after(pattern: str, text: str) -> int:
    found = re.search(pattern, text)
    assert found is not None, f"{pattern!r} not in {text[:300]!r}"
    return int(found.group(1))


@contextmanager
def database(path: Path) -> Iterator[sqlite3.Connection]:
    with closing(sqlite3.connect(path)) as connection, connection:
        yield connection


# --- a 5 MB output ------------------------------------------------------------------------------------------


async def test_a_5_mb_output_reaches_the_model_as_a_bounded_preview_and_the_model_pages_and_searches_it() -> None:
    def first_page(request: Request) -> Step:
        shown = last_result(request).content
        return read(reference_in(shown), offset=number_after(r"offset=(\d+)\) reads on", shown), limit=5_000)

    def next_page(request: Request) -> Step:
        ref = reference_in(request.messages[-3].tool_results[0].content)
        return read(ref, offset=number_after(r"read on with offset=(\d+)", last_result(request).content))

    def search(request: Request) -> Step:
        return read(reference_in(request.messages[2].tool_results[0].content), find="LINE 0099999")

    model = ScriptedProvider([call("dump"), first_page, next_page, search, reply("Read it.")])
    result = await Agent(model, tools=[dump]).run("What does the log say?")

    assert (result.stop_reason, result.text) == ("complete", "Read it.")
    assert_valid(result)
    preview, page_one, page_two, found = (r.content for r in results(result.messages))
    for request in model.requests:  # what the model is sent stays small, whatever the tool printed
        assert sum(len(r.content) for m in request.messages for r in m.tool_results) <= 4 * 8_000
    assert len(preview) <= 8_000
    assert BIG.startswith(preview[: preview.index("\n[... ")])
    head = number_after(r"offset=(\d+)\) reads on", preview)
    assert page_one.split("\n", 1)[1] == BIG[head : head + 5_000]
    assert page_two.split("\n", 1)[1] == BIG[head + 5_000 : head + 5_000 + 7_800]
    assert found.split("\n")[1] == f"offset={BIG.index('line 0099999')} line=100000: line 0099999 {'x' * 40}"
    assert tool_names(model.requests[0]) == ["dump"]
    assert tool_names(model.requests[1]) == ["dump", READ_TOOL]


async def test_an_agent_whose_outputs_stay_short_is_never_offered_the_reader() -> None:
    model = ScriptedProvider([call("small"), call("small", {}), reply("ok")])
    result = await Agent(model, tools=[small]).run("go")

    assert result.stop_reason == "complete"
    assert all(tool_names(request) == ["small"] for request in model.requests)


async def test_the_reader_is_not_run_before_it_is_offered() -> None:
    model = ScriptedProvider([read("out-0123456789abcdef"), reply("ok")])
    result = await Agent(model, tools=[small]).run("go")

    [answer] = results(result.messages)
    assert (answer.is_error, answer.code) == (True, "tool_not_found")
    assert answer.content.endswith("Available tools: small.")


async def test_mistakes_with_the_reader_are_error_results_and_the_run_goes_on() -> None:
    def mistakes(request: Request) -> Step:
        ref = reference_in(last_result(request).content)
        return Step(
            calls=(
                *read("out-0123456789abcdef").calls,
                *read(ref, offset=-5).calls,
                *read(ref, offset=10**18).calls,
                *read(ref, limit="lots").calls,
                *read(ref, offset=10, limit=10**12).calls,
            )
        )

    model = ScriptedProvider([call("dump"), mistakes, reply("ok")])
    result = await Agent(model, tools=[dump]).run("go")

    assert result.stop_reason == "complete"
    unknown, negative, past, wordy, huge = results(result.messages)[1:]
    assert all(r.code == "invalid_arguments" for r in (unknown, negative, past, wordy))
    assert "no output out-0123456789abcdef is stored in this run" in unknown.content
    assert "offset: must be a whole number, 0 or more (got -5)" in negative.content
    assert f"offset 1000000000000000000 is past the end of {output_ref(BIG)}" in past.content
    assert "limit: must be a whole number, 1 or more (got 'lots')" in wordy.content
    assert not huge.is_error
    assert huge.content.split("\n", 1)[1] == BIG[10 : 10 + 7_800]


# --- what is kept, and what is cut -------------------------------------------------------------------------------


async def test_known_keys_are_masked_in_the_output_kept_whole() -> None:
    leaky = BIG[:2_000_000] + f"API_KEY={KEY}\n" + BIG[2_000_000:]

    @tool
    def env() -> str:
        """Print the environment."""
        return leaky

    def search(request: Request) -> Step:
        return read(reference_in(last_result(request).content), find="API_KEY")

    store = MemorySessionStore()
    model = ScriptedProvider([call("env"), search, reply("ok")])
    result = await Agent(model, tools=[env], store=store, secrets=[KEY]).run("go", session="s1")

    masked = leaky.replace(KEY, "***")
    assert await store.load_output("s1", output_ref(masked)) == masked
    assert await store.load_output("s1", output_ref(leaky)) is None
    line = masked.count("\n", 0, masked.index("API_KEY")) + 1
    found = results(result.messages)[1].content.split("\n")
    assert len(found) == 2
    assert f" line={line}: " in found[1]
    assert found[1].endswith("API_KEY=***")
    assert KEY not in repr(model.requests)


async def test_with_the_cache_off_a_long_output_is_cut_as_before_and_no_reader_is_offered() -> None:
    model = ScriptedProvider([call("dump"), reply("ok")])
    result = await Agent(model, tools=[dump], cache_tool_outputs=None).run("go")

    [cut] = results(result.messages)
    assert len(cut.content) <= 30_000
    assert "characters cut from the middle of this output" in cut.content
    assert reference_in(cut.content) is None
    assert all(tool_names(request) == ["dump"] for request in model.requests)


async def test_a_tools_own_limit_bounds_its_preview_and_the_whole_is_still_readable() -> None:
    @tool(max_output=2_000)
    def terse() -> str:
        """Print a lot, tersely."""
        return BIG[:50_000]

    def page(request: Request) -> Step:
        return read(reference_in(last_result(request).content), offset=40_000, limit=100)

    model = ScriptedProvider([call("terse"), page, reply("ok")])
    result = await Agent(model, tools=[terse]).run("go")

    preview, read_back = results(result.messages)
    assert len(preview.content) <= 2_000
    assert read_back.content.split("\n", 1)[1] == BIG[40_000:40_100]


async def test_the_agents_limit_lowers_the_threshold_and_stays_the_last_line_of_defence() -> None:
    model = ScriptedProvider([call("dump"), reply("ok")])
    result = await Agent(model, tools=[dump], max_tool_output=3_000).run("go")

    [preview] = results(result.messages)
    assert len(preview.content) <= 3_000
    assert reference_in(preview.content) == output_ref(BIG)


async def test_a_done_message_is_the_runs_answer_whole_not_a_preview() -> None:
    answer = "answer " * 2_000

    @tool
    def finish() -> None:
        """End the run."""
        raise Done(answer)

    result = await Agent(ScriptedProvider([call("finish")]), tools=[finish]).run("go")

    assert (result.stop_reason, result.text) == ("done_tool", answer)


# --- sessions ---------------------------------------------------------------------------------------------


async def test_a_sqlite_session_stores_the_output_once_and_a_resumed_session_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite"
    async with SQLiteSessionStore(path) as store:
        model = ScriptedProvider([call("dump"), call("dump"), reply("seen twice")])
        first = await Agent(model, tools=[dump], store=store).run("dump it twice", session="s1")
    assert first.stop_reason == "complete"
    with database(path) as db:
        assert db.execute("SELECT ref, length(content) FROM outputs").fetchall() == [(output_ref(BIG), len(BIG))]
        (stored,) = db.execute("SELECT sum(length(data)) FROM messages WHERE session_id = 's1'").fetchone()
        assert stored < 25_000  # the messages hold previews, never the text again

    async with SQLiteSessionStore(path) as store:  # another process, later
        model = ScriptedProvider([read(output_ref(BIG), offset=1_000_000, limit=100), reply("ok")])
        later = await Agent(model, tools=[dump], store=store).run("read more of it", session="s1")

    assert tool_names(model.requests[0]) == ["dump", READ_TOOL]  # offered at once: the history holds a preview
    assert results(later.messages)[-1].content == (
        f"[{output_ref(BIG)}: characters 1000000 to 1000099 of {len(BIG)}; read on with offset=1000100]\n"
        + BIG[1_000_000:1_000_100]
    )


class CheckingStore(SQLiteSessionStore):
    """A SQLite store that notes, at each save, the refs the session names that it does not hold."""

    missing: list[str]

    async def save(self, session: Session) -> None:
        for result in results(session.messages):
            ref = reference_in(result.content)
            if ref is not None and await self.load_output(session.id, ref) is None:
                self.missing.append(ref)
        await super().save(session)


async def test_a_saved_transcript_never_names_an_output_its_store_lacks(tmp_path: Path) -> None:
    other = BIG[::-1]

    @tool
    def reverse() -> str:
        """Print the log backwards."""
        return other

    store = CheckingStore(tmp_path / "s.sqlite")
    async with store:
        store.missing = []
        model = ScriptedProvider([call("dump"), call("reverse"), reply("ok")])
        result = await Agent(model, tools=[dump, reverse], store=store).run("go", session="s1")
        assert await store.load_output("s1", output_ref(other)) == other

    assert result.stop_reason == "complete"
    assert store.missing == []


async def test_an_output_the_store_cannot_keep_stops_the_run_before_the_session_names_it(tmp_path: Path) -> None:
    store = FileSessionStore(tmp_path)
    (tmp_path / "s1.outputs").write_text("in the way")
    model = ScriptedProvider([call("dump"), reply("ok")])

    result = await Agent(model, tools=[dump], store=store).run("go", session="s1")

    assert result.stop_reason == "error"
    assert "could not save the session" in result.detail
    assert "not a directory" in result.detail
    with pytest.raises(SessionNotFound):  # no save named the output the store could not keep
        await store.load("s1")


async def test_a_run_continued_from_history_without_a_store_is_offered_the_reader_and_told_the_output_expired() -> None:
    first = await Agent(ScriptedProvider([call("dump"), reply("ok")]), tools=[dump]).run("go")
    model = ScriptedProvider([read(output_ref(BIG)), reply("gone")])

    later = await Agent(model, tools=[dump]).run("and more?", history=first.messages)

    assert tool_names(model.requests[0]) == ["dump", READ_TOOL]
    expired = results(later.messages)[-1]
    assert (expired.is_error, expired.code) == (True, "invalid_arguments")
    assert f"no output {output_ref(BIG)} is stored in this run" in expired.content


# --- JSON action mode -------------------------------------------------------------------------------------


async def test_in_json_action_mode_the_reader_joins_the_protocols_tools_once_an_output_is_kept() -> None:
    def page(request: Request) -> Step:
        ref = re.search(r"stored as (out-[0-9a-f]{16})", request.messages[-1].text).group(1)  # type: ignore[union-attr]
        return reply(f'{{"type": "tool_call", "name": "{READ_TOOL}", "arguments": {{"ref": "{ref}", "limit": 30}}}}')

    script: list[Step | Callable[[Request], Step]] = [
        reply('{"type": "tool_call", "name": "dump", "arguments": {}}'),
        page,
    ]
    model = ScriptedProvider([*script, reply('{"type": "final", "text": "ok"}')], supports_tools=False)
    result = await Agent(model, tools=[dump]).run("go")

    assert result.stop_reason == "complete"
    assert f"- {READ_TOOL}:" not in (model.requests[0].system or "")
    assert f"- {READ_TOOL}:" in (model.requests[1].system or "")
    assert results(result.messages)[1].content.endswith("\n" + BIG[:30])


# --- settings ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [0, 999, -1, True, 8_000.0, "8000"])
def test_cache_tool_outputs_must_be_a_number_of_characters_of_at_least_1000(value: Any) -> None:
    with pytest.raises(ConfigInvalid, match="cache_tool_outputs must be a number of characters, at least 1000"):
        Agent(ScriptedProvider([]), cache_tool_outputs=value)


def test_a_tool_cannot_take_the_readers_name_while_the_cache_is_on() -> None:
    @tool(name=READ_TOOL)
    def impostor() -> str:
        """Pretend."""
        return ""

    with pytest.raises(ConfigInvalid, match=f"a tool is named '{READ_TOOL}'"):
        Agent(ScriptedProvider([]), tools=[impostor])
    Agent(ScriptedProvider([]), tools=[impostor], cache_tool_outputs=None)
