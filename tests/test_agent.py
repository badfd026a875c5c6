"""Agent: continuation, history from JSON, model strings, run/run_sync/stream/start."""

from __future__ import annotations

import pytest

from tests.helpers import assert_valid, describe
from tether import Agent, Message, tool
from tether.errors import ConfigInvalid, SessionInvalid
from tether.events import RunEvent
from tether.messages import Text, ToolCall, ToolResult, messages_from_json, messages_to_json
from tether.providers.base import ServedProvider
from tether.providers.scripted import ScriptedProvider, call, reply


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def test_continuation_sends_the_previous_turns_and_the_system_prompt_once() -> None:
    model = ScriptedProvider([call("add", {"a": 2, "b": 3}), reply("5"), reply("20")])
    agent = Agent(model, tools=[add], system="Be brief.")
    first = await agent.run("2+3?")
    follow_up = await agent.run("And times 4?", history=first.messages)
    sent = model.requests[2]
    assert sent.system == "Be brief."
    assert all(m.role != "system" for m in sent.messages)
    assert [m.role for m in follow_up.messages].count("system") == 1
    assert [m.text for m in sent.messages if m.role == "user"] == ["2+3?", "And times 4?"]
    assert sent.messages[2].tool_results[0].content == "5", "tool results are preserved"
    assert follow_up.text == "20"
    assert follow_up.new_messages[0].text == "And times 4?"
    assert [m.role for m in follow_up.new_messages] == ["user", "assistant"]


async def test_continuation_from_a_history_loaded_from_json() -> None:
    first = await Agent(ScriptedProvider([call("add", {"a": 1, "b": 1}), reply("2")]), tools=[add]).run("1+1?")
    restored = messages_from_json(messages_to_json(first.messages))
    assert restored == list(first.messages)
    model = ScriptedProvider([reply("yes")])
    result = await Agent(model, tools=[add]).run("Sure?", history=restored)
    assert model.requests[0].messages[:-1] == first.messages
    assert result.text == "yes"
    assert_valid(result)


async def test_the_agents_system_prompt_replaces_the_one_stored_in_the_history() -> None:
    history = [Message.system("Old rules."), Message.user("hi"), Message.assistant("hello")]
    model = ScriptedProvider([reply("ok")])
    result = await Agent(model, system="New rules.").run("again", history=history)
    assert model.requests[0].system == "New rules."
    assert result.messages[0] == Message.system("New rules.")
    assert [m.role for m in result.messages].count("system") == 1


async def test_a_stored_system_prompt_is_kept_when_the_agent_has_none() -> None:
    history = [Message.system("Stored rules."), Message.user("hi"), Message.assistant("hello")]
    model = ScriptedProvider([reply("ok")])
    await Agent(model).run("again", history=history)
    assert model.requests[0].system == "Stored rules."


async def test_a_history_ending_with_unanswered_calls_is_closed_before_continuing() -> None:
    history = [Message.user("go"), Message("assistant", (ToolCall("c1", "add", {"a": 1, "b": 2}),))]
    result = await Agent(ScriptedProvider([reply("recovered")]), tools=[add]).run("again", history=history)
    closed = result.messages[2].tool_results[0]
    assert closed.call_id == "c1"
    assert closed.code == "cancelled"
    assert_valid(result)


def test_an_invalid_history_is_refused_with_session_invalid() -> None:
    history = [Message.user("go"), Message("tool", (ToolResult("nope", "add", "3"),))]
    with pytest.raises(SessionInvalid, match="unknown or answered call"):
        Agent(ScriptedProvider([reply("x")])).stream("again", history=history)


async def test_run_is_stream_consumed_to_its_end() -> None:
    def script() -> ScriptedProvider:
        return ScriptedProvider([call("add", {"a": 2, "b": 3}), reply("5")])

    seen: list[RunEvent] = []
    result = await Agent(script(), tools=[add], on_event=seen.append).run("2+3?")
    streamed = [e async for e in Agent(script(), tools=[add]).stream("2+3?")]
    assert [describe(e) for e in seen] == [describe(e) for e in streamed]
    assert result.text == "5"


async def test_run_sync_inside_a_running_loop_says_to_await_run() -> None:
    with pytest.raises(RuntimeError, match=r"await agent\.run"):
        Agent(ScriptedProvider([reply("x")])).run_sync("go")


async def test_a_model_string_names_a_provider() -> None:
    result = await Agent("scripted:echo").run("say this back")
    assert result.text == "say this back"


def test_an_unknown_provider_in_a_model_string_is_a_config_error() -> None:
    with pytest.raises(ConfigInvalid, match="unknown provider 'nosuch'"):
        Agent("nosuch:model")


async def test_plain_functions_are_accepted_as_tools() -> None:
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    model = ScriptedProvider([call("shout", {"text": "hi"}), reply("HI")])
    result = await Agent(model, tools=[shout]).run("go")
    assert result.messages[2].tool_results[0].content == "HI"
    assert model.requests[0].tools[0].description == "Upper-case the text."


async def test_each_run_of_one_agent_is_independent() -> None:
    model = ScriptedProvider([reply("one"), reply("two")])
    agent = Agent(model)
    first, second = await agent.run("a"), await agent.run("b")
    assert [m.text for m in second.messages] == ["b", "two"]
    assert first.run_id != second.run_id


async def test_tool_definitions_reach_the_provider_with_their_schema() -> None:
    model = ScriptedProvider([reply("ok")])
    await Agent(model, tools=[add]).run("go")
    (definition,) = model.requests[0].tools
    assert definition.name == "add"
    assert definition.description == "Add two integers."
    assert definition.parameters["required"] == ["a", "b"]
    assert model.requests[0].messages == (Message("user", (Text("go"),)),)


class Served(ScriptedProvider):
    """A provider of another make that serves its model over the network: its key and its server are its own."""

    def credentials(self) -> tuple[str, ...]:
        return ("sk-served-0123456789",)

    @property
    def server(self) -> tuple[str | None, int | None]:
        return "models.example.net", 8443


async def test_a_served_providers_credentials_are_masked_and_its_server_is_the_runs() -> None:
    @tool
    def leak() -> str:
        """Return what a careless tool might."""
        return "the key is sk-served-0123456789"

    provider = Served([call("leak", {}), reply("done")])
    assert isinstance(provider, ServedProvider)
    agent = Agent(provider, tools=[leak])
    result = await agent.run("go")
    (tool_message,) = [m for m in result.messages if m.role == "tool"]
    assert tool_message.parts[0].content == "the key is ***"  # type: ignore[union-attr]
    assert agent._spec.server == ("models.example.net", 8443)


async def test_a_provider_with_only_info_and_stream_is_a_provider_with_no_credentials_and_no_server() -> None:
    provider = ScriptedProvider([reply("hi")])
    assert not isinstance(provider, ServedProvider)
    agent = Agent(provider)
    assert (await agent.run("go")).text == "hi"
    assert agent._spec.server == (None, None)
