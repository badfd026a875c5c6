"""The HTTP layer's error side: status -> ProviderError mapping, provider messages, Retry-After, in-stream
errors, RetryPolicy, what is retryable, and API keys that never show (also over a real loopback request)."""

from __future__ import annotations

import email.utils
import json
import math
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st
from multidict import CIMultiDict

from tether import Agent, Limits
from tether.errors import (
    AuthFailed,
    BadRequest,
    ContextOverflow,
    InvalidResponse,
    ProviderError,
    ProviderUnavailable,
    RateLimited,
    RequestTimeout,
    TransportError,
)
from tether.messages import Message
from tether.providers.base import Request
from tether.providers.http import (
    HttpClient,
    RetryPolicy,
    Secret,
    error_for_payload,
    error_for_response,
    is_retryable,
    provider_message,
    retry_after,
)
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.registry import PROFILES


def headers(**values: str) -> CIMultiDict[str]:
    """Response headers as aiohttp gives them: case-insensitive. ``retry_after_ms`` -> ``retry-after-ms``."""
    return CIMultiDict({name.replace("_", "-"): value for name, value in values.items()})


def openai_error(message: str, kind: str = "invalid_request_error", code: str | None = None) -> str:
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}})


def anthropic_error(kind: str, message: str) -> str:
    return json.dumps({"type": "error", "error": {"type": kind, "message": message}})


def gemini_error(code: int, message: str, status: str) -> str:
    return json.dumps({"error": {"code": code, "message": message, "status": status}})


# --- status -> error class and code -------------------------------------------------------------------------

STATUS_CASES: list[tuple[int, str, type[ProviderError], str]] = [
    (400, openai_error("Invalid value for 'temperature': must be <= 2."), BadRequest, "bad_request"),
    (
        401,
        openai_error("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"),
        AuthFailed,
        "auth_failed",
    ),
    (403, anthropic_error("permission_error", "Your API key does not have permission."), AuthFailed, "auth_failed"),
    (404, openai_error("The model `gpt-9` does not exist.", code="model_not_found"), BadRequest, "bad_request"),
    (408, "Request Timeout", RequestTimeout, "timeout"),
    (413, "Request Entity Too Large", BadRequest, "bad_request"),
    (422, json.dumps({"detail": "Field required: messages"}), BadRequest, "bad_request"),
    (
        429,
        openai_error("Rate limit reached for requests.", "requests", "rate_limit_exceeded"),
        RateLimited,
        "rate_limited",
    ),
    (500, openai_error("The server had an error.", "server_error"), ProviderUnavailable, "provider_unavailable"),
    (502, "<html><body>502 Bad Gateway</body></html>", ProviderUnavailable, "provider_unavailable"),
    (503, gemini_error(503, "The model is overloaded.", "UNAVAILABLE"), ProviderUnavailable, "provider_unavailable"),
    (504, "Gateway Timeout", ProviderUnavailable, "provider_unavailable"),
    (529, anthropic_error("overloaded_error", "Overloaded"), ProviderUnavailable, "provider_unavailable"),
]


@pytest.mark.parametrize(("status", "body", "kind", "code"), STATUS_CASES, ids=[str(c[0]) for c in STATUS_CASES])
def test_each_status_maps_to_its_error_and_code(status: int, body: str, kind: type[ProviderError], code: str) -> None:
    error = error_for_response("openai", status, body, headers(x_request_id="req_abc123"))
    assert type(error) is kind
    assert error.code == code
    assert error.status == status
    assert error.request_id == "req_abc123"
    assert error.provider_message == provider_message(body)[0]
    assert error.provider_message  # never None or empty, even for a bare status
    assert f"HTTP {status}" in str(error)
    assert error.provider_message in str(error)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("x-request-id", "req_1"),
        ("request-id", "req_011CAnthropic"),
        ("X-Request-ID", "req_CAPS"),
        ("cf-ray", "8f-AMS"),
    ],
)
def test_the_request_id_is_read_from_the_providers_header(name: str, value: str) -> None:
    error = error_for_response("p", 500, "oops", CIMultiDict({name: value}))
    assert error.request_id == value


def test_no_request_id_header_leaves_it_none() -> None:
    assert error_for_response("p", 500, "oops", headers()).request_id is None


