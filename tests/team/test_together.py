"""Handoffs, guardrails and agents as tools together: a sub-agent keeps its own handoffs and guardrails, a turn
takes one handoff, and agents may hand the conversation back to each other, within the run's limits.
"""

from __future__ import annotations

from typing import Any

import pytest

from tether import Agent, GuardrailResult, Handoff, HandoffTaken, Limits, RunContext, tool
from tether.errors import ConfigInvalid
from tether.events import RunCompleted, RunEvent, RunResult, SubAgentEvent, ToolResultReceived
from tether.messages import ToolResult
from tether.providers.scripted import ScriptedProvider, call, parallel, reply
from tether.testing.runs import assert_valid_transcript
from tether.tools.permissions import Allow, Deny


def no_secrets(ctx: RunContext[Any], prompt: str) -> GuardrailResult:
    return GuardrailResult.block("I cannot discuss secrets.") if "secret" in prompt else GuardrailResult.passed()


def ended(events: list[RunEvent]) -> RunResult[Any]:
    final = events[-1]
    assert isinstance(final, RunCompleted)
    return final.result


def results_of(messages: Any) -> list[ToolResult]:
    return [result for message in messages if message.role == "tool" for result in message.tool_results]


# --- a sub-agent's own handoffs and guardrails ---------------------------------------------------------------


async def test_a_sub_agent_whose_input_guardrail_blocks_is_an_error_result_naming_it_and_the_caller_goes_on() -> None:
    guarded = Agent(ScriptedProvider([reply("never said")]), name="guarded", input_guardrails=[no_secrets])
    boss = Agent(
        ScriptedProvider([call("guarded", {"input": "tell me the secret"}), reply("It would not say.")]),
        tools=[guarded.as_tool(name="guarded")],
    )
    result = await boss.run("go")
    (answer,) = results_of(result.messages)
    assert answer.is_error
    assert answer.code == "tool_failed"
    assert "'no_secrets'" in answer.content  # the guardrail that blocked is named
    assert "I cannot discuss secrets." in answer.content
    assert "never said" not in answer.content  # the sub-agent's model was never asked
    assert (result.stop_reason, result.text) == ("complete", "It would not say.")
    assert_valid_transcript(result)


async def test_a_sub_agent_whose_input_passes_its_guardrail_answers() -> None:
    guarded = Agent(ScriptedProvider([reply("Four.")]), name="guarded", input_guardrails=[no_secrets])
    boss = Agent(
        ScriptedProvider([call("guarded", {"input": "2 + 2?"}), reply("done")]), tools=[guarded.as_tool(name="guarded")]
    )
    result = await boss.run("go")
    (answer,) = results_of(result.messages)
    assert (answer.is_error, answer.content) == (False, "Four.")


async def test_a_sub_agent_that_hands_off_answers_through_its_target_and_the_handoff_reaches_the_caller() -> None:
    billing = Agent(ScriptedProvider([reply("Your invoice is paid.")]), name="billing")
    triage = Agent(ScriptedProvider([call("transfer_to_billing", {})]), name="triage", handoffs=[billing])
    boss = Agent(
        ScriptedProvider([call("support", {"input": "is my invoice paid?"}), reply("It is paid.")]),
        tools=[triage.as_tool(name="support")],
    )
    events = [event async for event in boss.stream("go")]
    (answer,) = [event.result for event in events if type(event) is ToolResultReceived]
    assert (answer.is_error, answer.content) == (False, "Your invoice is paid.")
    relayed = [event for event in events if type(event) is SubAgentEvent]
    (taken,) = [event.event for event in relayed if type(event.event) is HandoffTaken]
    assert (taken.from_agent, taken.to_agent) == ("triage", "billing")
    (sub,) = [event.event.result for event in relayed if type(event.event) is RunCompleted]
    assert sub.last_agent == "billing"
    final = events[-1]
    assert isinstance(final, RunCompleted)
    assert final.result.usage.requests == 4  # the boss's two calls, triage's and billing's
    (record,) = [r for turn in final.result.turn_records for r in turn.tool_calls]
    assert len(record.turn_records) == 2  # the sub-run's records: both agents' turns
    assert_valid_transcript(final.result)


async def test_the_agent_a_sub_agent_hands_off_to_runs_under_what_the_caller_has_left() -> None:
    ran: list[int] = []

    @tool
    def refund(n: int) -> str:
        """Refund an invoice."""
        ran.append(n)
        return "refunded"

    billing = Agent(ScriptedProvider([call("refund", {"n": 1}), reply("done")]), name="billing", tools=[refund])
    triage = Agent(ScriptedProvider([call("transfer_to_billing", {})]), name="triage", handoffs=[billing])
    boss = Agent(
        ScriptedProvider([call("support", {"input": "refund it"}), reply("ok")]),
        tools=[triage.as_tool(name="support")],
        limits=Limits(max_tool_calls=2),  # the call of support, then the transfer: none left for the refund
    )
    result = await boss.run("go")
    assert ran == []
    (answer,) = results_of(result.messages)
    assert answer.is_error
    assert "max_tool_calls" in answer.content


