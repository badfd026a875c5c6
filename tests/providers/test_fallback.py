"""A fallback over real HTTP: the first model fails before its answer begins, and the run completes on the next.

The first model is an Anthropic or OpenAI server on 127.0.0.1 that answers 503, 429, stalls past the request
timeout, or drops the connection before its first event; the second an OpenAI-compatible server that answers.
Once the first model's answer has begun, a failure surfaces and the second is never asked: two attempts are
never joined into one message. Each attempt is a record of the run, naming its model and its error.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web

from tests.helpers import assert_valid
from tests.providers.conftest import Serve
from tether import Agent, Limits, StopReason
from tether.errors import ConfigInvalid, ProviderUnavailable
from tether.events import FallbackTaken, RateLimitWait
from tether.providers import FallbackProvider, RetryPolicy
from tether.providers.anthropic import AnthropicProvider
from tether.providers.fallback import resolve_models
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.scripted import ScriptedProvider, events, reply
from tether.testing import result_of

NO_RETRY = RetryPolicy(max_retries=0)
"""Each provider tries once: the fallback is what is under test, not the retry ladder."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return f"data: {json.dumps({'id': 'c1', 'model': 'backup-1', 'choices': [choice]})}\n\n".encode()


async def answering(request: web.Request) -> web.StreamResponse:
    """An OpenAI-compatible model that answers "from the backup", streamed."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    await response.write(chunk({"role": "assistant", "content": "from the "}))
    await response.write(chunk({"content": "backup"}))
    await response.write(chunk({}, "stop"))
    await response.write(b"data: [DONE]\n\n")
    return response


async def dropping_after_first_event(request: web.Request) -> web.StreamResponse:
    """An OpenAI-compatible model whose connection drops once its answer has begun."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    await response.write(chunk({"role": "assistant", "content": "partial "}))
    await asyncio.sleep(0)  # the chunk leaves before the connection drops
    assert request.transport is not None
    request.transport.close()
    return response


async def dropping_before_first_event(request: web.Request) -> web.StreamResponse:
    """The connection drops once the headers are sent, before any event."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    assert request.transport is not None
    request.transport.close()
    return response


def status(code: int) -> Handler:
    async def handle(request: web.Request) -> web.StreamResponse:
        error = {"type": "error", "error": {"type": "overloaded_error", "message": f"status {code}"}}
        return web.json_response(error, status=code)

    return handle


class Server:
    """A handler served on 127.0.0.1 at every path a provider posts to, counting requests."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.requests = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        return await self.handler(request)

    async def start(self, serve: Serve) -> str:
        app = web.Application()
        app.router.add_post("/v1/messages", self.handle)
        app.router.add_post("/v1/chat/completions", self.handle)
        return await serve(app)


async def backup(serve: Serve) -> tuple[Server, OpenAIChatProvider]:
    server = Server(answering)
    url = await server.start(serve)
    return server, OpenAIChatProvider("backup-1", base_url=f"{url}/v1", api_key="sk-backup", retry=NO_RETRY)


async def stalling(request: web.Request) -> web.StreamResponse:
    """Sends nothing until the client gives up (its request timeout)."""
    await asyncio.Event().wait()
    raise AssertionError("unreachable")


@pytest.mark.parametrize(
    ("handler", "code"),
    [
        (status(503), "provider_unavailable"),
        (status(429), "rate_limited"),
        (stalling, "timeout"),
        (dropping_before_first_event, "transport"),
    ],
    ids=["503", "429", "stall", "drop-before-first-event"],
)
async def test_a_run_completes_on_the_second_model_when_the_first_fails_before_answering(
    serve: Serve, handler: Handler, code: str
) -> None:
    """An Anthropic model failing before its first event: the run completes on an OpenAI model, each attempt a
    record naming the model that failed (and why) or answered."""
    first = Server(handler)
    url = await first.start(serve)
    second, backup_model = await backup(serve)
    primary = AnthropicProvider("claude-primary", base_url=f"{url}/v1", api_key="sk-primary", retry=NO_RETRY)
    agent = Agent([primary, backup_model], limits=Limits(request_timeout=0.5))

    result = await agent.run("Hello?")

    assert result.stop_reason is StopReason.COMPLETE
    assert result.text == "from the backup"
    assert (first.requests, second.requests) == (1, 1)
    assert [(r.model, r.error) for r in result.turn_records] == [("claude-primary", code), ("backup-1", None)]
    assert len(result.turn_usage) == 2
    assert result.usage.requests == 2
    assert_valid(result)