# --- the provider's message ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message", "code"),
    [
        pytest.param(
            openai_error("Rate limit reached", "requests", "rate_limit_exceeded"),
            "Rate limit reached",
            "rate_limit_exceeded",
            id="openai",
        ),
        pytest.param(
            openai_error("No such model", "invalid_request_error"),
            "No such model",
            "invalid_request_error",
            id="openai-no-code",
        ),
        pytest.param(
            anthropic_error("overloaded_error", "Overloaded"), "Overloaded", "overloaded_error", id="anthropic"
        ),
        pytest.param(
            gemini_error(400, "API key not valid. Please pass a valid API key.", "INVALID_ARGUMENT"),
            "API key not valid. Please pass a valid API key.",
            None,
            id="gemini",
        ),
        pytest.param('{"error": "model \\"llama9\\" not found"}', 'model "llama9" not found', None, id="ollama-string"),
        pytest.param('{"detail": "Not Found"}', "Not Found", None, id="fastapi-detail"),
        pytest.param("  upstream connect error  \n", "upstream connect error", None, id="plain-text"),
        pytest.param("", "(empty body)", None, id="empty"),
    ],
)
def test_provider_message_reads_every_usual_error_shape(body: str, message: str, code: str | None) -> None:
    found, found_code = provider_message(body)
    assert found == message
    if code is not None:
        assert found_code == code


def test_a_gemini_error_carries_a_machine_code() -> None:
    _, code = provider_message(gemini_error(429, "Resource has been exhausted.", "RESOURCE_EXHAUSTED"))
    assert code in ("429", "RESOURCE_EXHAUSTED")


def test_a_huge_plain_text_body_is_cut_to_a_readable_message() -> None:
    message, _ = provider_message("x" * 100_000)
    assert 0 < len(message) <= 1000


# --- context overflow ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "body"),
    [
        pytest.param(
            400,
            openai_error(
                "This model's maximum context length is 128000 tokens. However, your messages resulted in "
                "130123 tokens. Please reduce the length of the messages.",
                code="context_length_exceeded",
            ),
            id="openai",
        ),
        pytest.param(
            400, openai_error("Please shorten the conversation.", code="context_length_exceeded"), id="openai-code-only"
        ),
        pytest.param(
            400,
            anthropic_error("invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum"),
            id="anthropic",
        ),
        pytest.param(
            400,
            gemini_error(
                400,
                "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
                "INVALID_ARGUMENT",
            ),
            id="gemini",
        ),
        pytest.param(413, openai_error("Input is too long for requested model."), id="413"),
        pytest.param(
            422,
            json.dumps(
                {"object": "error", "message": "This model's maximum context length is 4096 tokens.", "code": 422}
            ),
            id="422-vllm",
        ),
    ],
)
def test_context_length_errors_are_context_overflow(status: int, body: str) -> None:
    error = error_for_response("p", status, body, headers())
    assert type(error) is ContextOverflow
    assert error.code == "context_overflow"
    assert error.status == status
    assert not is_retryable(error)


def test_a_400_about_something_else_is_not_context_overflow() -> None:
    error = error_for_response("p", 400, openai_error("'messages' must contain the word 'json'"), headers())
    assert error.code == "bad_request"


# --- Retry-After --------------------------------------------------------------------------------------------


def test_429_carries_retry_after_in_seconds() -> None:
    error = error_for_response("p", 429, openai_error("slow down"), headers(retry_after="7"))
    assert isinstance(error, RateLimited)
    assert error.retry_after == 7.0
    assert is_retryable(error)


def test_429_retry_after_as_an_http_date() -> None:
    when = email.utils.formatdate(time.time() + 120, usegmt=True)
    error = error_for_response("p", 429, "slow down", headers(retry_after=when))
    assert isinstance(error, RateLimited)
    assert error.retry_after is not None
    assert 100 < error.retry_after <= 120


def test_retry_after_as_a_date_in_the_past_is_zero() -> None:
    assert retry_after(headers(retry_after="Wed, 21 Oct 2015 07:28:00 GMT")) == 0.0


def test_429_retry_after_ms_wins_over_retry_after() -> None:
    error = error_for_response("p", 429, "slow down", headers(retry_after_ms="1500", retry_after="2"))
    assert isinstance(error, RateLimited)
    assert error.retry_after == 1.5


