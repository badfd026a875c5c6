"""The guards: each limit stops the run with its own StopReason, a result and a valid transcript."""

from __future__ import annotations

import asyncio
import threading

import pytest

from tests.helpers import assert_valid, describe, result_of, run_events
from tether import Agent, Limits, tool
from tether.errors import ConfigInvalid, RateLimited, RequestTimeout, TimeoutExceeded
from tether.loop.context import SUMMARY_REQUEST
from tether.providers.scripted import ScriptedProvider, call, fail, hang, parallel, reply
from tether.usage import NO_COST, Price, Tier, Usage, cost_of


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@tool
def broken() -> str:
    """Always fails."""
    raise RuntimeError("nope")


def endless_calls(n: int) -> list[object]:
    return [call("lookup", {"key": f"k{i}"}) for i in range(n)]


async def test_max_turns_asks_once_more_without_tools_and_returns_that_answer() -> None:
    model = ScriptedProvider([*endless_calls(2), reply("best guess: k0 and k1")])  # type: ignore[list-item]
    events_ = await run_events(Agent(model, tools=[lookup], limits=Limits(max_turns=2)), "find")
    result = result_of(events_)
    assert result.stop_reason == "max_turns"
    assert result.degraded
    assert result.text == "best guess: k0 and k1"
    assert [describe(e) for e in events_][-4:] == [
        "TurnStarted(3 final)",
        "Text('best guess: k0 and k1')",
        "TurnCompleted(3)",
        "RunCompleted(max_turns)",
    ]
    summary_request = model.requests[2]
    assert summary_request.tool_choice == "none"
    assert summary_request.messages[-1].text == SUMMARY_REQUEST
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert result.turns == 2
    assert_valid(result)


async def test_max_turns_with_a_failing_summary_returns_a_fallback_that_says_why() -> None:
    model = ScriptedProvider([*endless_calls(2), fail(RateLimited("busy"))])  # type: ignore[list-item]
    result = await Agent(model, tools=[lookup], limits=Limits(max_turns=2)).run("find")
    assert result.stop_reason == "max_turns"
    assert result.degraded
    assert "turn limit" in result.text
    assert "2 turns" in result.text
    assert_valid(result)


async def test_max_turns_summary_that_calls_tools_anyway_keeps_only_its_text() -> None:
    model = ScriptedProvider([*endless_calls(1), call("lookup", {"key": "again"}, text="Partial: k0")])  # type: ignore[list-item]
    result = await Agent(model, tools=[lookup], limits=Limits(max_turns=1)).run("find")
    assert result.text == "Partial: k0"
    assert result.messages[-1].tool_calls == ()
    assert_valid(result)


async def test_calls_past_the_per_turn_cap_get_an_error_result_and_are_not_run() -> None:
    ran: list[str] = []

    @tool
    def record(key: str) -> str:
        """Record a key."""
        ran.append(key)
        return key

    calls = [call("record", {"key": k}) for k in "abcd"]
    model = ScriptedProvider([parallel(*calls), reply("ok")])
    result = await Agent(model, tools=[record], limits=Limits(max_tool_calls_per_turn=2)).run("go")
    assert ran == ["a", "b"]
    results = result.messages[2].tool_results
    assert [r.is_error for r in results] == [False, False, True, True]
    assert "at most 2 run per turn" in results[2].content
    assert result.stop_reason == "complete"


async def test_excess_tool_calls_stop_runs_the_calls_within_the_cap_then_stops_with_max_tool_calls() -> None:
    ran: list[str] = []

    @tool
    def record(key: str) -> str:
        """Record a key."""
        ran.append(key)
        return key

    calls = [call("record", {"key": k}) for k in "abcd"]
    model = ScriptedProvider([parallel(*calls), reply("a and b recorded"), reply("never asked")])
    limits = Limits(max_tool_calls_per_turn=2, excess_tool_calls="stop")
    events_ = await run_events(Agent(model, tools=[record], limits=limits), "go")
    result = result_of(events_)
    assert ran == ["a", "b"]
    assert result.stop_reason == "max_tool_calls"
    assert result.degraded
    assert "asked for 4 tool calls in one turn, more than the 2 of max_tool_calls_per_turn" in result.detail
    results = result.messages[2].tool_results
    assert [r.is_error for r in results] == [False, False, True, True]
    assert "the run stops" in results[3].content
    assert result.text == "a and b recorded", "the one tools-off call after a step limit gives the answer"
    assert [r.final for r in result.turn_records] == [False, True]
    assert_valid(result)


