"""ScriptedProvider: the events each step helper streams, script bookkeeping, and model-string resolution."""

from __future__ import annotations

import json

import pytest

from tether.errors import ConfigInvalid, RateLimited
from tether.events import (
    LlmEvent,
    StreamEnd,
    StreamStart,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
)
from tether.loop.accumulator import StreamAccumulator
from tether.messages import Message, Text, ToolCall, ToolResult
from tether.providers.base import Provider, Request
from tether.providers.registry import resolve
from tether.providers.scripted import (
    ScriptedProvider,
    ScriptExhausted,
    Step,
    call,
    cut_off,
    empty,
    events,
    fail,
    parallel,
    reply,
)
from tether.usage import Usage

REQUEST = Request(messages=(Message.user("What is 2+3?"),), system="Be brief.")


async def play(provider: ScriptedProvider, request: Request = REQUEST) -> list[LlmEvent]:
    return [event async for event in provider.stream(request)]


async def play_into(seen: list[LlmEvent], provider: ScriptedProvider) -> None:
    """Like :func:`play`, keeping the events streamed before a failure."""
    async for event in provider.stream(REQUEST):
        seen.append(event)


async def play_one(step: Step) -> list[LlmEvent]:
    return await play(ScriptedProvider([step]))


def kinds(stream: list[LlmEvent]) -> list[str]:
    return [event.kind for event in stream]


def last_end(stream: list[LlmEvent]) -> StreamEnd:
    assert isinstance(stream[-1], StreamEnd)
    return stream[-1]


# --- step layouts -------------------------------------------------------------------------------------------


async def test_reply_streams_start_text_and_a_stop_end() -> None:
    stream = await play_one(reply("5"))
    assert kinds(stream) == ["stream_start", "text_delta", "stream_end"]
    assert stream[0] == StreamStart(model="scripted")
    assert stream[1] == TextDelta("5")
    assert last_end(stream).finish_reason == "stop"


async def test_reply_with_chunk_size_streams_the_text_in_pieces() -> None:
    stream = await play_one(reply("abcdefg", chunk_size=3))
    assert [e.text for e in stream if isinstance(e, TextDelta)] == ["abc", "def", "g"]


async def test_reply_with_thinking_streams_the_thinking_and_its_signature_before_the_text() -> None:
    stream = await play_one(reply("answer", thinking="hmm", signature="sig"))
    assert kinds(stream) == ["stream_start", "thinking_delta", "text_delta", "stream_end"]
    assert stream[1] == ThinkingDelta("hmm", "sig")


async def test_call_streams_one_complete_tool_call_and_finishes_with_tool_calls() -> None:
    stream = await play_one(call("add", {"a": 2, "b": 3}, id="c1"))
    assert stream[1:] == [
        ToolCallStart("c1", "add", 0),
        ToolCallDelta("c1", json.dumps({"a": 2, "b": 3})),
        ToolCallEnd("c1"),
        last_end(stream),
    ]
    assert last_end(stream).finish_reason == "tool_calls"


async def test_call_with_string_arguments_sends_them_verbatim() -> None:
    stream = await play_one(call("add", '{"a": 2,', id="c1"))
    assert ToolCallDelta("c1", '{"a": 2,') in stream


async def test_call_without_arguments_sends_an_empty_object() -> None:
    stream = await play_one(call("now", id="c1"))
    assert ToolCallDelta("c1", "{}") in stream


async def test_parallel_starts_every_call_then_interleaves_deltas_by_id_then_ends() -> None:
    step = parallel(call("read", {"path": "aaaa"}, id="r"), call("grep", {"q": "bb"}, id="g"), chunk_size=4)
    stream = (await play_one(step))[1:-1]
    starts = [e for e in stream if isinstance(e, ToolCallStart)]
    deltas = [e for e in stream if isinstance(e, ToolCallDelta)]
    ends = [e for e in stream if isinstance(e, ToolCallEnd)]
    assert stream == [*starts, *deltas, *ends]
    assert [(s.id, s.name, s.index) for s in starts] == [("r", "read", 0), ("g", "grep", 1)]
    assert [d.id for d in deltas[:4]] == ["r", "g", "r", "g"]
    assert "".join(d.arguments_delta for d in deltas if d.id == "r") == json.dumps({"path": "aaaa"})
    assert "".join(d.arguments_delta for d in deltas if d.id == "g") == json.dumps({"q": "bb"})
    assert [e.id for e in ends] == ["r", "g"]