@pytest.mark.parametrize(
    ("values", "seconds"),
    [
        ({"retry_after_ms": "250"}, 0.25),
        ({"retry_after": "0"}, 0.0),
        ({"retry_after": "1.5"}, 1.5),
        ({"retry_after_ms": "soon", "retry_after": "3"}, 3.0),
        ({"retry_after": "whenever"}, None),
        ({}, None),
    ],
)
def test_retry_after_parsing(values: dict[str, str], seconds: float | None) -> None:
    assert retry_after(headers(**values)) == seconds


def test_429_insufficient_quota_is_not_retryable() -> None:
    body = openai_error("You exceeded your current quota.", "insufficient_quota", "insufficient_quota")
    error = error_for_response("openai", 429, body, headers(retry_after="1"))
    assert error.code == "rate_limited"
    assert error.details["insufficient_quota"] is True
    assert not is_retryable(error)


def test_a_plain_429_is_retryable() -> None:
    assert is_retryable(error_for_response("openai", 429, openai_error("slow down"), headers()))


# --- errors inside a stream ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        pytest.param(
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            "provider_unavailable",
            id="anthropic-overloaded",
        ),
        pytest.param(
            {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}},
            "provider_unavailable",
            id="anthropic-api-error",
        ),
        pytest.param(
            {"type": "error", "error": {"type": "rate_limit_error", "message": "Slow down"}},
            "rate_limited",
            id="anthropic-rate-limit",
        ),
        pytest.param(
            {"type": "error", "error": {"type": "invalid_request_error", "message": "Bad field"}},
            "bad_request",
            id="anthropic-invalid",
        ),
        pytest.param(
            {"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 1 > 0"}},
            "context_overflow",
            id="anthropic-too-long",
        ),
        pytest.param(
            {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}},
            "auth_failed",
            id="anthropic-auth",
        ),
        pytest.param(
            {"type": "error", "error": {"type": "permission_error", "message": "no access"}},
            "auth_failed",
            id="anthropic-permission",
        ),
        pytest.param(
            {"error": {"message": "The server had an error", "type": "server_error", "code": None}},
            "provider_unavailable",
            id="openai-server-error",
        ),
        pytest.param(
            {
                "error": {
                    "message": "This model's maximum context length is 8192 tokens.",
                    "type": "invalid_request_error",
                    "code": "context_length_exceeded",
                }
            },
            "context_overflow",
            id="openai-context",
        ),
        pytest.param(
            {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}},
            "provider_unavailable",
            id="gemini-503",
        ),
        pytest.param(
            {"error": {"code": 429, "message": "Resource exhausted.", "status": "RESOURCE_EXHAUSTED"}},
            "rate_limited",
            id="gemini-429",
        ),
    ],
)
def test_in_stream_errors_map_by_their_type_or_code(payload: dict[str, Any], code: str) -> None:
    error = error_for_payload("p", payload)
    assert error.code == code
    assert error.status is None  # the HTTP status was 200: the error came inside the stream
    assert error.provider_message
    assert error.provider_message in str(error)


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        pytest.param(
            {
                "error": {
                    "message": "Please shorten it.",
                    "type": "invalid_request_error",
                    "code": "context_length_exceeded",
                }
            },
            "context_overflow",
            id="openai-code-context_length_exceeded",
        ),
        pytest.param(
            {"error": {"code": 400, "message": "Invalid JSON payload received.", "status": "INVALID_ARGUMENT"}},
            "bad_request",
            id="gemini-400",
        ),
        pytest.param(
            {"error": {"code": 401, "message": "API key not valid.", "status": "UNAUTHENTICATED"}},
            "auth_failed",
            id="gemini-401",
        ),
        pytest.param(
            {"error": {"code": 403, "message": "Permission denied.", "status": "PERMISSION_DENIED"}},
            "auth_failed",
            id="gemini-403",
        ),
    ],
)
def test_in_stream_errors_are_read_from_every_field_that_names_them(payload: dict[str, Any], code: str) -> None:
    """An error object names its kind in ``type``, ``code`` or ``status``; whichever field says it, the meaning
    is kept: OpenAI's ``code: context_length_exceeded`` next to ``type: invalid_request_error`` is a context
    overflow (as it is for an HTTP 400, see above), and a Gemini-shaped error (numeric ``code`` plus ``status``)
    that says "bad request" or "not allowed" is not reported as the provider being unavailable."""
    assert error_for_payload("p", payload).code == code


