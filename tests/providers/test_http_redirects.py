"""Redirects are never followed: a provider that answers with a 3xx gets a typed error naming the origin it
pointed to, and the other origin (a second loopback server recording everything) receives nothing: no API
key, no conversation. For every provider family, streamed and not, and every redirect status; for the probe
too."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest
from aiohttp import web

from tests.providers.vertex_servers import fixed_credentials
from tether.errors import BadRequest, ProviderError
from tether.messages import Message
from tether.providers.anthropic import AnthropicProvider
from tether.providers.base import Provider, Request
from tether.providers.gemini import GeminiProvider
from tether.providers.http import RetryPolicy
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.openai_responses import OpenAIResponsesProvider
from tether.providers.probe import probe
from tether.providers.vertex import VertexProvider

KEY = "sk-secret-0123456789abcdef"
CONVERSATION = "my bank password is hunter2"
REDIRECT_STATUSES = (301, 302, 303, 307, 308)
RETRY_AT_ONCE = RetryPolicy(max_retries=3, base_delay=0.0)

FAMILIES: dict[str, Callable[[str, bool], Provider]] = {
    "openai-chat": lambda url, stream: OpenAIChatProvider(
        "gpt-4o-mini", base_url=url, api_key=KEY, stream=stream, retry=RETRY_AT_ONCE
    ),
    "openai-responses": lambda url, stream: OpenAIResponsesProvider(
        "gpt-5-mini", base_url=url, api_key=KEY, stream=stream, retry=RETRY_AT_ONCE
    ),
    "anthropic": lambda url, stream: AnthropicProvider(
        "claude-sonnet-4-5", base_url=url, api_key=KEY, stream=stream, retry=RETRY_AT_ONCE
    ),
    "gemini": lambda url, stream: GeminiProvider(
        "gemini-2.5-flash", base_url=url, api_key=KEY, stream=stream, retry=RETRY_AT_ONCE
    ),
    "vertex": lambda url, stream: VertexProvider(  # its token is the key that must not show
        "gemini-2.5-flash",
        project="p",
        base_url=url,
        credentials=fixed_credentials(KEY),
        stream=stream,
        retry=RETRY_AT_ONCE,
    ),
}


@dataclass
class Recorder:
    """A loopback server that records every request it receives and answers each with ``status``."""

    url: str = ""
    status: int = 200
    location: str | None = None
    received: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.received.append((request.method, request.path_qs, dict(request.headers), await request.read()))
        headers = {"Location": self.location} if self.location else {}
        return web.json_response({"object": "list", "data": []}, status=self.status, headers=headers)


Start = Callable[[Recorder], Awaitable[Recorder]]


@pytest.fixture
async def start() -> AsyncIterator[Start]:
    """Start recorders on 127.0.0.1, each on its own port (so each is its own origin)."""
    runners: list[web.AppRunner] = []

    async def run(recorder: Recorder) -> Recorder:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", recorder.handle)
        runner = web.AppRunner(app)
        await runner.setup()
        runners.append(runner)
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        recorder.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        return recorder

    yield run
    for runner in runners:
        await runner.cleanup()


async def ask(provider: Provider) -> None:
    async for _ in provider.stream(Request((Message.user(CONVERSATION),), timeout=10)):
        pass


@pytest.mark.parametrize("status", REDIRECT_STATUSES)
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("family", list(FAMILIES))
async def test_a_redirect_is_not_followed_and_the_other_origin_receives_nothing(
    start: Start, family: str, stream: bool, status: int
) -> None:
    other = await start(Recorder())
    redirecting = await start(Recorder(status=status))
    redirecting.location = other.url + "/v1/collect?token=stolen"

    with pytest.raises(ProviderError) as caught:
        await ask(FAMILIES[family](redirecting.url + "/v1", stream))

    assert other.received == []
    assert len(redirecting.received) == 1  # not retried
    error = caught.value
    assert isinstance(error, BadRequest)
    assert (error.code, error.status) == ("bad_request", status)
    assert other.url in error.message  # where it pointed: the origin ...
    assert "collect" not in error.message
    assert "token" not in error.message
    assert "base_url" in error.message
    assert KEY not in str(error)
    assert KEY not in repr(error)


async def test_a_relative_redirect_names_the_providers_own_origin_and_is_not_followed(start: Start) -> None:
    redirecting = await start(Recorder(status=307, location="/v2/chat/completions"))

    with pytest.raises(BadRequest) as caught:
        await ask(FAMILIES["openai-chat"](redirecting.url + "/v1", True))

    assert len(redirecting.received) == 1
    assert redirecting.url in caught.value.message


async def test_a_redirect_without_a_location_says_so(start: Start) -> None:
    redirecting = await start(Recorder(status=302))

    with pytest.raises(BadRequest, match="no Location"):
        await ask(FAMILIES["anthropic"](redirecting.url + "/v1", False))


@pytest.mark.parametrize("status", REDIRECT_STATUSES)
async def test_the_probe_does_not_follow_a_redirect_with_its_key(start: Start, status: int) -> None:
    other = await start(Recorder())
    redirecting = await start(Recorder(status=status))
    redirecting.location = other.url + "/v1/models"

    result = await probe(redirecting.url + "/v1", api_key=KEY, timeout=10)

    assert other.received == []
    assert not result.ok
    assert f"HTTP {status}" in result.message
    assert other.url in result.message