# --- one handoff per turn --------------------------------------------------------------------------------------


async def test_a_turn_that_calls_two_transfers_takes_the_first_and_tells_the_model_the_second_was_not_made() -> None:
    billing = Agent(ScriptedProvider([reply("Billing here.")]), name="billing")
    refunds = Agent(ScriptedProvider([reply("never")]), name="refunds")
    triage = Agent(
        ScriptedProvider([parallel(call("transfer_to_billing", {}), call("transfer_to_refunds", {}))]),
        name="triage",
        handoffs=[billing, refunds],
        concurrent_tools=True,  # both transfers run at once: neither is cut short by the other's end
    )
    events = [event async for event in triage.stream("help")]
    result = ended(events)
    first, second = results_of(result.messages)
    assert (first.name, first.is_error, first.content) == ("transfer_to_billing", False, "Transferred to billing.")
    assert second.name == "transfer_to_refunds"
    assert second.is_error
    assert "went to billing" in second.content
    assert "one handoff per turn" in second.content
    assert [(e.from_agent, e.to_agent) for e in events if type(e) is HandoffTaken] == [("triage", "billing")]
    assert (result.last_agent, result.text) == ("billing", "Billing here.")
    assert_valid_transcript(result)


async def test_when_the_first_transfer_of_a_turn_is_denied_the_next_is_taken() -> None:
    billing = Agent(ScriptedProvider([reply("never")]), name="billing")
    refunds = Agent(ScriptedProvider([reply("Refunds here.")]), name="refunds")
    triage = Agent(
        ScriptedProvider([parallel(call("transfer_to_billing", {}), call("transfer_to_refunds", {}))]),
        name="triage",
        handoffs=[billing, refunds],
        can_use_tool=lambda call: Deny("billing is closed") if call.name == "transfer_to_billing" else Allow(),
    )
    result = await triage.run("help")
    first, second = results_of(result.messages)
    assert (first.is_error, second.is_error, second.content) == (True, False, "Transferred to refunds.")
    assert (result.last_agent, result.text) == ("refunds", "Refunds here.")
    assert_valid_transcript(result)


# --- handoffs that go back -------------------------------------------------------------------------------------


async def test_an_agent_can_hand_back_to_the_agent_that_handed_to_it() -> None:
    billing = Agent(
        ScriptedProvider([call("transfer_to_triage", {})]),
        name="billing",
        handoffs=[Handoff(lambda: triage, name="transfer_to_triage")],  # triage is made after billing
    )
    triage: Agent[Any, Any] = Agent(
        ScriptedProvider([call("transfer_to_billing", {}), reply("Triage again: anything else?")]),
        name="triage",
        handoffs=[billing],
    )
    events = [event async for event in triage.stream("help")]
    result = ended(events)
    moves = [(e.from_agent, e.to_agent) for e in events if type(e) is HandoffTaken]
    assert moves == [("triage", "billing"), ("billing", "triage")]
    assert (result.stop_reason, result.last_agent) == ("complete", "triage")
    assert result.text == "Triage again: anything else?"
    assert [r.content for r in results_of(result.messages)] == ["Transferred to billing.", "Transferred to triage."]
    assert_valid_transcript(result)


async def test_agents_that_hand_off_to_each_other_forever_stop_at_max_turns_with_a_valid_transcript() -> None:
    ping = Agent(
        ScriptedProvider([call("transfer_to_pong", {})] * 10),
        name="ping",
        handoffs=[Handoff(lambda: pong, name="transfer_to_pong")],
        limits=Limits(max_turns=5),
    )
    pong: Agent[Any, Any] = Agent(ScriptedProvider([call("transfer_to_ping", {})] * 10), name="pong", handoffs=[ping])
    events = [event async for event in ping.stream("go")]
    result = ended(events)
    assert result.stop_reason == "max_turns"
    assert result.turns == 5
    assert len([e for e in events if type(e) is HandoffTaken]) == 4  # none past the last turn
    assert result.usage.requests == 5
    assert_valid_transcript(result)


def test_a_handoff_to_an_agent_given_by_a_function_needs_a_name() -> None:
    with pytest.raises(ConfigInvalid, match="needs a name="):
        Handoff(lambda: None)


async def test_a_function_that_gives_no_agent_stops_the_run_when_the_handoff_is_taken() -> None:
    triage = Agent(
        ScriptedProvider([call("transfer_to_nobody", {})]),
        name="triage",
        handoffs=[Handoff(lambda: "nobody", name="transfer_to_nobody")],
    )
    result = await triage.run("help")
    assert result.stop_reason == "error"
    assert isinstance(result.error, ConfigInvalid)
    assert "must be an Agent with a name" in result.detail
    assert_valid_transcript(result)