async def test_excess_tool_calls_stop_does_not_stop_a_turn_within_the_cap() -> None:
    model = ScriptedProvider([parallel(call("lookup", {"key": "a"}), call("lookup", {"key": "b"})), reply("ok")])
    limits = Limits(max_tool_calls_per_turn=2, excess_tool_calls="stop")
    result = await Agent(model, tools=[lookup], limits=limits).run("go")
    assert (result.stop_reason, result.text) == ("complete", "ok")


async def test_max_tool_calls_is_exact_across_turns_and_stops_the_run() -> None:
    ran: list[str] = []

    @tool
    def record(key: str) -> str:
        """Record a key."""
        ran.append(key)
        return key

    model = ScriptedProvider(
        [
            parallel(call("record", {"key": "a"}), call("record", {"key": "b"})),
            parallel(call("record", {"key": "c"}), call("record", {"key": "d"})),
            reply("summary"),
        ]
    )
    result = await Agent(model, tools=[record], limits=Limits(max_tool_calls=3)).run("go")
    assert ran == ["a", "b", "c"]
    assert result.stop_reason == "max_tool_calls"
    assert result.text == "summary"
    assert result.messages[4].tool_results[1].code == "permission_denied"
    assert_valid(result)


async def test_a_run_that_stays_within_max_tool_calls_is_not_stopped_by_it() -> None:
    model = ScriptedProvider([call("lookup", {"key": "a"}), reply("done")])
    result = await Agent(model, tools=[lookup], limits=Limits(max_tool_calls=1)).run("go")
    assert result.stop_reason == "complete"


async def test_consecutive_error_turns_stop_the_run() -> None:
    model = ScriptedProvider([call("broken"), call("broken"), reply("I could not do it")])
    result = await Agent(model, tools=[broken], limits=Limits(max_consecutive_errors=2)).run("go")
    assert result.stop_reason == "consecutive_errors"
    assert result.text == "I could not do it"
    assert "2 turns in a row" in result.detail


async def test_a_successful_call_resets_the_consecutive_error_count() -> None:
    steps = [call("broken"), call("lookup", {"key": "a"}), call("broken"), reply("done")]
    result = await Agent(ScriptedProvider(steps), tools=[broken, lookup], limits=Limits(max_consecutive_errors=2)).run(
        "go"
    )
    assert result.stop_reason == "complete"


async def test_request_timeout_stops_a_provider_that_never_answers() -> None:
    model = ScriptedProvider([hang()])
    result = await Agent(model, limits=Limits(request_timeout=0.05)).run("go")
    assert result.stop_reason == "timeout"
    assert isinstance(result.error, RequestTimeout)
    assert result.error.code == "timeout"
    assert "request_timeout" in result.detail
    assert result.degraded
    assert result.usage.requests == 1
    assert_valid(result)


async def test_step_timeout_stops_a_stream_that_started_but_never_ends() -> None:
    model = ScriptedProvider([hang("Partial answer")])
    result = await Agent(model, limits=Limits(step_timeout=0.05, request_timeout=None)).run("go")
    assert isinstance(result.error, TimeoutExceeded)
    assert result.stop_reason == "timeout"
    assert "step_timeout" in result.detail
    assert result.text == "Partial answer"