async def test_a_drop_after_the_first_event_surfaces_and_never_asks_the_next_model(serve: Serve) -> None:
    """Once the first model's answer has begun, its failure ends the call: the backup is never asked, and no
    message joins the two."""
    first = Server(dropping_after_first_event)
    url = await first.start(serve)
    second, backup_model = await backup(serve)
    primary = OpenAIChatProvider("primary-1", base_url=f"{url}/v1", api_key="sk-primary", retry=NO_RETRY)
    agent = Agent(FallbackProvider([primary, backup_model]))

    result = await agent.run("Hello?")

    assert result.stop_reason is StopReason.ERROR
    assert second.requests == 0
    assert [r.error for r in result.turn_records] == ["transport"]
    assert "backup" not in result.text


async def test_auth_failed_moves_on_only_when_asked(serve: Serve) -> None:
    """A refused key ends the run by default (another account would be billed silently); with ``auth_failed``
    in ``on`` the next model answers."""
    first = Server(status(401))
    url = await first.start(serve)
    second, backup_model = await backup(serve)
    primary = AnthropicProvider("claude-primary", base_url=f"{url}/v1", api_key="sk-primary", retry=NO_RETRY)

    refused = await Agent(FallbackProvider([primary, backup_model])).run("Hello?")
    assert refused.stop_reason is StopReason.ERROR
    assert second.requests == 0

    asked = FallbackProvider([primary, backup_model], on={"auth_failed", "provider_unavailable"})
    result = await Agent(asked).run("Hello?")
    assert result.text == "from the backup"
    assert second.requests == 1


async def test_a_list_of_model_strings_is_a_fallback_and_a_single_model_is_not_wrapped() -> None:
    """``resolve_models`` (what ``Agent`` calls) makes a list a fallback, keeps a one-item list's model as it is, and
    masks the keys of every model of a fallback."""
    options = {"api_key": "sk-both", "retry": NO_RETRY}
    fallback = resolve_models(["openai:gpt-4o-mini", "openai:gpt-4o"], **options)
    assert isinstance(fallback, FallbackProvider)
    assert [p.info.name for p in fallback.providers] == ["gpt-4o-mini", "gpt-4o"]
    assert fallback.info.name == "gpt-4o-mini"
    assert fallback.credentials() == ("sk-both", "sk-both")
    assert isinstance(resolve_models(["openai:gpt-4o-mini"], **options), OpenAIChatProvider)


def test_a_fallback_refuses_an_unknown_code_and_a_single_model() -> None:
    with pytest.raises(ConfigInvalid, match="cannot move on for bad_request"):
        FallbackProvider(["scripted:a", "scripted:b"], on={"bad_request"})
    with pytest.raises(ConfigInvalid, match="two models or more"):
        FallbackProvider(["scripted:a"])


async def test_a_fallbacks_health_reaches_every_model(serve: Serve) -> None:
    """``Agent.health()`` of a fallback asks each model's API, and names each."""

    async def models(request: web.Request) -> web.StreamResponse:
        return web.json_response({"object": "list", "data": [{"id": "backup-1", "object": "model"}]})

    urls = []
    for _ in range(2):
        app = web.Application()
        app.router.add_get("/v1/models", models)
        urls.append(await serve(app))
    first, second = (
        OpenAIChatProvider(name, base_url=f"{url}/v1", api_key="sk", retry=NO_RETRY)
        for name, url in zip(("primary-1", "backup-1"), urls, strict=True)
    )

    report = await Agent([first, second]).health(timeout=5)

    (check,) = [c for c in report.checks if c.name == "provider"]
    assert check.ok, check
    assert "openai:primary-1: " in check.detail
    assert "openai:backup-1: " in check.detail