# --- what is retried ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        (RateLimited("x"), True),
        (ProviderUnavailable("x"), True),
        (TransportError("x"), True),
        (RequestTimeout("x"), True),
        (AuthFailed("x"), False),
        (BadRequest("x"), False),
        (ContextOverflow("x"), False),
        (InvalidResponse("x"), False),
        (RateLimited("x", details={"insufficient_quota": True}), False),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, ProviderError) else str(v),
)
def test_is_retryable(error: ProviderError, retryable: bool) -> None:
    assert is_retryable(error) is retryable


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504, 529])
def test_the_documented_statuses_are_retryable(status: int) -> None:
    assert is_retryable(error_for_response("p", status, "x", headers()))


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
def test_client_errors_are_not_retryable(status: int) -> None:
    assert not is_retryable(error_for_response("p", status, "x", headers()))


@pytest.mark.parametrize("status", [501, 505])
def test_server_errors_outside_the_documented_list_are_not_retried(status: int) -> None:
    """The contract retries 429, 500, 502, 503, 504 and 529 only; 501 Not Implemented (llama.cpp answers it for
    features the server was not started with) will not succeed on a second try."""
    body = json.dumps(
        {"error": {"code": 501, "message": "This server does not support tools", "type": "not_supported_error"}}
    )
    assert not is_retryable(error_for_response("llamacpp", status, body, headers()))


# --- RetryPolicy --------------------------------------------------------------------------------------------


def test_retry_policy_defaults() -> None:
    policy = RetryPolicy()
    assert (policy.max_retries, policy.base_delay, policy.max_delay) == (3, 0.5, 30.0)


@pytest.mark.parametrize(
    ("attempt", "bound"), [(0, 0.5), (1, 1.0), (2, 2.0), (3, 4.0), (5, 16.0), (6, 30.0), (20, 30.0)]
)
def test_backoff_is_full_jitter_up_to_base_times_two_to_the_n_capped_by_max_delay(
    attempt: int, bound: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[float, float]] = []

    def uniform(low: float, high: float) -> float:
        calls.append((low, high))
        return high

    monkeypatch.setattr("tether.providers.http.retry.random.uniform", uniform)
    assert RetryPolicy(base_delay=0.5, max_delay=30.0).delay(attempt, None) == bound
    assert calls == [(0.0, bound)]  # full jitter: anywhere from zero to the bound


def test_backoff_waits_vary() -> None:
    waits = {RetryPolicy(base_delay=1.0).delay(3, None) for _ in range(50)}
    assert len(waits) > 1
    assert all(0.0 <= wait <= 8.0 for wait in waits)


@settings(derandomize=True)
@given(
    attempt=st.integers(0, 60),
    base=st.floats(0.0, 100.0),
    cap=st.floats(0.0, 1000.0),
    after=st.none() | st.floats(-1e6, 1e9),
)
def test_backoff_never_exceeds_its_bounds(attempt: int, base: float, cap: float, after: float | None) -> None:
    wait = RetryPolicy(base_delay=base, max_delay=cap).delay(attempt, after)
    assert 0.0 <= wait <= cap
    if after is None:
        assert wait <= base * 2**attempt


@pytest.mark.parametrize(("after", "wait"), [(0.0, 0.0), (2.5, 2.5), (30.0, 30.0), (3600.0, 30.0), (-5.0, 0.0)])
def test_retry_after_is_used_as_is_but_capped_by_max_delay(after: float, wait: float) -> None:
    assert RetryPolicy(max_delay=30.0).delay(0, after) == wait


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf"])
def test_a_retry_after_that_is_not_a_finite_number_gives_a_bounded_wait(value: str) -> None:
    """A server saying ``Retry-After: nan`` must not make the client wait forever (``asyncio.sleep(nan)`` never
    returns) or slip past the deadline check (every comparison with NaN is false)."""
    policy = RetryPolicy(max_delay=30.0)
    wait = policy.delay(0, retry_after(headers(retry_after=value)))
    assert not math.isnan(wait)
    assert 0.0 <= wait <= 30.0
    wait = policy.delay(0, retry_after(headers(retry_after_ms=value)))
    assert not math.isnan(wait)
    assert 0.0 <= wait <= 30.0


