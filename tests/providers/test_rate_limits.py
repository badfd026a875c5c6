"""Client-side rate limits (``providers/http/ratelimit.py``): many runs against one server that allows N requests
per window get no 429, the server's remaining-quota headers and a 429's Retry-After hold every waiter, and the
tokens estimated before a request are corrected by its usage.

The HTTP tests run over real loopback HTTP against a server that counts what it receives. The limiter's own
tests give it the time (``now=``), so that they assert on its decisions, never on how long anything took."""

from __future__ import annotations

import asyncio
import datetime
import threading
import time
from collections.abc import Callable, Iterator

import msgspec
import pytest
from aiohttp import web

from tests.providers.conftest import Serve, started
from tether import Agent, ProviderRetry, RateLimitWait
from tether.errors import ConfigInvalid
from tether.providers import OpenAIChatProvider, RateLimit
from tether.providers.http.ratelimit import Limiter, limiter_for

ANSWER = msgspec.json.encode(
    {
        "id": "c1",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
    }
)
CHUNKS = [
    {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "ok"}}]},
    {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    {"id": "c1", "model": "m", "choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 3}},
]


class WindowServer:
    """An OpenAI-compatible server that allows ``allowed`` requests per ``window`` seconds (any window, as the
    arrivals it has recorded count them) and answers the rest 429, as a hosted API does."""

    def __init__(self, allowed: int, window: float) -> None:
        self.allowed, self.window = allowed, window
        self.arrivals: list[float] = []
        self.refused = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        now = time.monotonic()
        body = await request.json()
        recent = [at for at in self.arrivals if at > now - self.window]
        if len(recent) >= self.allowed:
            self.refused += 1
            return web.json_response({"error": {"message": "Rate limit reached", "type": "requests"}}, status=429)
        self.arrivals.append(now)
        if not body.get("stream"):
            return web.Response(body=ANSWER, content_type="application/json")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for chunk in CHUNKS:
            await response.write(b"data: " + msgspec.json.encode(chunk) + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        return response

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handle)
        return app

    def most_in_a_window(self) -> int:
        """The most arrivals any window of the server's length held."""
        times = sorted(self.arrivals)
        most, start = 0, 0
        for end, at in enumerate(times):
            while times[start] <= at - self.window:
                start += 1
            most = max(most, end - start + 1)
        return most


@pytest.fixture
def threaded() -> Iterator[Callable[[web.Application], str]]:
    """Serve apps on an event loop of a thread of their own (a free port each; their root URL given back), so
    that the runs' loop does not delay the times a server records."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    runners: list[web.AppRunner] = []

    async def start(app: web.Application) -> str:
        runner, url = await started(app)
        runners.append(runner)
        return url

    def serve_there(app: web.Application) -> str:
        return asyncio.run_coroutine_threadsafe(start(app), loop).result(10)

    yield serve_there
    for runner in runners:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def provider(url: str, rate_limit: RateLimit | None, *, key: str, stream: bool = True) -> OpenAIChatProvider:
    return OpenAIChatProvider("m", base_url=url + "/v1", api_key=key, rate_limit=rate_limit, stream=stream)


async def _waits(agent: Agent[None, str]) -> int:
    waits = 0
    async for event in agent.stream("hi"):
        waits += type(event) is RateLimitWait
    return waits


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_200_concurrent_runs_within_the_limit_get_no_429(
    threaded: Callable[[web.Application], str], stream: bool
) -> None:
    """200 runs started at once, sharing one limiter of 40 requests per 1 s window, meet no 429 from a server
    that allows 40 per window, every window the server saw held at most 40, and the runs that had to wait said so
    (``RateLimitWait``). The server runs on its own thread's loop and counts windows of 0.9 s: the limiter counts a
    request from its answer's head at the latest, but a request may reach the server's handler late while the one a
    window before it has had no answer yet. The time against the ideal is printed, not asserted."""
    allowed, window, runs = 40, 1.0, 200
    server = WindowServer(allowed, window * 0.9)
    url = threaded(server.app())
    limit = RateLimit(rpm=allowed, window=window)
    agents = [Agent(provider(url, limit, key=f"k-{stream}"), limits=None) for _ in range(runs)]
    started = time.monotonic()
    waited = await asyncio.gather(*(_waits(agent) for agent in agents))
    took = time.monotonic() - started
    ideal = (runs - 1) // allowed * window
    print(f"\n{runs} runs, {allowed} per {window} s: {took:.2f} s, ideal {ideal:.2f} s ({took / ideal:.2f}x)")
    assert server.refused == 0
    assert len(server.arrivals) == runs
    assert server.most_in_a_window() <= allowed
    assert sum(1 for count in waited if count) >= runs - allowed


async def test_the_server_refuses_runs_without_a_limit(serve: Serve) -> None:
    """The same runs without a rate limit do meet 429s from that server: it is the limiter that avoids them."""
    server = WindowServer(10, 5.0)
    url = await serve(server.app())
    plain = provider(url, None, key="plain")
    assert plain._client._limiter is None  # a provider without limits has no limiter to consult
    results = await asyncio.gather(*(Agent(plain).run("hi") for _ in range(30)))
    assert server.refused > 0
    assert any(result.stop_reason == "error" for result in results)


async def test_remaining_quota_headers_hold_requests_until_the_reset(serve: Serve) -> None:
    """An answer saying no request is left until its reset holds the next request back until then (Anthropic's
    RFC 3339 reset time), where the limit's own count would let it go at once."""
    arrivals: list[float] = []
    reset_at = 0.0

    async def handle(request: web.Request) -> web.Response:
        nonlocal reset_at
        arrivals.append(time.monotonic())
        reset = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=0.6)
        if len(arrivals) == 1:
            reset_at = time.monotonic() + 0.6
        headers = {
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": reset.isoformat().replace("+00:00", "Z"),
        }
        return web.Response(body=ANSWER, content_type="application/json", headers=headers)

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    url = await serve(app)
    agent = Agent(provider(url, RateLimit(rpm=1000), key="headers", stream=False))
    await agent.run("hi")
    events = [event async for event in agent.stream("again")]
    waits = [event for event in events if type(event) is RateLimitWait]
    assert [wait.reason for wait in waits] == ["server"]
    assert arrivals[1] >= reset_at - 0.05  # the server's own clock: the second came after the reset it named


