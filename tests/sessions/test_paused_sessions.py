"""A session whose run paused for decisions: kept paused in every store, and resumed from it (``loop/pausing.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import assert_valid
from tests.loop import paused_agent
from tests.loop.paused_agent import TURN
from tether import Agent, Approve, DecisionInvalid, ExternalResult, GuardrailResult, Reject, RunEvent, StopReason
from tether.providers.scripted import ScriptedProvider, Step, reply
from tether.sessions import SessionStore
from tether.testing.store_conformance import Stores
from tether.usage import Usage


def in_session(store: SessionStore, script: list[Step]) -> Agent[None, str]:
    tools = [paused_agent.delete, paused_agent.page_title, paused_agent.add]
    return Agent(ScriptedProvider(script), tools=tools, store=store)


@pytest.fixture(autouse=True)
def _ran() -> None:
    paused_agent.RAN.clear()


async def test_a_paused_session_is_kept_paused_and_resumed_from_the_store(stores: Stores) -> None:
    first = in_session(stores.open(), [TURN])
    paused = await first.run("Clean up.", session="s1")
    assert paused.stop_reason is StopReason.PAUSED
    saved = await stores.open().load("s1")
    assert saved.messages[-1].tool_calls[-1].id == "c3"  # the paused turn's calls are stored open

    again = in_session(stores.open(), [reply("never asked")])
    seen: list[RunEvent] = []
    still = await again.run("Anything new?", session="s1", on_event=seen.append)
    assert [type(event).__name__ for event in seen] == ["RunStarted", "RunCompleted"]
    assert still.stop_reason is StopReason.PAUSED
    assert [p.id for p in still.pending] == ["c1", "c2"]
    assert still.state is not None
    assert still.state.run_id == paused.run_id
    assert "resume it" in still.detail
    model = again.provider
    assert isinstance(model, ScriptedProvider)
    assert model.requests == []  # no model call on a paused session

    resumer = in_session(stores.open(), [reply("Done.")])
    result = await resumer.resume(None, {"c1": Approve(), "c2": ExternalResult("Example Domain")}, session="s1")
    assert result.stop_reason is StopReason.COMPLETE
    assert result.run_id == paused.run_id
    assert paused_agent.RAN == ["add 2 3", "delete old.txt"]
    stored = await stores.open().load("s1")
    assert stored.messages == result.messages
    assert all("tether_paused" not in (m.provider_data or {}) for m in stored.messages)
    assert_valid(result)

    with pytest.raises(DecisionInvalid, match="not paused"):  # the pause was settled: never twice
        await in_session(stores.open(), [reply("x")]).resume(None, {"c1": Approve()}, session="s1")
    later = await in_session(stores.open(), [reply("Later.")]).run("And now?", session="s1")
    assert later.text == "Later."


async def test_a_paused_session_s_usage_is_counted_once(stores: Stores) -> None:
    script = [TURN]
    first = in_session(stores.open(), script)
    paused = await first.run("Clean up.", session="s2")
    resumed = await in_session(stores.open(), [reply("Done.", usage=Usage(output_tokens=7))]).resume(
        paused.state, {"c1": Reject("no"), "c2": ExternalResult("x")}, session="s2"
    )
    stored = await stores.open().load("s2")
    assert stored.usage == resumed.usage
    assert resumed.usage.output_tokens == paused.usage.output_tokens + 7


async def test_a_state_that_is_not_the_session_s_pause_is_refused(stores: Stores) -> None:
    await in_session(stores.open(), [TURN]).run("one", session="a")
    other = await in_session(stores.open(), [TURN]).run("two", session="b")
    with pytest.raises(DecisionInvalid, match="not the paused run"):
        await in_session(stores.open(), [reply("x")]).resume(
            other.state, {"c1": Approve(), "c2": ExternalResult("x")}, session="a"
        )
    assert paused_agent.RAN == ["add 2 3", "add 2 3"]


async def test_a_paused_session_of_an_agent_with_guardrails_is_resumed_through_them(stores: Stores) -> None:
    def withheld(ctx: Any, answer: str) -> GuardrailResult:
        return GuardrailResult.block("withheld") if "secret" in answer else GuardrailResult.passed()

    def guarded(script: list[Step]) -> Agent[None, str]:
        tools = [paused_agent.delete, paused_agent.page_title, paused_agent.add]
        return Agent(ScriptedProvider(script), tools=tools, store=stores.open(), output_guardrails=[withheld])

    paused = await guarded([TURN]).run("Clean up.", session="g")
    assert paused.stop_reason is StopReason.PAUSED
    result = await guarded([reply("Done.")]).resume(None, {"c1": Approve(), "c2": ExternalResult("x")}, session="g")
    assert result.stop_reason is StopReason.COMPLETE
    assert result.run_id == paused.run_id
    assert paused_agent.RAN == ["add 2 3", "delete old.txt"]
    stored = await stores.open().load("g")
    assert stored.messages == result.messages
    assert_valid(result)
