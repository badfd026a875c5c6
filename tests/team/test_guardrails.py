"""Guardrails: the input checked before (or alongside) the first model call, the answer checked before it is
given; each passes, blocks (the stop reason ``guardrail``) or, for an answer, asks the model again.

The model is an OpenAI Chat Completions server on loopback that records every request, so "no request was made"
and "the retry's message was sent" are read off the wire.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web
from typing_extensions import TypedDict

from tests.helpers import assert_valid, check_order
from tests.providers.conftest import SHUTDOWN_SECONDS
from tether import (
    Agent,
    Guardrail,
    GuardrailBlocked,
    GuardrailResult,
    InvalidOutput,
    Limits,
    RunContext,
    RunEvent,
    agent_guardrail,
    tool,
)
from tether.providers import ScriptedProvider, call, reply
from tether.providers.openai_chat import OpenAIChatProvider
from tether.testing import result_of


class Server:
    """A Chat Completions server answering with ``answers`` in order (a text, or a tool call's name), keeping the
    bodies; ``hold`` keeps every answer back until it is done, ``answered`` is set once one was sent."""

    def __init__(self, *answers: str, hold: asyncio.Future[None] | None = None) -> None:
        self.answers = list(answers)
        self.bodies: list[dict[str, Any]] = []
        self.hold = hold
        self.answered = asyncio.Event()
        self.received = asyncio.Event()

    async def handle(self, request: web.Request) -> web.Response:
        self.bodies.append(await request.json())
        self.received.set()
        if self.hold is not None:
            await self.hold
        answer = self.answers.pop(0)
        message: dict[str, Any] = {"role": "assistant", "content": answer}
        finish = "stop"
        if answer.startswith("call:"):
            function = {"name": answer[5:], "arguments": "{}"}
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": function}],
            }
            finish = "tool_calls"
        body = {
            "id": "c",
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        }
        response = web.json_response({**body, "usage": {"prompt_tokens": 9, "completion_tokens": 4}})
        self.answered.set()
        return response


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Server], Any]]:
    runners: list[web.AppRunner] = []

    async def start(server: Server) -> OpenAIChatProvider:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", server.handle)
        runner = web.AppRunner(app, shutdown_timeout=SHUTDOWN_SECONDS)  # a held answer is not waited for
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        runners.append(runner)
        url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
        return OpenAIChatProvider("gpt-4o-mini", base_url=url, api_key="k", stream=False)

    yield start
    for runner in runners:
        await runner.cleanup()


def no_passwords(ctx: RunContext[Any], prompt: str) -> GuardrailResult:
    """Synchronous: run on a worker thread."""
    return GuardrailResult.block("I cannot take passwords.") if "password" in prompt else GuardrailResult.passed()


async def test_an_input_guardrail_that_blocks_stops_the_run_before_any_request(serve: Callable[..., Any]) -> None:
    server = Server("Hello.")
    agent = Agent(await serve(server), input_guardrails=[no_passwords])
    events: list[RunEvent] = [event async for event in agent.stream("my password is hunter22")]
    result = result_of(events)

    assert result.stop_reason == "guardrail"
    assert result.text == "I cannot take passwords."
    assert result.detail == "the input guardrail 'no_passwords' blocked the run"
    assert isinstance(result.error, GuardrailBlocked)
    assert result.error.guardrail == "no_passwords"
    assert server.bodies == [], "the model was never asked"
    assert result.usage.requests == 0
    assert [type(e).__name__ for e in events] == ["RunStarted", "RunCompleted"]
    assert_valid(result)

    passed = await agent.run("hello")
    assert passed.stop_reason == "complete"
    assert passed.text == "Hello."


async def test_an_input_guardrail_alongside_that_blocks_after_the_answer_keeps_its_tools_from_running(
    serve: Callable[..., Any],
) -> None:
    ran: list[str] = []

    @tool
    def refund() -> str:
        """Refund the customer."""
        ran.append("refund")
        return "refunded"

    server = Server("call:refund", "Refunded.")

    async def slow_check(ctx: RunContext[Any], prompt: str) -> GuardrailResult:
        await server.answered.wait()  # the model has answered before the guardrail has its word
        return GuardrailResult.block("Not for refunds.")

    agent = Agent(await serve(server), tools=[refund], input_guardrails=[Guardrail(slow_check, run_alongside=True)])
    events: list[RunEvent] = [event async for event in agent.stream("refund me")]
    result = result_of(events)

    assert result.stop_reason == "guardrail"
    assert result.text == "Not for refunds."
    assert ran == [], "no tool of the first turn ran"
    assert len(server.bodies) == 1
    assert [m.role for m in result.messages] == ["user"], "the answer is left out"
    assert [type(e).__name__ for e in events] == ["RunStarted", "TurnStarted", "TurnCompleted", "RunCompleted"]
    assert_valid(result)


async def test_an_input_guardrail_alongside_that_blocks_while_the_call_streams_cancels_the_call(
    serve: Callable[..., Any],
) -> None:
    never: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    server = Server("Hello.", hold=never)
    asked = asyncio.Event()

    async def quick_check(ctx: RunContext[Any], prompt: str) -> GuardrailResult:
        await server.received.wait()  # the request has reached the server, which holds its answer back
        asked.set()
        return GuardrailResult.block("No.")

    agent = Agent(await serve(server), input_guardrails=[Guardrail(quick_check, run_alongside=True)])
    result = await asyncio.wait_for(agent.run("hi"), 60)

    assert asked.is_set()
    assert result.stop_reason == "guardrail"
    assert result.text == "No."
    assert [m.role for m in result.messages] == ["user"]
    assert_valid(result)


def no_secrets(ctx: RunContext[Any], answer: str) -> GuardrailResult:
    return GuardrailResult.block("The answer was withheld.") if "secret" in answer else GuardrailResult.passed()


async def test_an_output_guardrail_that_blocks_replaces_the_answer_and_sends_nothing_more(
    serve: Callable[..., Any],
) -> None:
    server = Server("The secret is 42.")
    result = await Agent(await serve(server), output_guardrails=[no_secrets]).run("Tell me")

    assert result.stop_reason == "guardrail"
    assert result.text == "The answer was withheld."
    assert result.detail == "the output guardrail 'no_secrets' blocked the run"
    assert len(server.bodies) == 1


def polite(ctx: RunContext[Any], answer: str) -> GuardrailResult:
    return GuardrailResult.passed() if "please" in answer else GuardrailResult.retry("Ask politely: say please.")


async def test_an_output_guardrail_that_asks_for_a_retry_sends_its_message_and_takes_the_next_answer(
    serve: Callable[..., Any],
) -> None:
    server = Server("Give me the file.", "Could you please give me the file?")
    agent = Agent(await serve(server), output_guardrails=[polite])
    events: list[RunEvent] = [event async for event in agent.stream("Write a request")]
    result = result_of(events)

    assert result.stop_reason == "complete"
    assert result.text == "Could you please give me the file?"
    assert server.bodies[1]["messages"][-2:] == [
        {"role": "assistant", "content": "Give me the file."},
        {"role": "user", "content": "Ask politely: say please."},
    ]
    assert result.turns == 2
    assert result.usage.requests == 2
    assert sum(isinstance(e, type(events[0])) for e in events) == 1, "one RunStarted"
    check_order(events)
    assert_valid(result)


async def test_output_retries_past_the_limit_stop_the_run_as_invalid_output(serve: Callable[..., Any]) -> None:
    server = Server("No.", "Still no.")
    agent = Agent(await serve(server), output_guardrails=[polite], limits=Limits(output_retries=1))
    result = await agent.run("Write a request")

    assert result.stop_reason == "invalid_output"
    assert isinstance(result.error, InvalidOutput)
    assert result.error.errors == ("Ask politely: say please.",)
    assert len(server.bodies) == 2


class Reply(TypedDict):
    text: str


def typed_polite(ctx: RunContext[Any], output: Reply) -> GuardrailResult:
    return polite(ctx, output["text"])


async def test_an_output_guardrail_on_a_typed_output_retries_through_the_output_validation() -> None:
    model = ScriptedProvider([call("final_result", {"text": "Give."}), call("final_result", {"text": "please give"})])
    agent = Agent(model, output_type=Reply, output_guardrails=[typed_polite])
    result = await agent.run("Write a request")

    assert result.stop_reason == "complete"
    assert result.output == {"text": "please give"}
    first_result = result.messages[2].tool_results[0]
    assert first_result.is_error
    assert "Ask politely: say please." in first_result.content


async def test_an_output_guardrail_on_a_typed_output_that_blocks_stops_the_run() -> None:
    def no_secret(ctx: RunContext[Any], output: Reply) -> GuardrailResult:
        return no_secrets(ctx, output["text"])

    model = ScriptedProvider([call("final_result", {"text": "the secret"})])
    result = await Agent(model, output_type=Reply, output_guardrails=[no_secret]).run("Tell me")

    assert result.stop_reason == "guardrail"
    assert result.text == "The answer was withheld."
    assert result.output is None
    assert len(model.requests) == 1
    assert_valid(result)


async def test_an_agent_can_be_a_guardrail_and_one_that_fails_blocks() -> None:
    judge = Agent(ScriptedProvider([call("final_result", {"action": "block", "message": "Off topic."})]), name="judge")
    model = ScriptedProvider([reply("never")])
    result = await Agent(model, input_guardrails=[agent_guardrail(judge)]).run("What is the weather?")
    assert result.stop_reason == "guardrail"
    assert result.text == "Off topic."
    assert result.error.guardrail == "judge"  # type: ignore[union-attr]
    assert model.requests == []

    def broken(ctx: RunContext[Any], prompt: str) -> GuardrailResult:
        raise RuntimeError("no connection")

    result = await Agent(ScriptedProvider([reply("never")]), input_guardrails=[broken]).run("Hi")
    assert result.stop_reason == "guardrail"
    assert result.text == "The guardrail 'broken' failed: RuntimeError: no connection"


def test_run_alongside_is_for_input_guardrails() -> None:
    from tether.errors import ConfigInvalid

    with pytest.raises(ConfigInvalid, match="run_alongside"):
        Agent(ScriptedProvider([]), output_guardrails=[Guardrail(polite, run_alongside=True)])
