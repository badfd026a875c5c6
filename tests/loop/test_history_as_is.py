"""A run of a history exactly as it is: no prompt, no new user message; the history checked before anything is
sent (it must end where the model speaks next: a user message or tool results)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from tests.helpers import assert_valid, result_of
from tether import Agent, tool
from tether.errors import ConfigInvalid
from tether.events import RunStarted
from tether.messages import Message, ToolCall, ToolResult
from tether.providers.scripted import ScriptedProvider, reply
from tether.sessions import MemorySessionStore, Session


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


ASKED = (Message.user("What is 2+3?"),)
CALLED = (
    Message.user("What is 2+3?"),
    Message("assistant", (ToolCall("c1", "add", {"a": 2, "b": 3}),)),
    Message("tool", (ToolResult("c1", "add", "5"),)),
)
ANSWERED = (*ASKED, Message.assistant("5"))


@pytest.mark.parametrize("history", [ASKED, CALLED], ids=["ends-with-user", "ends-with-tool-results"])
async def test_a_run_without_a_prompt_sends_the_history_exactly_as_it_is(history: Sequence[Message]) -> None:
    model = ScriptedProvider([reply("5")])
    events = [event async for event in Agent(model, tools=[add], system="Be brief.").stream(history=history)]
    result = result_of(events)
    assert model.requests[0].messages == tuple(history)
    assert result.messages == (Message.system("Be brief."), *history, Message.assistant("5"))
    assert result.new_messages == (Message.assistant("5"),)
    assert isinstance(events[0], RunStarted)
    assert events[0].prompt == ""
    assert_valid(result)


async def test_an_empty_prompt_is_still_a_user_message_of_its_own() -> None:
    model = ScriptedProvider([reply("5")])
    await Agent(model).run("", history=ASKED)
    assert model.requests[0].messages == (*ASKED, Message.user(""))


def test_a_history_ending_with_the_models_answer_is_refused_by_every_entry() -> None:
    agent = Agent(ScriptedProvider([reply("never")]))
    why = "must end where the model speaks next .* ends with an assistant message"
    with pytest.raises(ConfigInvalid, match=why):
        agent.run_sync(history=ANSWERED)
    with pytest.raises(ConfigInvalid, match=why):
        agent.stream(None, history=ANSWERED)

    async def started() -> None:
        agent.start(history=ANSWERED)

    with pytest.raises(ConfigInvalid, match=why):
        asyncio.run(started())
    with pytest.raises(ConfigInvalid, match=why):
        asyncio.run(agent.run(history=ANSWERED))


def test_a_run_with_neither_a_prompt_nor_a_history_is_refused() -> None:
    agent = Agent(ScriptedProvider([reply("never")]))
    with pytest.raises(ConfigInvalid, match="a run needs a prompt, or a history") as caught:
        agent.run_sync()
    assert caught.value.code == "config_invalid"
    with pytest.raises(ConfigInvalid, match="the history is empty"):
        agent.run_sync(history=[Message.system("Only a system prompt.")])


async def test_a_stored_session_is_run_as_it_is_without_a_prompt() -> None:
    store = MemorySessionStore()
    await store.save(Session.new(id="s1").updated(messages=ASKED))
    model = ScriptedProvider([reply("5")])
    result = await Agent(model, store=store).run(session="s1")
    assert model.requests[0].messages == ASKED
    assert (await store.load("s1")).messages == (*ASKED, Message.assistant("5"))
    assert result.text == "5"


async def test_a_stored_session_that_ends_with_an_answer_is_refused_without_a_prompt() -> None:
    store = MemorySessionStore()
    await store.save(Session.new(id="s1").updated(messages=ANSWERED))
    model = ScriptedProvider([reply("never")])
    with pytest.raises(ConfigInvalid, match="ends with an assistant message"):
        await Agent(model, store=store).run(session="s1")
    assert model.requests == []
    assert (await store.load("s1")).messages == ANSWERED
