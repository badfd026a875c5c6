"""Scripted runs the protocol tests stream through their translators: each kind of event a run can emit."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from tether import Agent
from tether.errors import AuthFailed
from tether.events import RunCompleted, RunEvent, RunResult, RunStarted, TurnStarted
from tether.limits import Limits
from tether.providers.scripted import ScriptedProvider, call, empty, fail, hang, parallel, reply
from tether.tools import tool


class Invoice(BaseModel):
    number: str
    total: float


@tool
def lookup(number: str) -> str:
    """Look an invoice up."""
    return f"invoice {number}: 12.5 EUR"


@tool
def refund(number: str, api_key: str) -> str:
    """Refund an invoice (it always fails here)."""
    raise RuntimeError(f"the refund of {number} was refused")


THINKING = "The user wants invoice A1; I look it up."
SAID = "Let me check."


def typed_agent() -> Agent[Any, Any]:
    """Thinking and text, two tool calls in one turn (one fails), then a typed output through its tool."""
    model = ScriptedProvider(
        [
            parallel(
                call("lookup", {"number": "A1"}),
                call("refund", {"number": "A1", "api_key": "sk-live-0123456789abcdef"}),
                thinking=THINKING,
                text=SAID,
                chunk_size=4,
            ),
            call("final_result", {"number": "A1", "total": 12.5}),
        ]
    )
    return Agent(model, tools=[lookup, refund], output_type=Invoice)


def text_agent(answer: str = "Hello there.") -> Agent[Any, Any]:
    return Agent(ScriptedProvider([reply(answer, chunk_size=3)]))


def failing_agent() -> Agent[Any, Any]:
    """The provider refuses the key: the run stops with an error (``auth_failed``) after some text."""
    return Agent(ScriptedProvider([fail(AuthFailed("the key was refused", status=401), after_text="Hm")]))


def retried_agent() -> Agent[Any, Any]:
    """An empty answer is retried (``CallFailed`` with ``then="retry"``), then the model answers."""
    return Agent(ScriptedProvider([empty(), reply("Second try.")]))


def limited_agent() -> Agent[Any, Any]:
    """A tool call at the only turn allowed: the run is degraded (``max_turns``) with a fallback answer."""
    model = ScriptedProvider([call("lookup", {"number": "A1"}), reply("Summary: A1 costs 12.5 EUR.")])
    return Agent(model, tools=[lookup], limits=Limits(max_turns=1))


def team_agent() -> Agent[Any, Any]:
    """An agent that runs another as a tool: the sub-agent thinks, calls a tool and answers."""
    helper = Agent(
        ScriptedProvider([call("lookup", {"number": "B2"}, thinking="Look B2 up."), reply("B2 is 12.5 EUR.")]),
        tools=[lookup],
        name="helper",
    )
    model = ScriptedProvider([call("ask_helper", {"input": "What is B2?"}), reply("The helper says 12.5 EUR.")])
    return Agent(model, tools=[helper.as_tool(name="ask_helper", description="Ask the helper.")])


def nested_team_agent() -> Agent[Any, Any]:
    """Three levels: the run's agent asks a manager, who asks a clerk (their models number calls alike)."""
    clerk = Agent(ScriptedProvider([reply("C3 is paid.")]), name="clerk")
    manager = Agent(
        ScriptedProvider([call("ask_clerk", {"input": "C3?"}), reply("The clerk says C3 is paid.")]),
        tools=[clerk.as_tool(name="ask_clerk")],
        name="manager",
    )
    model = ScriptedProvider([call("ask_manager", {"input": "C3?"}), reply("C3 is paid.")])
    return Agent(model, tools=[manager.as_tool(name="ask_manager")])


def handoff_agent() -> Agent[Any, Any]:
    """A triage agent that hands the run to billing, which answers."""
    billing = Agent(ScriptedProvider([reply("Billing here: 12.5 EUR.")]), name="billing")
    model = ScriptedProvider([call("transfer_to_billing", {}, text="Passing you on.")])
    return Agent(model, name="triage", handoffs=[billing])


async def events_of(agent: Agent[Any, Any], prompt: Any = "Total of A1?", **options: Any) -> list[RunEvent]:
    """Every event of a run of ``agent``, ``RunCompleted`` last."""
    return [event async for event in agent.stream(prompt, **options)]


def result_of(events: list[RunEvent]) -> RunResult[Any]:
    """The result a run's events end with."""
    last = events[-1]
    assert isinstance(last, RunCompleted)
    return last.result


def run_id_of(events: list[RunEvent]) -> str:
    first = events[0]
    assert isinstance(first, RunStarted)
    return first.run_id


async def cancelled_events() -> list[RunEvent]:
    """A run cancelled while its model is writing: it ends ``cancelled``."""
    agent = Agent(ScriptedProvider([hang("Partial answer")]))
    stream = agent.stream("Wait forever")
    seen: list[RunEvent] = []
    async for event in stream:
        seen.append(event)
        if type(event) is TurnStarted:
            stream.cancel()
    assert type(seen[-1]) is RunCompleted
    return seen
