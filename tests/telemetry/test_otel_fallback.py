"""Real HTTP: each attempt of a fallback is a span of its own, named by the model it asked."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from opentelemetry import trace
from opentelemetry.trace import StatusCode

from tests.providers.test_fallback import NO_RETRY, Server, answering, status
from tests.telemetry.conftest import Otel, attrs, check_tree
from tether import Agent
from tether.errors import ProviderUnavailable
from tether.providers import LlmEvent, ModelInfo, Request, StreamEnd, TextDelta, Usage
from tether.providers.anthropic import AnthropicProvider
from tether.providers.openai_chat import OpenAIChatProvider


@pytest.fixture
async def urls() -> AsyncIterator[list[str]]:
    """Two servers on 127.0.0.1: the first answers 503, the second answers."""
    runners: list[web.AppRunner] = []
    found: list[str] = []
    for server in (Server(status(503)), Server(answering)):
        app = web.Application()
        app.router.add_post("/v1/messages", server.handle)
        app.router.add_post("/v1/chat/completions", server.handle)
        runner = web.AppRunner(app)
        await runner.setup()
        runners.append(runner)
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        found.append(f"http://127.0.0.1:{runner.addresses[0][1]}/v1")
    yield found
    for runner in runners:
        await runner.cleanup()


async def test_each_attempt_is_a_span_naming_its_model(otel: Otel, urls: list[str]) -> None:
    """The failed attempt's span names the first model and its error; the next attempt's span, under the same
    run, names the model that answered."""
    primary = AnthropicProvider("claude-primary", base_url=urls[0], api_key="sk-primary", retry=NO_RETRY)
    backup = OpenAIChatProvider("backup-1", base_url=urls[1], api_key="sk-backup", retry=NO_RETRY)
    agent = Agent([primary, backup], telemetry=otel.telemetry())

    result = await agent.run("Hello?")

    assert result.text == "from the backup"
    check_tree(otel.spans())
    failed, answered = otel.named("chat ")
    assert failed.name == "chat claude-primary"
    assert attrs(failed)["error.type"] == "provider_unavailable"
    assert failed.status.status_code is StatusCode.ERROR
    assert answered.name == "chat backup-1"
    assert attrs(answered)["gen_ai.request.model"] == "backup-1"
    assert attrs(answered)["gen_ai.provider.name"] == "openai"
    assert attrs(answered)["gen_ai.response.model"] == "backup-1"
    assert answered.status.status_code is not StatusCode.ERROR


class Watching:
    """A model in this process that notes the span current while it is asked, and fails or answers."""

    def __init__(self, name: str, *, fails: bool) -> None:
        self.name = name
        self.fails = fails
        self.span_name: str | None = None

    @property
    def info(self) -> ModelInfo:
        return ModelInfo("custom", self.name)

    async def stream(self, request: Request) -> AsyncIterator[LlmEvent]:
        self.span_name = getattr(trace.get_current_span(), "name", None)
        if self.fails:
            raise ProviderUnavailable("down")
        yield TextDelta("answered")
        yield StreamEnd("stop", Usage())


async def test_each_attempt_runs_inside_its_own_span(otel: Otel) -> None:
    """The provider's work for the next model is done inside that attempt's span, not the failed one's."""
    first, second = Watching("first", fails=True), Watching("second", fails=False)

    result = await Agent([first, second], telemetry=otel.telemetry()).run("Hello?")

    assert result.text == "answered"
    assert (first.span_name, second.span_name) == ("chat first", "chat second")