async def test_a_429_retry_after_pauses_every_waiter(serve: Serve) -> None:
    """A 429 with ``Retry-After`` pauses the whole limiter: a run that asks while the first run's retry waits is
    held until the pause ends, told so as ``retry_after``."""
    arrivals: list[float] = []
    refused_at = 0.0

    async def handle(request: web.Request) -> web.Response:
        nonlocal refused_at
        arrivals.append(time.monotonic())
        if len(arrivals) == 1:
            refused_at = time.monotonic()
            return web.json_response({"error": {"message": "slow down"}}, status=429, headers={"Retry-After": "0.5"})
        return web.Response(body=ANSWER, content_type="application/json")

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handle)
    url = await serve(app)
    limit = RateLimit(rpm=1000)
    retried = asyncio.Event()

    async def first_run() -> str:
        text = ""
        async for event in Agent(provider(url, limit, key="pause", stream=False)).stream("one"):
            if type(event) is ProviderRetry:
                retried.set()  # the 429 has been read: the limiter is paused
            text += getattr(event, "text", "") if type(event).__name__ == "TextDelta" else ""
        return text

    first = asyncio.ensure_future(first_run())
    await retried.wait()
    second = [event async for event in Agent(provider(url, limit, key="pause", stream=False)).stream("two")]
    assert await first == "ok"
    assert [event.reason for event in second if type(event) is RateLimitWait] == ["retry_after"]
    assert len(arrivals) == 3
    assert min(arrivals[1:]) >= refused_at + 0.45  # neither the retry nor the other run came during the pause


def test_a_full_window_holds_the_next_request_one_window_after_the_oldest() -> None:
    """At most ``rpm`` slots in any window: the next slot is the oldest one's plus the window."""
    limiter = Limiter(RateLimit(rpm=3, window=10.0))
    delays = [limiter.reserve(now=100.0).delay for _ in range(3)]
    assert delays == [0.0, 0.0, 0.0]
    held = limiter.reserve(now=101.0)
    assert (held.delay, held.reason) == (9.0, "requests")
    assert limiter.reserve(now=101.0).at == 110.0  # the second slot of the first window leaves at 110 too


def test_tokens_are_corrected_by_the_usage() -> None:
    """A request's estimate holds its tokens until its usage says what it used: then the rest is free again."""
    limiter = Limiter(RateLimit(tpm=100, window=60.0))
    first = limiter.reserve(60, now=0.0)
    assert limiter.reserve(60, now=0.0).reason == "tokens"  # 120 > 100: the second waits for the first
    limiter = Limiter(RateLimit(tpm=100, window=60.0))
    first = limiter.reserve(60, now=0.0)
    assert first.spend is not None
    first.spend.settle(10)
    assert limiter.reserve(60, now=0.0).delay == 0.0


def test_openai_reset_durations_are_read() -> None:
    """OpenAI's ``x-ratelimit-reset-*`` durations (``1m0.5s``) hold the requests past the remaining quota."""
    limiter = Limiter(RateLimit())
    limiter.learn({"x-ratelimit-remaining-requests": "1", "x-ratelimit-reset-requests": "1m0.5s"}, now=0.0)
    assert limiter.reserve(now=0.0).delay == 0.0
    held = limiter.reserve(now=0.0)
    assert (held.delay, held.reason) == (60.5, "server")
    limiter.learn({"x-ratelimit-remaining-tokens": "50", "x-ratelimit-reset-tokens": "20ms"}, now=100.0)
    assert limiter.reserve(80, now=100.0).delay == pytest.approx(0.02)


def test_a_pause_moves_every_slot_given_back() -> None:
    """A pause that comes after slots were given moves them back by as much: a waiter sleeps the difference."""
    limiter = Limiter(RateLimit(rpm=1, window=1.0))
    limiter.reserve(now=0.0)
    waiting = limiter.reserve(now=0.0)
    assert waiting.at == 1.0
    limiter.pause(5.0, now=0.0)
    assert limiter.reserve(now=0.0).at == 7.0  # after the moved slot of 6.0, one window on
    assert limiter._shift - waiting.shift == 5.0


def test_one_limiter_per_api_key_and_model() -> None:
    """Providers of the same API, key and model share a limiter; another key or model has its own."""
    limit = RateLimit(rpm=5)
    one = limiter_for("http://h/v1", "key-a", "m", limit)
    assert limiter_for("http://h/v1/", "key-a", "m", limit) is one
    assert limiter_for("http://h/v1", "key-b", "m", limit) is not one
    assert limiter_for("http://h/v1", "key-a", "n", limit) is not one


@pytest.mark.parametrize(
    "arguments", [{"rpm": 0}, {"tpm": -1}, {"rpm": True}, {"rpm": 1.5}, {"window": 0}, {"window": float("inf")}]
)
def test_bad_limits_are_refused(arguments: dict[str, object]) -> None:
    with pytest.raises(ConfigInvalid):
        RateLimit(**arguments)  # type: ignore[arg-type]