async def test_parallel_calls_accumulate_to_the_scripted_arguments() -> None:
    step = parallel(call("read", {"path": "x.py"}), call("grep", {"q": "def"}), chunk_size=3)
    accumulator = StreamAccumulator()
    for event in await play_one(step):
        accumulator.add(event)
    turn = accumulator.finish()
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [("read", {"path": "x.py"}), ("grep", {"q": "def"})]


async def test_cut_off_truncates_the_last_call_leaves_it_open_and_finishes_with_length() -> None:
    arguments = json.dumps({"content": "x" * 20})
    step = cut_off(parallel(call("a", {}, id="first"), call("write", arguments, id="last")))
    stream = await play_one(step)
    assert last_end(stream).finish_reason == "length"
    assert [e.id for e in stream if isinstance(e, ToolCallEnd)] == ["first"]
    sent = "".join(e.arguments_delta for e in stream if isinstance(e, ToolCallDelta) and e.id == "last")
    assert sent == arguments[: len(arguments) // 2]


async def test_fail_raises_its_error_after_the_text() -> None:
    error = RateLimited("slow down", retry_after=2.0)
    seen: list[LlmEvent] = []
    with pytest.raises(RateLimited) as caught:
        await play_into(seen, ScriptedProvider([fail(error, after_text="partial")]))
    assert caught.value is error
    assert kinds(seen) == ["stream_start", "text_delta"]
    assert seen[1] == TextDelta("partial")


async def test_empty_streams_nothing_but_start_and_end() -> None:
    stream = await play_one(empty())
    assert kinds(stream) == ["stream_start", "stream_end"]
    assert last_end(stream).finish_reason == "stop"


async def test_events_streams_exactly_the_given_events() -> None:
    raw: list[LlmEvent] = [TextDelta("a"), ToolCallStart("x", "f", 0), StreamEnd("content_filter", Usage())]
    assert await play_one(events(*raw)) == raw


async def test_finish_and_usage_of_a_step_override_the_defaults() -> None:
    usage = Usage(input_tokens=1, output_tokens=2, requests=1)
    stream = await play_one(reply("hi", finish="content_filter", usage=usage))
    assert last_end(stream) == StreamEnd("content_filter", usage)


async def test_a_responder_function_receives_the_request_and_its_step_is_played() -> None:
    received: list[Request] = []

    def respond(request: Request) -> Step:
        received.append(request)
        return reply(f"you said {request.messages[-1].text}")

    stream = await play(ScriptedProvider([respond]))
    assert received == [REQUEST]
    assert TextDelta("you said What is 2+3?") in stream


# --- script bookkeeping -------------------------------------------------------------------------------------


async def test_every_request_is_recorded_in_order() -> None:
    provider = ScriptedProvider([reply("one"), reply("two")])
    second = Request(messages=(Message.user("again"),))
    await play(provider, REQUEST)
    await play(provider, second)
    assert provider.requests == [REQUEST, second]


async def test_calling_past_the_end_raises_script_exhausted_with_a_clear_message() -> None:
    provider = ScriptedProvider([reply("only")])
    await play(provider)
    with pytest.raises(ScriptExhausted) as caught:
        await play(provider)
    message = str(caught.value)
    assert "called 2 times" in message
    assert "1 step(s)" in message
    assert "'only'" in message


async def test_an_empty_script_is_exhausted_at_the_first_call() -> None:
    with pytest.raises(ScriptExhausted, match="called 1 times"):
        await play(ScriptedProvider([]))


async def test_unconsumed_lists_the_steps_not_played_and_assert_consumed_fails_on_them() -> None:
    provider = ScriptedProvider([reply("one"), call("add", {"a": 1}), reply("three")])
    await play(provider)
    assert len(provider.unconsumed) == 2
    assert "add" in provider.unconsumed[0]
    assert "'three'" in provider.unconsumed[1]
    with pytest.raises(AssertionError, match="2 step"):
        provider.assert_consumed()


async def test_assert_consumed_passes_once_every_step_was_played() -> None:
    provider = ScriptedProvider([reply("one"), reply("two")])
    await play(provider)
    await play(provider)
    assert provider.unconsumed == []
    provider.assert_consumed()


async def test_repeat_last_plays_the_last_step_for_every_extra_call() -> None:
    provider = ScriptedProvider([reply("first"), reply("again")], repeat_last=True)
    texts = []
    for _ in range(4):
        texts.append([e.text for e in await play(provider) if isinstance(e, TextDelta)])
    assert texts == [["first"], ["again"], ["again"], ["again"]]


async def test_echo_answers_with_the_last_user_message_every_time() -> None:
    provider = ScriptedProvider.echo()
    conversation = (
        Message.user("first"),
        Message.assistant("ok"),
        Message.user("echo me"),
        Message.assistant("x"),
    )
    for _ in range(3):
        stream = await play(provider, Request(messages=conversation))
        assert [e.text for e in stream if isinstance(e, TextDelta)] == ["echo me"]
    assert provider.info.name == "echo"


async def test_generated_call_ids_are_unique_across_turns() -> None:
    provider = ScriptedProvider([call("a"), parallel(call("b"), call("c")), call("d")])
    ids = []
    for _ in range(3):
        ids += [e.id for e in await play(provider) if isinstance(e, ToolCallStart)]
    assert len(ids) == 4
    assert len(set(ids)) == 4


async def test_usage_estimate_is_deterministic_and_not_zero() -> None:
    request = Request(
        messages=(
            Message.user("read the file"),
            Message("assistant", (ToolCall("c", "read", {"p": 1}, '{"p": 1}'),)),
            Message("tool", (ToolResult("c", "read", "contents " * 10),)),
        ),
        system="system prompt",
    )
    step = reply("the file says hello", thinking="reasoning")
    first = last_end(await play(ScriptedProvider([step]), request)).usage
    second = last_end(await play(ScriptedProvider([step]), request)).usage
    assert first == second
    assert first.input_tokens > 0
    assert first.output_tokens > 0


async def test_usage_estimate_grows_with_what_is_sent_and_received() -> None:
    short = last_end(await play(ScriptedProvider([reply("a")]), Request(messages=(Message.user("hi"),)))).usage
    long = last_end(await play(ScriptedProvider([reply("a" * 400)]), REQUEST)).usage
    assert long.input_tokens > short.input_tokens
    assert long.output_tokens > short.output_tokens


# --- registry -----------------------------------------------------------------------------------------------


def test_resolve_scripted_echo_gives_an_echo_provider() -> None:
    provider = resolve("scripted:echo")
    assert isinstance(provider, ScriptedProvider)
    assert provider.info.model_string == "scripted:echo"


def test_resolve_returns_a_provider_instance_unchanged() -> None:
    provider = ScriptedProvider([reply("hi")])
    assert isinstance(provider, Provider)
    assert resolve(provider) is provider


@pytest.mark.parametrize("model", ["gpt-4o", ":gpt-4o", "openai:", ""])
def test_resolve_rejects_a_malformed_model_string(model: str) -> None:
    with pytest.raises(ConfigInvalid, match="provider:model"):
        resolve(model)


def test_resolve_rejects_an_unknown_prefix_and_lists_the_known_ones() -> None:
    with pytest.raises(ConfigInvalid) as caught:
        resolve("nosuch:model")
    assert caught.value.code == "config_invalid"
    assert "'nosuch'" in str(caught.value)
    assert "scripted:" in str(caught.value)


def test_resolve_rejects_a_scripted_name_other_than_echo() -> None:
    with pytest.raises(ConfigInvalid, match="scripted:echo"):
        resolve("scripted:my-script")


@pytest.mark.parametrize("thing", [42, None, Text("scripted:echo")])
def test_resolve_rejects_an_object_that_is_not_a_provider(thing: object) -> None:
    with pytest.raises(ConfigInvalid) as caught:
        resolve(thing)  # type: ignore[arg-type]
    assert type(thing).__name__ in str(caught.value)


async def test_a_run_past_the_scripts_end_stops_with_a_coded_error_that_names_it() -> None:
    """Nothing raises out of the run: the result carries the exhausted script, with a code of its own."""
    from tether import Agent

    agent = Agent(ScriptedProvider([reply("5")]))
    first = await agent.run("What is 2+3?")
    second = await agent.run("And times 4?", history=first.messages)
    assert first.stop_reason == "complete"
    assert second.stop_reason == "error"
    assert isinstance(second.error, ScriptExhausted)
    assert second.error.code == "script_exhausted"
    assert second.detail.startswith("[script_exhausted] ScriptedProvider was called 2 times")
    assert "1 step(s)" in second.detail