async def test_a_move_is_a_fallback_taken_event_between_the_attempts(serve: Serve) -> None:
    """The run's stream says each move: a ``FallbackTaken`` naming the failed model, the error's code and the next
    model, before any of the answer and after the failed model's own retries."""
    first = Server(status(429))
    url = await first.start(serve)
    _, backup_model = await backup(serve)
    primary = AnthropicProvider(
        "claude-primary", base_url=f"{url}/v1", api_key="sk-primary-1234567890abcdef",
        retry=RetryPolicy(max_retries=1, base_delay=0.0, max_delay=0.0),
    )  # fmt: skip

    events = [event async for event in Agent([primary, backup_model]).stream("Hello?")]

    kinds = [type(event).__name__ for event in events]
    taken = [event for event in events if isinstance(event, FallbackTaken)]
    assert taken == [FallbackTaken("anthropic:claude-primary", "rate_limited", taken[0].message, "openai:backup-1", 2)]
    assert kinds.index("ProviderRetry") < kinds.index("FallbackTaken") < kinds.index("TextDelta")
    assert kinds.count("TurnStarted") == kinds.count("TurnCompleted") == 1
    assert first.requests == 2


def ending(finish: str, text: str = "") -> Handler:
    """An OpenAI-compatible model whose answer ends with ``finish``, having written ``text`` (none: an answer of
    its end alone)."""

    async def handle(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(chunk({"role": "assistant", "content": text}))
        await response.write(chunk({}, finish))
        await response.write(b"data: [DONE]\n\n")
        return response

    return handle


@pytest.mark.parametrize(
    ("finish", "code"), [("content_filter", "content_filter"), ("stop", "empty_answer")], ids=["filtered", "empty"]
)
async def test_a_filtered_or_empty_answer_moves_on_only_when_asked(serve: Serve, finish: str, code: str) -> None:
    """An answer that ends before any of it came (a content filter's stop, or nothing at all) moves on to the next
    model when its code is in ``on``, as a record of its own and a ``FallbackTaken``; by default it is the answer."""
    first = Server(ending(finish))
    url = await first.start(serve)
    second, backup_model = await backup(serve)
    primary = OpenAIChatProvider("primary-1", base_url=f"{url}/v1", api_key="sk-primary", retry=NO_RETRY)

    default = await Agent(FallbackProvider([primary, backup_model]), limits=Limits(invalid_response_retries=0)).run(
        "Hello?"
    )
    assert second.requests == 0
    assert "backup" not in default.text

    asked = FallbackProvider([primary, backup_model], on={code})
    events = [event async for event in Agent(asked).stream("Hello?")]
    result = result_of(events)
    assert result.text == "from the backup"
    assert second.requests == 1
    assert [(r.model, r.error) for r in result.turn_records] == [("primary-1", code), ("backup-1", None)]
    assert [(e.code, e.next_model) for e in events if isinstance(e, FallbackTaken)] == [(code, "openai:backup-1")]
    assert_valid(result)


async def test_a_filtered_answer_that_wrote_text_first_is_the_answer(serve: Serve) -> None:
    """A content filter's stop after some text: that text reached the host as it came, so the answer stands."""
    first = Server(ending("content_filter", text="Part of it"))
    url = await first.start(serve)
    second, backup_model = await backup(serve)
    primary = OpenAIChatProvider("primary-1", base_url=f"{url}/v1", api_key="sk-primary", retry=NO_RETRY)

    result = await Agent(FallbackProvider([primary, backup_model], on={"content_filter"})).run("Hello?")

    assert second.requests == 0
    assert result.text.startswith("Part of it")
    assert result.turn_records[0].finish_reason == "content_filter"


async def test_a_rate_limit_wait_before_the_request_is_no_answer() -> None:
    """A client-side rate limit's wait comes before the request (an event of the stream, not of an answer): the
    model that then fails still moves on, and the wait reached the host first."""
    waiting = ScriptedProvider(
        [events(RateLimitWait(0.0, "requests"), ProviderUnavailable("overloaded", status=503))]  # type: ignore[arg-type]
    )
    answering_model = ScriptedProvider([reply("from the backup")])

    seen = [event async for event in Agent([waiting, answering_model]).stream("Hello?")]

    kinds = [type(event).__name__ for event in seen]
    assert kinds.index("RateLimitWait") < kinds.index("FallbackTaken") < kinds.index("TextDelta")
    assert seen[-1].result.text == "from the backup"  # type: ignore[union-attr]
