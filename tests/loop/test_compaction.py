"""Compaction: a long run's history is summarized to fit the model's window, never overflowing, never
orphaning a tool call, and the full transcript is kept (``loop/context/window.py``, docs/context.md).

The model is a ``ScriptedProvider`` with a ``context_window``: like a real API it refuses a request that does
not fit, with an OpenAI-worded ``context_overflow`` error, and counts what it answered.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.providers.wire_rules import assert_request_accepted
from tether import Agent, Compaction, Limits, tool
from tether.errors import ConfigInvalid, ContextOverflow, RateLimited
from tether.events import Compacted, RunEvent, TextDelta, TurnStarted
from tether.loop.context import COMPACTION_REQUEST
from tether.messages import Message, compaction_of, model_view, transcript_problems
from tether.providers.base import Request
from tether.providers.scripted import ScriptedProvider, Step, call, fail, reply
from tether.sessions import MemorySessionStore, Session, SQLiteSessionStore

WINDOW = 4_000


@tool
def fetch(n: int) -> str:
    """Fetch item n."""
    return f"item {n}: " + "lorem ipsum dolor sit amet " * 25


def is_summary_request(request: Request) -> bool:
    last = request.messages[-1]
    return last.role == "user" and last.text == COMPACTION_REQUEST


def fetcher(turns: int, summaries: list[Request] | None = None) -> Any:
    """A model that fetches item after item, answers after ``turns`` fetches, and summarizes when asked."""

    calls = [0]

    def respond(request: Request) -> Step:
        if is_summary_request(request):
            if summaries is not None:
                summaries.append(request)
            fetched = sum(len(m.tool_results) for m in request.messages if m.role == "tool")
            return reply(f"SUMMARY: the user wants items fetched; {fetched} more were fetched.")
        if any(m.provider_data for m in request.messages):
            raise AssertionError("the marker's record reached the provider")
        done, calls[0] = calls[0], calls[0] + 1
        return reply("all fetched") if done >= turns else call("fetch", {"n": done})

    return respond


def body(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    return messages[1:] if messages and messages[0].role == "system" else messages


async def run(agent: Agent, prompt: str = "fetch the items", **options: Any) -> tuple[Any, list[RunEvent]]:
    events: list[RunEvent] = []
    result = await agent.run(prompt, on_event=events.append, **options)
    return result, events


async def test_a_300_turn_run_in_a_4000_token_window_compacts_and_never_sends_a_request_over_it() -> None:
    summaries: list[Request] = []
    model = ScriptedProvider([fetcher(299, summaries)], repeat_last=True, context_window=WINDOW)
    agent = Agent(model, tools=[fetch], system="Fetch.", limits=Limits(max_turns=300, max_tool_calls=1000))
    result, events = await run(agent)

    assert result.stop_reason == "complete", result.detail
    assert result.turns == 300
    compactions = [e for e in events if type(e) is Compacted]
    assert len(compactions) >= 10
    assert model.refused == []
    assert model.largest_request <= WINDOW
    for request in model.requests:  # every request the model saw was a valid conversation, for every provider
        assert transcript_problems(request.messages) == []
        assert_request_accepted(request)
    assert transcript_problems(body(result.messages)) == []
    assert sum(len(m.tool_results) for m in result.messages) == 299  # the transcript keeps everything
    assert len(summaries) == len(compactions)
    for event in compactions:
        assert event.reason == "threshold"
        assert event.tokens_after < event.tokens_before
        assert event.tokens_before > int(WINDOW * 0.8) >= event.tokens_after


async def test_the_model_continues_from_system_prompt_summary_and_recent_turns_verbatim() -> None:
    model = ScriptedProvider([fetcher(40)], repeat_last=True, context_window=WINDOW)
    agent = Agent(model, tools=[fetch], system="Fetch.", limits=Limits(max_turns=50))
    result, events = await run(agent)

    compacted = [e for e in events if type(e) is Compacted][-1]
    after = model.requests[-1]
    assert after.system == "Fetch."
    first = after.messages[0]
    assert first.role == "user"
    assert first.text.startswith("[Summary of the earlier conversation")
    assert "SUMMARY: the user wants items fetched" in first.text
    assert first.provider_data is None  # the marker's record is tether's, not the provider's
    marker_at = result.messages.index(compacted.marker)
    assert list(after.messages) == list(body(result.model_messages))[:-1]  # all but the answer to it
    assert len(after.messages) <= len(result.messages) - marker_at
    assert model_view(result.messages) == result.model_messages
    assert result.model_messages[0].role == "system"


async def test_the_summary_call_is_tools_off_unshown_recorded_and_counted() -> None:
    summaries: list[Request] = []
    model = ScriptedProvider([fetcher(30, summaries)], repeat_last=True, context_window=WINDOW)
    agent = Agent(model, tools=[fetch], limits=Limits(max_turns=40))
    result, events = await run(agent)

    assert summaries
    request = summaries[0]
    assert request.tool_choice == "none"
    assert [t.name for t in request.tools] == ["fetch"]  # kept for providers that need them with tool blocks
    assert request.settings.max_tokens == WINDOW // 8
    shown = "".join(e.text for e in events if type(e) is TextDelta)
    assert "SUMMARY" not in shown
    records = [r for r in result.turn_records if r.compaction]
    assert len(records) == len(summaries) == len([e for e in events if type(e) is Compacted])
    assert all(r.final and r.usage.input_tokens > 0 for r in records)
    assert len(result.turn_records) == len(model.requests)
    assert result.usage.requests == len(model.requests)
    assert result.turns == 31  # compaction calls are not turns
    # no TurnStarted for the summary calls
    assert len([e for e in events if type(e) is TurnStarted]) == len(model.requests) - len(summaries)


async def test_compaction_events_come_between_turns() -> None:
    model = ScriptedProvider([fetcher(30)], repeat_last=True, context_window=WINDOW)
    _, events = await run(Agent(model, tools=[fetch], limits=Limits(max_turns=40)))
    kinds = [e.kind for e in events]
    for index, kind in enumerate(kinds):
        if kind == "compacted":
            assert kinds[index - 1] in ("turn_completed", "tool_result_received", "run_started")
            assert kinds[index + 1] == "turn_started"


async def test_first_new_message_still_points_at_the_prompt_after_markers_are_inserted() -> None:
    model = ScriptedProvider([fetcher(30)], repeat_last=True, context_window=WINDOW)
    result, _ = await run(Agent(model, tools=[fetch], limits=Limits(max_turns=40)), "the prompt")
    assert result.new_messages[0].text == "the prompt"


async def test_a_session_resumes_from_the_compacted_state_and_keeps_the_full_transcript(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "sessions.db")
    model = ScriptedProvider([fetcher(30)], repeat_last=True, context_window=WINDOW)
    agent = Agent(model, tools=[fetch], limits=Limits(max_turns=40), store=store)
    first, _ = await run(agent, session="s1")
    stored = await store.load("s1")
    assert stored.messages == first.messages
    assert any(compaction_of(m) for m in stored.messages)

    second_model = ScriptedProvider([reply("resumed")], context_window=WINDOW)
    second = Agent(second_model, tools=[fetch], store=store)
    result, _ = await run(second, "and now?", session="s1")
    sent = second_model.requests[0].messages
    assert sent[0].text.startswith("[Summary of the earlier conversation")
    assert list(sent) == [*body(first.model_messages), Message.user("and now?")]
    assert len(sent) < len(first.messages)
    assert result.messages[: len(first.messages)] == first.messages


async def test_a_history_passed_back_continues_from_its_last_marker() -> None:
    model = ScriptedProvider([fetcher(30)], repeat_last=True, context_window=WINDOW)
    first, _ = await run(Agent(model, tools=[fetch], limits=Limits(max_turns=40)))
    follow = ScriptedProvider([reply("ok")])  # no window known: the view is still the marker's
    await Agent(follow, tools=[fetch]).run("next", history=first.messages)
    assert follow.requests[0].messages[0].text.startswith("[Summary of the earlier conversation")


async def test_an_overflow_answer_compacts_and_retries_the_turn_once() -> None:
    # The agent believes in a far larger window: the provider's refusal is what triggers compaction.
    model = ScriptedProvider([fetcher(30)], repeat_last=True, context_window=WINDOW)
    agent = Agent(model, tools=[fetch], limits=Limits(max_turns=40), compaction=Compaction(context_window=100_000))
    result, events = await run(agent)
    assert result.stop_reason == "complete", result.detail
    compactions = [e for e in events if type(e) is Compacted]
    assert compactions[0].reason == "overflow"
    assert len(model.refused) == 1  # learned from the error's "maximum context length is 4000": no second refusal
    assert all(r.error != "context_overflow" for r in result.turn_records[-5:])


async def test_an_overflow_from_a_model_without_a_known_window_is_recovered_from_the_error() -> None:
    overflow = ContextOverflow("prompt is too long: 5210 tokens > 5000 maximum", status=400)
    answers = iter([call("fetch", {"n": 1}), call("fetch", {"n": 2}), fail(overflow), reply("S"), reply("done")])

    def respond(request: Request) -> Step:
        return next(answers)

    model = ScriptedProvider([respond], repeat_last=True)
    result, events = await run(Agent(model, tools=[fetch]))
    assert result.stop_reason == "complete", result.detail
    assert result.text == "done"
    compacted = [e for e in events if type(e) is Compacted]
    assert len(compacted) == 1
    assert compacted[0].reason == "overflow"
    assert model.requests[-1].messages[0].text.endswith("S")


async def test_a_second_overflow_in_the_same_turn_stops_the_run_with_context_overflow() -> None:
    overflow = ContextOverflow("This model's maximum context length is 5000 tokens.", status=400)
    answers = iter([call("fetch", {"n": 1}), call("fetch", {"n": 2}), fail(overflow), reply("S"), fail(overflow)])
    model = ScriptedProvider([lambda request: next(answers)], repeat_last=True)
    result, _ = await run(Agent(model, tools=[fetch]))
    assert result.stop_reason == "error"
    assert result.error is not None
    assert result.error.code == "context_overflow"


async def test_a_prompt_larger_than_the_window_stops_with_a_clear_overflow_and_sends_nothing_over() -> None:
    model = ScriptedProvider([reply("never")], context_window=WINDOW)
    result, _ = await run(Agent(model), "x" * 40_000)
    assert result.stop_reason == "error"
    assert result.error is not None
    assert result.error.code == "context_overflow"
    assert "cannot be made to fit" in result.detail
    assert model.requests == []


async def test_with_compaction_off_a_run_that_outgrows_the_window_stops_with_context_overflow() -> None:
    model = ScriptedProvider([fetcher(100)], repeat_last=True, context_window=WINDOW)
    agent = Agent(model, tools=[fetch], limits=Limits(max_turns=100), compaction=False)
    result, events = await run(agent)
    assert result.stop_reason == "error"
    assert "maximum context length" in result.detail
    assert not any(type(e) is Compacted for e in events)
    assert not any(compaction_of(m) for m in result.messages)


async def test_a_model_that_cannot_summarize_still_lets_the_run_go_on_with_a_marker_that_says_so() -> None:
    calls = [0]

    def respond(request: Request) -> Step:
        if is_summary_request(request):
            return call("fetch", {"n": 0})  # tools are off: this answer is unusable as a summary
        calls[0] += 1
        return call("fetch", {"n": calls[0]}) if calls[0] < 25 else reply("done")

    model = ScriptedProvider([respond], repeat_last=True, context_window=WINDOW)
    result, events = await run(Agent(model, tools=[fetch], limits=Limits(max_turns=60)))
    assert result.stop_reason == "complete", result.detail
    marker = next(e for e in events if type(e) is Compacted).marker
    assert "no summary of them could be made" in marker.text
    assert model.refused == []


async def test_cancelling_during_the_summary_call_cancels_the_run_and_keeps_a_valid_transcript() -> None:
    started = asyncio.Event()

    def respond(request: Request) -> Step:
        if is_summary_request(request):
            started.set()
            return Step(hang=True)
        return call("fetch", {"n": sum(1 for m in request.messages if m.role == "tool")})

    model = ScriptedProvider([respond], repeat_last=True, context_window=WINDOW)
    handle = Agent(model, tools=[fetch], limits=Limits(max_turns=60)).start("go")
    await started.wait()
    handle.cancel()
    result = await handle
    assert result.stop_reason == "cancelled"
    assert transcript_problems(body(result.messages)) == []
    assert not any(compaction_of(m) for m in result.messages)


async def test_json_action_mode_compacts_too() -> None:
    calls = [0]

    def respond(request: Request) -> Step:
        if COMPACTION_REQUEST in request.messages[-1].text:
            return reply('{"type": "final", "text": "SUMMARY of fetching"}')
        calls[0] += 1
        if calls[0] >= 25:
            return reply('{"type": "final", "text": "done"}')
        return reply('{"type": "tool_call", "name": "fetch", "arguments": {"n": ' + str(calls[0]) + "}}")

    model = ScriptedProvider([respond], repeat_last=True, context_window=WINDOW, supports_tools=False)
    result, events = await run(Agent(model, tools=[fetch], limits=Limits(max_turns=60)))
    assert result.stop_reason == "complete", result.detail
    assert model.refused == []
    compacted = [e for e in events if type(e) is Compacted]
    assert compacted
    assert "SUMMARY of fetching" in compacted[0].marker.text


@pytest.mark.parametrize(
    "settings", [{"threshold": 1.5}, {"keep_recent": 0}, {"keep_recent": 0.9}, {"context_window": 10}]
)
def test_compaction_settings_are_checked(settings: dict[str, Any]) -> None:
    from tether.errors import ConfigInvalid

    with pytest.raises(ConfigInvalid):
        Compaction(**settings)


async def test_a_compaction_shows_older_cached_outputs_by_reference_and_the_model_can_still_read_them() -> None:
    @tool
    def dump(n: int) -> str:
        """Dump log n."""
        return f"log {n} begins\n" + "".join(f"line {n}.{i}: all is well\n" for i in range(150)) + f"log {n} ends"

    calls = [0]
    seen_after: list[Request] = []

    def respond(request: Request) -> Step:
        if is_summary_request(request):
            return reply("SUMMARY: logs dumped.")
        calls[0] += 1
        if calls[0] == 40:  # read back the start of the first output still kept by reference
            seen_after.append(request)
            stubbed = [r for m in request.messages for r in m.tool_results if r.content.startswith("[output of")]
            ref = stubbed[0].content.split("stored as ")[1].split(":")[0]
            return call("read_tool_output", {"ref": ref, "limit": 200})
        return reply("done") if calls[0] > 40 else call("dump", {"n": calls[0]})

    model = ScriptedProvider([respond], repeat_last=True, context_window=WINDOW)
    agent = Agent(model, tools=[dump], limits=Limits(max_turns=60), cache_tool_outputs=1_000)
    result, events = await run(agent)

    assert result.stop_reason == "complete", result.detail
    compactions = [e for e in events if type(e) is Compacted]
    assert any(e.trimmed for e in compactions)
    assert model.refused == []
    request = seen_after[-1]
    results = [r for m in request.messages for r in m.tool_results]
    assert results[-1].content.startswith("log ")  # the last turn's output: its preview, not a reference
    assert any(r.content.startswith("[output of dump") for r in results[:-1])
    read = [r for m in result.messages for r in m.tool_results if r.name == "read_tool_output"]
    assert len(read) == 1
    assert not read[0].is_error
    assert "begins" in read[0].content
    cached = [r for m in result.messages for r in m.tool_results if r.name == "dump"]
    assert all(not r.content.startswith("[output of") for r in cached)  # the transcript keeps the previews


# --- after the answer ------------------------------------------------------------------------------------------

EARLIER = tuple(
    message
    for n in range(3)
    for message in (Message.user(f"tell me about part {n}"), Message.assistant(f"part {n}: " + "detail " * 280))
)
"""Three earlier exchanges of about 500 tokens each: well under the trigger before the next answer."""


def long_answerer(summaries: list[Request]) -> Any:
    """A model whose answer (about 2,000 tokens) takes the conversation over the trigger; it summarizes when asked."""

    def respond(request: Request) -> Step:
        if is_summary_request(request):
            summaries.append(request)
            return reply("SUMMARY: parts 0 to 2 were described.")
        return reply("the long answer: " + "word " * 1_600)

    return respond


async def test_a_session_run_whose_answer_passes_the_trigger_compacts_after_it_ready_for_the_next() -> None:
    summaries: list[Request] = []
    store = MemorySessionStore()
    await store.save(Session.new(id="s1").updated(messages=EARLIER))
    model = ScriptedProvider([long_answerer(summaries)], repeat_last=True, context_window=WINDOW)
    result, events = await run(Agent(model, store=store), "and part 3?", session="s1")
    kinds = [event.kind for event in events]
    assert kinds[-3:] == ["turn_completed", "compacted", "run_completed"]
    compacted = events[-2]
    assert isinstance(compacted, Compacted)
    assert (compacted.reason, compacted.turn) == ("threshold", 2)
    assert compacted.tokens_after < compacted.tokens_before
    assert (result.stop_reason, result.degraded) == ("complete", False)
    assert result.text.startswith("the long answer")
    assert [r.compaction for r in result.turn_records] == [False, True]
    stored = (await store.load("s1")).messages
    assert stored == result.messages
    assert body(model_view(stored))[0].text.startswith("[Summary of the earlier conversation")
    assert transcript_problems(list(body(stored))) == []

    follow = ScriptedProvider([reply("ok")], context_window=WINDOW)
    await Agent(follow, store=store).run("thanks", session="s1")
    assert not is_summary_request(follow.requests[0]), "the next run starts without a summary call"
    assert follow.requests[0].messages[0].text.startswith("[Summary of the earlier conversation")


async def test_a_run_outside_a_session_compacts_after_its_answer_only_when_asked_always() -> None:
    summaries: list[Request] = []
    model = ScriptedProvider([long_answerer(summaries)], repeat_last=True, context_window=WINDOW)
    result, events = await run(Agent(model), "and part 3?", history=EARLIER)
    assert events[-2].kind == "turn_completed"
    assert summaries == []
    assert not any(compaction_of(m) for m in result.messages)

    always = Agent(model, compaction=Compaction(after_answer="always"))
    result, events = await run(always, "and part 3?", history=EARLIER)
    assert [event.kind for event in events][-2:] == ["compacted", "run_completed"]
    assert len(summaries) == 1
    assert any(compaction_of(m) for m in result.messages)


async def test_an_answer_under_the_trigger_costs_no_call_after_it() -> None:
    store = MemorySessionStore()
    model = ScriptedProvider([reply("short")], context_window=WINDOW)
    result, events = await run(Agent(model, store=store), "hi", session="s1")
    assert len(model.requests) == 1
    assert [event.kind for event in events][-2:] == ["turn_completed", "run_completed"]
    assert result.stop_reason == "complete"


async def test_a_compaction_after_the_answer_that_fails_leaves_the_answer_and_the_transcript_as_they_were() -> None:
    store = MemorySessionStore()
    await store.save(Session.new(id="s1").updated(messages=EARLIER))
    answer = reply("the long answer: " + "word " * 1_600)
    model = ScriptedProvider([answer, fail(RateLimited("slow down"))], context_window=WINDOW)
    result = await Agent(model, store=store).run("and part 3?", session="s1")
    assert (result.stop_reason, result.degraded, result.error) == ("complete", False, None)
    assert result.text.startswith("the long answer")
    assert len(model.requests) == 2, "the summary was asked for, and failed"
    assert not any(compaction_of(m) for m in result.messages)
    assert (await store.load("s1")).messages == result.messages


def test_after_answer_takes_only_its_three_words() -> None:
    with pytest.raises(ConfigInvalid, match=r"Compaction\.after_answer must be 'session', 'always' or 'never'"):
        Compaction(after_answer="sometimes")  # type: ignore[arg-type]