async def test_run_timeout_interrupts_a_tool_and_closes_its_call() -> None:
    started = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Never returns."""
        started.set()
        await asyncio.Event().wait()
        return "unreachable"

    model = ScriptedProvider([call("wait_forever")])
    result = await Agent(model, tools=[wait_forever], limits=Limits(run_timeout=0.1, tool_timeout=None)).run("go")
    assert started.is_set()
    assert result.stop_reason == "timeout"
    assert "run_timeout" in result.detail
    (closed,) = result.messages[-1].tool_results
    assert closed.code == "cancelled"
    assert_valid(result)


async def test_async_tool_timeout_cancels_the_coroutine_and_the_loop_continues() -> None:
    cancelled = asyncio.Event()

    @tool(timeout=0.05)
    async def slow() -> str:
        """Too slow."""
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "unreachable"

    result = await Agent(ScriptedProvider([call("slow"), reply("gave up")]), tools=[slow]).run("go")
    (error,) = result.messages[2].tool_results
    assert error.code == "tool_timeout"
    assert "was cancelled" in error.content
    assert cancelled.is_set()
    assert result.text == "gave up"


async def test_sync_tool_timeout_abandons_its_thread_and_says_so() -> None:
    release = threading.Event()

    @tool
    def stuck() -> str:
        """Blocks until released."""
        release.wait(10)
        return "late"

    agent = Agent(ScriptedProvider([call("stuck"), reply("moved on")]), tools=[stuck], limits=Limits(tool_timeout=0.05))
    try:
        result = await agent.run("go")
    finally:
        release.set()
    (error,) = result.messages[2].tool_results
    assert error.code == "tool_timeout"
    assert "abandoned" in error.content
    assert result.text == "moved on"


async def test_budget_stops_the_run_once_spent() -> None:
    usage = Usage(input_tokens=1_000_000)
    model = ScriptedProvider([call("lookup", {"key": "a"}, usage=usage), call("lookup", {"key": "b"}, usage=usage)])
    agent = Agent(model, tools=[lookup], limits=Limits(max_cost_usd=1.5), price=Price(input=1.0, output=1.0))
    result = await agent.run("go")
    assert result.stop_reason == "budget"
    assert result.cost is not None
    assert result.cost.total_usd == pytest.approx(2.0)
    assert result.usage.requests == 2
    assert_valid(result)


async def test_each_request_is_priced_by_its_own_prompt_and_the_budget_stops_after_the_one_that_reached_it() -> None:
    price = Price(input=1.0, output=1.0, tiers=(Tier(above_input_tokens=200_000, input=2.0, output=2.0),))
    prompts = [150_000, 190_000, 250_000, 100_000]
    steps = [call("lookup", {"key": str(n)}, usage=Usage(input_tokens=tokens)) for n, tokens in enumerate(prompts)]
    agent = Agent(
        ScriptedProvider([*steps, reply("done")]), tools=[lookup], limits=Limits(max_cost_usd=0.6), price=price
    )
    result = await agent.run("go")
    # Per request: $0.15, $0.19 (both under the tier), then $0.50 (250k tokens at $2) reaches $0.60.
    # Pricing the summed usage would have stopped a request earlier: 340k tokens at the tier's $2 is $0.68.
    assert result.stop_reason == "budget"
    assert result.usage.requests == 3
    assert result.cost is not None
    assert result.cost.total_usd == pytest.approx(0.15 + 0.19 + 0.50)
    assert result.cost == sum((cost_of(usage, price) for usage in result.turn_usage), start=NO_COST)
    assert result.cost.total_usd != pytest.approx(cost_of(result.usage, price).total_usd)
    assert [record.cost for record in result.turn_records] == [cost_of(u, price) for u in result.turn_usage]
    assert [round(r.cost.total_usd, 2) for r in result.turn_records if r.cost] == [0.15, 0.19, 0.50], "own tiers"
    assert_valid(result)


async def test_a_model_without_a_known_price_has_calls_without_a_cost() -> None:
    agent = Agent(ScriptedProvider([call("lookup", {"key": "a"}), reply("done")]), tools=[lookup])
    result = await agent.run("go")
    assert result.cost is None
    assert [record.cost for record in result.turn_records] == [None, None]


def test_a_budget_without_a_known_price_is_refused_up_front() -> None:
    with pytest.raises(ConfigInvalid, match="price"):
        Agent(ScriptedProvider([], model="mystery"), limits=Limits(max_cost_usd=1.0))


def test_tools_on_a_model_that_cannot_call_them_are_refused_up_front() -> None:
    with pytest.raises(ConfigInvalid, match="cannot call tools"):
        Agent(ScriptedProvider([], supports_tools=False), tools=[lookup], tool_mode="native")


async def test_history_is_trimmed_to_max_history_messages_at_a_user_message() -> None:
    model = ScriptedProvider([call("lookup", {"key": "a"}), reply("b")])
    first = await Agent(model, tools=[lookup]).run("one")
    model2 = ScriptedProvider([reply("c")])
    await Agent(model2, tools=[lookup], limits=Limits(max_history_messages=2)).run("two", history=first.messages)
    sent = model2.requests[0].messages
    assert [m.role for m in sent] == ["user"]
    assert sent[0].text == "two"


async def test_tools_on_a_model_that_cannot_call_them_natively_switch_to_json_actions() -> None:
    model = ScriptedProvider(
        [
            reply('{"type": "tool_call", "name": "lookup", "arguments": {"key": "k"}}'),
            reply('{"type": "final", "text": "v"}'),
        ],
        supports_tools=False,
    )
    result = await Agent(model, tools=[lookup]).run("go")
    assert model.requests[0].tools == ()
    assert "lookup" in (model.requests[0].system or "")
    assert result.text == "v"
    assert result.messages[2].tool_results[0].content == "value of k"


async def test_every_time_limit_can_be_switched_off() -> None:
    from tether.providers.scripted import ScriptedProvider, reply

    limits = Limits(request_timeout=None, step_timeout=None, tool_timeout=None, run_timeout=None)
    result = await Agent(ScriptedProvider([reply("hi")]), limits=limits).run("x")
    assert result.stop_reason == "complete"
    assert result.text == "hi"
