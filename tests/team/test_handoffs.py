"""Handoffs: a run moves from one agent to another, over real HTTP, across provider protocols.

A triage agent on the Anthropic Messages API hands off to billing on OpenAI Chat Completions, which hands off
to refunds back on Anthropic: each model is sent a valid history in its own protocol (the transfer's call with
its result), its agent's own system prompt and tools, and the run's result names who answered.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typing_extensions import TypedDict

from tests.helpers import assert_valid, check_order
from tests.json_model import Model
from tether import Agent, Handoff, HandoffTaken, Limits, RunContext, RunEvent, ToolCallStarted, tool
from tether.errors import ConfigInvalid
from tether.messages import Message, speaker_of
from tether.providers import ScriptedProvider, call, reply
from tether.providers.anthropic import AnthropicProvider
from tether.providers.openai_chat import OpenAIChatProvider
from tether.sessions import SQLiteSessionStore
from tether.testing import result_of


def claude_message(content: list[dict[str, Any]], stop: str) -> dict[str, Any]:
    return {
        "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": content,
        "stop_reason": stop, "usage": {"input_tokens": 10, "output_tokens": 5},
    }  # fmt: skip


def claude(body: dict[str, Any]) -> dict[str, Any]:
    """Triage hands off to billing; refunds (the same server, its own system prompt) answers."""
    if body.get("system", [{}])[0].get("text") == "You handle refunds.":
        return claude_message([{"type": "text", "text": "Refund of 12 EUR issued."}], "end_turn")
    use = {"type": "tool_use", "id": "toolu_01", "name": "transfer_to_billing", "input": {}}
    return claude_message([use], "tool_use")


def gpt(body: dict[str, Any]) -> dict[str, Any]:
    """Billing looks the invoice up, then hands off to refunds."""
    looked_up = any(m["role"] == "tool" and m.get("tool_call_id") == "call_02" for m in body["messages"])
    name, args, call_id = ("transfer_to_refunds", {}, "call_03") if looked_up else ("invoice", {"n": 7}, "call_02")
    function = {"name": name, "arguments": json.dumps(args)}
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": function}],
    }
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
    return {
        "id": "c",
        "model": "gpt-4o-mini",
        "choices": [choice],
        "usage": {"prompt_tokens": 9, "completion_tokens": 4},
    }


@tool
def invoice(n: int) -> str:
    """Look an invoice up."""
    return f"invoice {n}: 12 EUR, paid twice"


def team(anthropic_url: str, openai_url: str) -> Agent[None, str]:
    def on_anthropic() -> AnthropicProvider:
        return AnthropicProvider("claude-sonnet-4-5", base_url=anthropic_url + "/v1", api_key="k", stream=False)

    refunds = Agent(on_anthropic(), name="refunds", system="You handle refunds.")
    billing = Agent(
        OpenAIChatProvider("gpt-4o-mini", base_url=openai_url + "/v1", api_key="k", stream=False),
        name="billing", system="You handle billing.", tools=[invoice], handoffs=[refunds],
    )  # fmt: skip
    return Agent(on_anthropic(), name="triage", system="You route questions.", handoffs=[billing])


async def test_a_run_hands_off_from_anthropic_to_openai_and_back_with_a_valid_history_each(
    serve_model: Callable[[Model], Any],
) -> None:
    anthropic, openai = Model("/v1/messages", claude), Model("/v1/chat/completions", gpt)
    triage = team(await serve_model(anthropic), await serve_model(openai))
    events: list[RunEvent] = [event async for event in triage.stream("I was charged twice.")]
    result = result_of(events)

    assert result.stop_reason == "complete"
    assert result.text == "Refund of 12 EUR issued."
    assert result.last_agent == "refunds"
    assert [(e.from_agent, e.to_agent) for e in events if isinstance(e, HandoffTaken)] == [
        ("triage", "billing"),
        ("billing", "refunds"),
    ]
    check_order(events)
    assert_valid(result)
    assert result.turns == 4, "the legs' turns are one run's"
    assert result.usage.requests == 4 == len(anthropic.bodies) + len(openai.bodies)

    first = anthropic.bodies[0]
    assert [t["name"] for t in first["tools"]] == ["transfer_to_billing"]
    sent = openai.bodies[0]  # billing sees the conversation in OpenAI's words, the transfer answered
    assert sent["messages"][0] == {"role": "system", "content": "You handle billing."}
    assert [m["role"] for m in sent["messages"]] == ["system", "user", "assistant", "tool"]
    assert sent["messages"][2]["tool_calls"][0]["id"] == "toolu_01"
    assert sent["messages"][3] == {"role": "tool", "tool_call_id": "toolu_01", "content": "Transferred to billing."}
    assert sorted(t["function"]["name"] for t in sent["tools"]) == ["invoice", "transfer_to_refunds"]

    last = anthropic.bodies[1]  # refunds, back on Anthropic: every call with its result, in Anthropic's words
    assert last["system"][0]["text"] == "You handle refunds."
    assert "tools" not in last
    uses = [
        b["id"]
        for m in last["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_use"
    ]
    results = [
        b["tool_use_id"]
        for m in last["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    ]
    assert uses == results == ["toolu_01", "call_02", "call_03"]
    assert [speaker_of(m) for m in result.messages if m.role == "assistant"] == [
        "triage",
        "billing",
        "billing",
        "refunds",
    ]


async def test_a_session_records_who_spoke_and_reads_sessions_written_before(
    serve_model: Callable[[Model], Any], tmp_path: Path
) -> None:
    anthropic, openai = Model("/v1/messages", claude), Model("/v1/chat/completions", gpt)
    store = SQLiteSessionStore(tmp_path / "sessions.db")
    triage = team(await serve_model(anthropic), await serve_model(openai))
    triage.store = store
    older = Agent(ScriptedProvider([reply("Hello.")]), store=store)  # a session that names no one
    await older.run("Hi", session="s1")

    result = await triage.run("I was charged twice.", session="s1")

    assert result.text == "Refund of 12 EUR issued."
    stored = await store.load("s1")
    assert [(m.role, speaker_of(m)) for m in stored.messages if m.role == "assistant"] == [
        ("assistant", None),
        ("assistant", "triage"),
        ("assistant", "billing"),
        ("assistant", "billing"),
        ("assistant", "refunds"),
    ]
    assert stored.messages == result.messages
    assert stored.usage.requests == 5, "each leg adds its own usage to the session's"


async def test_a_history_filter_decides_what_the_target_sees(serve_model: Callable[[Model], Any]) -> None:
    openai = Model("/v1/chat/completions", lambda body: gpt_answer("Billing here."))
    billing = Agent(
        OpenAIChatProvider("gpt-4o-mini", base_url=await serve_model(openai) + "/v1", api_key="k", stream=False),
        name="billing",
    )

    def last_question(messages: tuple[Message, ...]) -> list[Message]:
        return [next(m for m in reversed(messages) if m.role == "user")]

    triage = Agent(
        ScriptedProvider([call("transfer_to_billing", {})]),
        name="triage",
        handoffs=[Handoff(billing, history=last_question)],
    )
    result = await triage.run("Why two charges?", history=[Message.user("Hi"), Message.assistant("Hello.")])

    assert result.text == "Billing here."
    assert openai.bodies[0]["messages"] == [{"role": "user", "content": "Why two charges?"}]
    assert result.messages[-2:] == (Message.user("Why two charges?"), result.messages[-1])
    assert_valid(result)


def gpt_answer(text: str) -> dict[str, Any]:
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
    return {
        "id": "c",
        "model": "gpt-4o-mini",
        "choices": [choice],
        "usage": {"prompt_tokens": 9, "completion_tokens": 4},
    }


async def test_a_filter_that_separates_a_call_from_its_result_stops_the_run_before_the_target_is_asked() -> None:
    target = ScriptedProvider([reply("never")])
    billing = Agent(target, name="billing")

    def without_results(messages: tuple[Message, ...]) -> list[Message]:
        return [m for m in messages if m.role != "tool"]

    triage = Agent(
        ScriptedProvider([call("transfer_to_billing", {})]),
        name="triage",
        handoffs=[Handoff(billing, history=without_results)],
    )
    events: list[RunEvent] = [event async for event in triage.stream("Hi")]
    result = result_of(events)

    assert not any(isinstance(event, HandoffTaken) for event in events)
    assert result.stop_reason == "error"
    assert result.degraded
    assert result.text.startswith("The run stopped on an error")
    assert isinstance(result.error, ConfigInvalid)
    assert "transfer_to_billing" in result.detail
    assert target.requests == []
    assert_valid(result)


async def test_the_limits_count_across_agents() -> None:
    billing = Agent(
        ScriptedProvider([call("invoice", {"n": 1}), reply("Summary.")]),
        name="billing",
        tools=[invoice],
        limits=Limits(max_turns=2),
    )
    triage = Agent(ScriptedProvider([call("transfer_to_billing", {})]), name="triage", handoffs=[billing])
    result = await triage.run("Hi")

    assert result.stop_reason == "max_turns"
    assert result.turns == 2, "triage's turn and billing's first: billing's limit counts the run's turns"
    assert result.last_agent == "billing"
    assert result.text == "Summary.", "the summary call after the limit is billing's"


def test_a_target_needs_a_name_and_transfer_names_are_distinct() -> None:
    unnamed = Agent(ScriptedProvider([]))
    with pytest.raises(ConfigInvalid, match="name"):
        Agent(ScriptedProvider([]), handoffs=[unnamed])
    billing = Agent(ScriptedProvider([]), name="billing")
    with pytest.raises(ConfigInvalid, match="transfer_to_billing"):
        Agent(ScriptedProvider([]), handoffs=[billing, Handoff(billing)])
    assert Agent(ScriptedProvider([]), handoffs=[Handoff(billing, name="to_accounts")]).tools.names == ["to_accounts"]


class Refund(TypedDict):
    amount: int


async def test_the_target_answers_with_its_own_output_type() -> None:
    refunds = Agent(
        ScriptedProvider([call("final_result", {"amount": 12})]), name="refunds", system="Refunds.", output_type=Refund
    )
    triage = Agent(ScriptedProvider([call("transfer_to_refunds")]), name="triage", handoffs=[refunds])
    result = await triage.run("Refund me")

    assert result.messages[0] == Message.system("Refunds.")
    assert result.new_messages[0] == Message.user("Refund me"), "the run's own messages start at its prompt"

    assert result.stop_reason == "complete"
    output: Any = result.output  # the target's type, which the first agent's does not say
    assert output == {"amount": 12}
    assert result.last_agent == "refunds"


async def test_a_cancel_reaches_the_agent_the_run_was_handed_to() -> None:
    @tool
    async def wait_for_bank() -> str:
        """Wait for the bank."""
        await asyncio.Event().wait()
        return "never"

    billing = Agent(ScriptedProvider([call("wait_for_bank")]), name="billing", tools=[wait_for_bank])
    triage = Agent(ScriptedProvider([call("transfer_to_billing")]), name="triage", handoffs=[billing])
    stream = triage.stream("Hi")
    events: list[RunEvent] = []
    async for event in stream:
        events.append(event)
        if isinstance(event, ToolCallStarted) and event.call.name == "wait_for_bank":
            stream.cancel()
    result = result_of(events)

    assert result.stop_reason == "cancelled"
    assert result.messages[-1].tool_results[0].code == "cancelled"
    assert result.last_agent == "billing"
    check_order(events)
    assert_valid(result)


async def test_a_cancel_after_the_turn_that_takes_a_transfer_ends_the_run_there() -> None:
    billing = Agent(ScriptedProvider([reply("never")]), name="billing")
    triage = Agent(ScriptedProvider([call("transfer_to_billing")]), name="triage", handoffs=[billing])
    stream = triage.stream("Hi")
    events: list[RunEvent] = []
    async for event in stream:
        events.append(event)
        if isinstance(event, ToolCallStarted):
            stream.cancel(after_turn=True)
    result = result_of(events)

    assert result.stop_reason == "cancelled"
    assert result.last_agent == "triage"
    assert not any(isinstance(event, HandoffTaken) for event in events)
    assert_valid(result)


async def test_the_agent_handed_to_is_in_the_same_run_for_its_tools() -> None:
    seen: list[str] = []

    @tool
    def whoami(ctx: RunContext[None]) -> str:
        """Say which run this is."""
        seen.append(ctx.run_id)
        return "ok"

    billing = Agent(ScriptedProvider([call("whoami"), reply("Done.")]), name="billing", tools=[whoami])
    triage = Agent(ScriptedProvider([call("transfer_to_billing")]), name="triage", handoffs=[billing])
    result = await triage.run("Hi")

    assert seen == [result.run_id]