# --- secrets ------------------------------------------------------------------------------------------------

KEY = "sk-tether-FAKE-7d41c9e0b2a84f6e"


def test_secret_never_shows_its_value() -> None:
    secret = Secret(KEY)
    assert secret.reveal() == KEY
    for shown in (repr(secret), str(secret), f"{secret}", f"{secret!r}", format(secret), repr([secret])):
        assert KEY not in shown
        assert "***" in shown


def test_http_client_repr_has_no_key() -> None:
    client = HttpClient("http://127.0.0.1:9/v1", provider="openai", api_key=Secret(KEY))
    assert KEY not in repr(client)
    assert KEY not in str(client)


def test_provider_repr_has_no_key() -> None:
    provider = OpenAIChatProvider("gpt-4o-mini", api_key=KEY, base_url="http://127.0.0.1:9/v1")
    assert KEY not in repr(provider)
    assert KEY not in str(provider)


class ErrorServer:
    """A loopback server answering every request with one error status; it records the Authorization header."""

    def __init__(self, status: int, body: str) -> None:
        self.status = status
        self.body = body
        self.authorizations: list[str | None] = []
        self.base_url = ""

    async def handle(self, request: web.Request) -> web.Response:
        await request.read()
        self.authorizations.append(request.headers.get("Authorization"))
        body = self.body.replace("{authorization}", request.headers.get("Authorization", ""))
        return web.Response(status=self.status, text=body, content_type="application/json")


@pytest.fixture
async def serve() -> AsyncIterator[Any]:
    runners: list[web.AppRunner] = []

    async def start(status: int, body: str) -> ErrorServer:
        server = ErrorServer(status, body)
        app = web.Application()
        app.router.add_post("/v1/chat/completions", server.handle)
        runner = web.AppRunner(app)
        await runner.setup()
        runners.append(runner)
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        server.base_url = f"http://127.0.0.1:{port}/v1"
        return server

    yield start
    for runner in runners:
        await runner.cleanup()


def assert_no_key(*shown: object) -> None:
    for text in shown:
        assert KEY not in str(text)
        assert KEY not in repr(text)


@pytest.mark.parametrize(
    ("status", "body", "code"),
    [
        (401, openai_error("Incorrect API key provided.", code="invalid_api_key"), "auth_failed"),
        (
            500,
            openai_error("The server had an error while processing your request.", "server_error"),
            "provider_unavailable",
        ),
    ],
)
async def test_a_failed_request_never_shows_the_key(serve: Any, status: int, body: str, code: str) -> None:
    server: ErrorServer = await serve(status, body)
    provider = OpenAIChatProvider(
        "test-model",
        profile=PROFILES["openai-compatible"],
        base_url=server.base_url,
        api_key=KEY,
        retry=RetryPolicy(max_retries=1, base_delay=0.001),
    )
    with pytest.raises(ProviderError) as caught:
        async for _ in provider.stream(Request((Message.user("hi"),))):
            pass
    error = caught.value
    assert error.code == code
    assert server.authorizations[0] == f"Bearer {KEY}"  # the key was sent: this test is not vacuous
    assert_no_key(error, error.args, error.message, error.provider_message, error.details, provider)

    agent = Agent(provider, limits=Limits(run_timeout=30))
    result = await agent.run("hi")
    assert result.stop_reason == "error"
    assert result.error is not None
    assert_no_key(result.error, result.error.args, result.detail, result.text, result, agent.provider)


async def test_a_failed_request_never_shows_the_key_even_if_the_server_echoes_it(serve: Any) -> None:
    """The contract says no message contains the key. A server (or a proxy) that quotes the Authorization
    header back in its error body must not put the key into tether's error message."""
    server: ErrorServer = await serve(401, openai_error("Invalid token: {authorization}", code="invalid_api_key"))
    provider = OpenAIChatProvider(
        "test-model", profile=PROFILES["openai-compatible"], base_url=server.base_url, api_key=KEY
    )
    with pytest.raises(AuthFailed) as caught:
        async for _ in provider.stream(Request((Message.user("hi"),))):
            pass
    assert server.authorizations == [f"Bearer {KEY}"]
    assert_no_key(caught.value, caught.value.args, caught.value.provider_message)
