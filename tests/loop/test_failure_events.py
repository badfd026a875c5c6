"""What a run's consumer is told of failures as they happen: the provider's retries (``ProviderRetry``, before each
wait, in order, before the answer's deltas) and the calls that gave no usable answer (``CallFailed``, with what
the loop does next), over real HTTP on 127.0.0.1 where the provider is involved."""

from __future__ import annotations

import asyncio
import json
import time

from tests.helpers import check_order
from tests.providers.test_http_faults import Exchange, Serve, completion, provider, serve, stream_of
from tether import Agent, Limits, tool
from tether.events import CallFailed, ProviderRetry, RunEvent, TextDelta, TurnCompleted, TurnStarted
from tether.providers.http import RetryPolicy
from tether.providers.scripted import ScriptedProvider, empty, reply

__all__ = ["serve"]  # the loopback server's fixture, used by name

RATE_LIMIT = {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}
OVERLOADED = {"error": {"message": "The server is overloaded", "type": "server_error", "code": None}}
KEY = "sk-proj-" + "Q7" * 24
"""A key the run knows (``Agent(secrets=...)``) that a provider quotes back in its error."""


@tool
def noop() -> str:
    """Do nothing."""
    return ""


def kinds(events: list[RunEvent]) -> list[str]:
    return [type(event).__name__ for event in events]


async def test_a_consumer_is_told_of_each_retry_with_its_delay_before_the_wait_and_before_the_answer(
    serve: Serve,
) -> None:
    async def respond(exchange: Exchange) -> None:
        if exchange.seen.number == 1:
            await exchange.json(429, RATE_LIMIT, {"retry-after-ms": "300"})
        elif exchange.seen.number == 2:
            await exchange.json(503, OVERLOADED, {"retry-after-ms": "200"})
        else:
            await exchange.sse(stream_of("Made ", "it"))

    server = await serve(respond)
    agent = Agent(provider(server.base_url, RetryPolicy(max_retries=3)))
    events: list[RunEvent] = []
    served_when_told: list[int] = []
    told_at: list[float] = []
    async for event in agent.stream("hi"):
        events.append(event)
        if isinstance(event, ProviderRetry):
            served_when_told.append(server.count)
            told_at.append(time.monotonic())
        elif isinstance(event, TextDelta) and len(told_at) == 2:
            told_at.append(time.monotonic())

    retries = [event for event in events if isinstance(event, ProviderRetry)]
    assert [(r.attempt, r.code, r.status, r.delay) for r in retries] == [
        (2, "rate_limited", 429, 0.3),
        (3, "provider_unavailable", 503, 0.2),
    ]
    assert "Rate limit reached" in retries[0].message
    assert served_when_told == [1, 2]  # each was told before its wait: the next attempt was not made yet
    assert told_at[1] - told_at[0] >= 0.3
    assert told_at[2] - told_at[1] >= 0.2
    assert kinds(events)[:5] == ["RunStarted", "TurnStarted", "ProviderRetry", "ProviderRetry", "TextDelta"]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Made it"
    check_order(events)
    [record] = events[-1].result.turn_records  # type: ignore[union-attr]
    assert (record.retries, record.retry_wait_ms) == (2, 500.0)


async def test_a_whole_answer_tells_its_retries_too(serve: Serve) -> None:
    async def respond(exchange: Exchange) -> None:
        if exchange.seen.number == 1:
            await exchange.json(429, RATE_LIMIT, {"retry-after-ms": "50"})
        else:
            await exchange.json(200, completion("Whole."))

    server = await serve(respond)
    events = [event async for event in Agent(provider(server.base_url, stream=False)).stream("hi")]
    assert kinds(events) == ["RunStarted", "TurnStarted", "ProviderRetry", "TextDelta", "TurnCompleted", "RunCompleted"]
    retry = events[2]
    assert isinstance(retry, ProviderRetry)
    assert (retry.attempt, retry.code, retry.delay) == (2, "rate_limited", 0.05)
    assert server.count == 2


