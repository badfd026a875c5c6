"""One error, one meaning: the same provider error sent as an HTTP error response and inside a stream is the
same kind, with the same code, the same quota flag and the same retry decision. A table of every kind the two
share (quota, rate limit, auth, context overflow, overload), then the in-stream shapes each provider really
uses (Responses ``error`` and ``response.failed``, a Chat chunk, an Anthropic event, a Gemini chunk)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tether.errors import ProviderError
from tether.providers.anthropic_stream import AnthropicDecoder
from tether.providers.gemini_stream import GeminiDecoder
from tether.providers.http import error_for_payload, error_for_response, is_retryable
from tether.providers.openai_chat_stream import ChatDecoder
from tether.providers.openai_responses_stream import ResponsesDecoder
from tether.providers.registry import PROFILES

QUOTA = {
    "message": "You exceeded your current quota, please check your plan and billing details.",
    "type": "insufficient_quota",
    "param": None,
    "code": "insufficient_quota",
}

# name, HTTP status it comes with, error body, expected code
SHARED: list[tuple[str, int, dict[str, Any], str]] = [
    ("openai-quota", 429, {"error": QUOTA}, "rate_limited"),
    (
        "openai-rate-limit",
        429,
        {"error": {"message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"}},
        "rate_limited",
    ),
    (
        "openai-bad-key",
        401,
        {
            "error": {
                "message": "Incorrect API key provided",
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            }
        },
        "auth_failed",
    ),
    (
        "openai-context",
        400,
        {
            "error": {
                "message": "This model's maximum context length is 128000 tokens.",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            }
        },
        "context_overflow",
    ),
    (
        "openai-server-error",
        500,
        {"error": {"message": "The server had an error", "type": "server_error", "code": None}},
        "provider_unavailable",
    ),
    (
        "anthropic-rate-limit",
        429,
        {"type": "error", "error": {"type": "rate_limit_error", "message": "Slow down"}},
        "rate_limited",
    ),
    (
        "anthropic-auth",
        401,
        {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}},
        "auth_failed",
    ),
    (
        "anthropic-permission",
        403,
        {"type": "error", "error": {"type": "permission_error", "message": "no access to this model"}},
        "auth_failed",
    ),
    (
        "anthropic-too-long",
        400,
        {"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 > 200000"}},
        "context_overflow",
    ),
    (
        "anthropic-overloaded",
        529,
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        "provider_unavailable",
    ),
    (
        "gemini-exhausted",
        429,
        {"error": {"code": 429, "message": "Resource has been exhausted.", "status": "RESOURCE_EXHAUSTED"}},
        "rate_limited",
    ),
    (
        "gemini-unauthenticated",
        401,
        {"error": {"code": 401, "message": "Request had invalid credentials.", "status": "UNAUTHENTICATED"}},
        "auth_failed",
    ),
    (
        "gemini-context",
        400,
        {
            "error": {
                "code": 400,
                "message": "The input token count exceeds the maximum number of tokens allowed (1048576).",
                "status": "INVALID_ARGUMENT",
            }
        },
        "context_overflow",
    ),
    (
        "gemini-bad-key",
        400,
        {
            "error": {
                "code": 400,
                "message": "API key not valid. Please pass a valid API key.",
                "status": "INVALID_ARGUMENT",
                "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}],
            }
        },
        "auth_failed",
    ),
    (
        "gemini-expired-key",
        400,
        {"error": {"code": 400, "message": "API key expired. Please renew the API key.", "status": "INVALID_ARGUMENT"}},
        "auth_failed",
    ),
    (
        "gemini-bad-argument-naming-a-key",
        400,
        {
            "error": {
                "code": 400,
                "message": "Invalid value at 'api_key_name' (TYPE_STRING)",
                "status": "INVALID_ARGUMENT",
            }
        },
        "bad_request",
    ),
    (
        "gemini-unavailable",
        503,
        {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}},
        "provider_unavailable",
    ),
]


def meaning(error: ProviderError) -> tuple[type[ProviderError], str, bool, bool]:
    return type(error), error.code, bool(error.details.get("insufficient_quota")), is_retryable(error)


@pytest.mark.parametrize(("status", "body", "code"), [row[1:] for row in SHARED], ids=[row[0] for row in SHARED])
def test_an_error_means_the_same_over_http_and_inside_a_stream(status: int, body: dict[str, Any], code: str) -> None:
    over_http = error_for_response("p", status, json.dumps(body), {})
    in_stream = error_for_payload("p", body)
    assert over_http.code == code
    assert meaning(in_stream) == meaning(over_http)
    assert in_stream.details == over_http.details  # provider_code and the quota flag alike


def test_an_exhausted_quota_is_rate_limited_flagged_and_never_retried_either_way() -> None:
    for error in (
        error_for_response("p", 429, json.dumps({"error": QUOTA}), {}),
        error_for_payload("p", {"error": QUOTA}),
    ):
        assert error.code == "rate_limited"
        assert error.details["insufficient_quota"] is True
        assert not is_retryable(error)


# --- the shapes providers really send in their streams ----------------------------------------------------------

QUOTA_EVENT = {"type": "error", "sequence_number": 1, **{k: v for k, v in QUOTA.items() if k != "type"}}
FAILED_EVENT = {
    "type": "response.failed",
    "sequence_number": 3,
    "response": {
        "id": "resp_1",
        "status": "failed",
        "error": {"code": "insufficient_quota", "message": QUOTA["message"]},
    },
}


@pytest.mark.parametrize(
    "feed",
    [
        pytest.param(lambda: ResponsesDecoder().feed(QUOTA_EVENT), id="responses-error-event"),
        pytest.param(lambda: ResponsesDecoder().feed(FAILED_EVENT), id="responses-failed"),
        pytest.param(lambda: ChatDecoder(PROFILES["openai"]).feed({"error": QUOTA}), id="chat-chunk"),
    ],
)
def test_an_exhausted_quota_inside_an_openai_stream_is_what_it_is_over_http(feed: Any) -> None:
    with pytest.raises(ProviderError) as caught:
        feed()
    over_http = error_for_response("openai", 429, json.dumps({"error": QUOTA}), {})
    assert meaning(caught.value) == meaning(over_http)


@pytest.mark.parametrize(
    ("feed", "code"),
    [
        pytest.param(
            lambda: AnthropicDecoder().feed(
                {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
            ),
            "provider_unavailable",
            id="anthropic-overloaded",
        ),
        pytest.param(
            lambda: AnthropicDecoder().feed(
                {"type": "error", "error": {"type": "rate_limit_error", "message": "Number of requests too high"}}
            ),
            "rate_limited",
            id="anthropic-rate-limit",
        ),
        pytest.param(
            lambda: GeminiDecoder().feed(
                {"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED"}}
            ),
            "rate_limited",
            id="gemini-exhausted",
        ),
        pytest.param(
            lambda: ResponsesDecoder().feed(
                {"type": "error", "code": "invalid_api_key", "message": "Incorrect API key"}
            ),
            "auth_failed",
            id="responses-bad-key",
        ),
        pytest.param(
            lambda: ChatDecoder(PROFILES["openai"]).feed(
                {"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}
            ),
            "rate_limited",
            id="chat-rate-limit",
        ),
    ],
)
def test_in_stream_errors_of_each_provider_keep_their_meaning(feed: Any, code: str) -> None:
    with pytest.raises(ProviderError) as caught:
        feed()
    assert caught.value.code == code