async def test_a_retry_quoting_a_known_key_is_told_with_the_key_masked(serve: Serve) -> None:
    quoting = {"error": {"message": f"Rate limit reached for key {KEY}", "type": "requests", "code": None}}

    async def respond(exchange: Exchange) -> None:
        if exchange.seen.number == 1:
            await exchange.json(429, quoting, {"retry-after-ms": "0"})
        else:
            await exchange.sse(stream_of("ok"))

    server = await serve(respond)
    agent = Agent(provider(server.base_url), secrets=[KEY])
    events = [event async for event in agent.stream("hi")]
    [retry] = [event for event in events if isinstance(event, ProviderRetry)]
    assert KEY not in retry.message
    assert "Rate limit reached for key" in retry.message


async def test_when_the_retries_run_out_the_call_fails_and_says_that_the_run_stops(serve: Serve) -> None:
    async def respond(exchange: Exchange) -> None:
        await exchange.json(429, RATE_LIMIT, {"retry-after-ms": "0"})

    server = await serve(respond)
    events = [event async for event in Agent(provider(server.base_url, RetryPolicy(max_retries=2))).stream("hi")]
    assert kinds(events) == [
        "RunStarted",
        "TurnStarted",
        "ProviderRetry",
        "ProviderRetry",
        "TurnCompleted",
        "CallFailed",
        "RunCompleted",
    ]
    failed = events[-2]
    assert isinstance(failed, CallFailed)
    assert (failed.turn, failed.attempt, failed.code, failed.then) == (1, 1, "rate_limited", "stop")
    assert "Rate limit reached" in failed.message
    completed = events[-3]
    assert isinstance(completed, TurnCompleted)
    assert completed.status == "failed"
    check_order(events)


async def test_an_unusable_answer_is_retried_with_a_correction_and_the_last_one_stops_the_run() -> None:
    model = ScriptedProvider([empty(), empty()])
    events = [event async for event in Agent(model, limits=Limits(invalid_response_retries=1)).stream("go")]
    failures = [event for event in events if isinstance(event, CallFailed)]
    assert [(f.attempt, f.code, f.then) for f in failures] == [
        (1, "invalid_response", "retry"),
        (2, "invalid_response", "stop"),
    ]
    assert all("empty" in f.message for f in failures)
    assert events[-1].result.stop_reason == "invalid_response"  # type: ignore[union-attr]
    check_order(events)


async def test_a_cancelled_call_did_not_fail_and_has_no_call_failed() -> None:
    stream = Agent(ScriptedProvider([reply("never", delay=30)])).stream("go")
    events: list[RunEvent] = []
    async for event in stream:
        events.append(event)
        if isinstance(event, TurnStarted):
            asyncio.get_running_loop().call_later(0.05, stream.cancel)
    assert "CallFailed" not in kinds(events)
    assert events[-1].result.stop_reason == "cancelled"  # type: ignore[union-attr]


async def test_a_run_without_retries_or_failures_has_no_such_events() -> None:
    events = [event async for event in Agent(ScriptedProvider([reply("fine")])).stream("go")]
    assert kinds(events) == ["RunStarted", "TurnStarted", "TextDelta", "TurnCompleted", "RunCompleted"]


async def test_in_json_action_mode_retries_are_told_though_the_actions_text_is_not_streamed(serve: Serve) -> None:
    action = json.dumps({"type": "final", "text": "Done."})

    async def respond(exchange: Exchange) -> None:
        if exchange.seen.number == 1:
            await exchange.json(503, OVERLOADED, {"retry-after-ms": "0"})
        else:
            await exchange.sse(stream_of(action[:10], action[10:]))

    server = await serve(respond)
    agent = Agent(provider(server.base_url), tools=[noop], tool_mode="json")
    events = [event async for event in agent.stream("hi")]
    assert kinds(events) == ["RunStarted", "TurnStarted", "ProviderRetry", "TextDelta", "TurnCompleted", "RunCompleted"]
    answer = events[3]
    assert isinstance(answer, TextDelta)
    assert answer.text == "Done."  # the action's text, once it is read: never its JSON as it streamed
