"""What a provider's error means: one mapping from its HTTP status and error names to a ``ProviderError``.

A provider reports an error either as an HTTP error response (:func:`error_for_response`) or inside a
stream that started with HTTP 200 (:func:`error_for_payload`: an OpenAI chunk ``{"error": {...}}``, a
Responses ``error`` event or ``response.failed``, an Anthropic ``error`` event, a Gemini chunk). The same
error means the same thing either way, so both go through one function, :func:`classify`, and agree on the
code, on ``details`` and therefore on whether it is retried:

* an exhausted quota (``insufficient_quota``) is ``rate_limited`` with ``details["insufficient_quota"]``
  set, and never retried: waiting does not buy credit;
* a context-length error (the ``context_length_exceeded`` code, or a message that says so, on a 400/413/422
  or with no status) is ``context_overflow``;
* a 400 (or an error with no status) whose message says the API key is not valid is ``auth_failed``: Gemini
  answers a bad key so (``API_KEY_INVALID``), where others send 401;
* otherwise a known status decides (401/403 auth, 408 timeout, 429 rate limit, 5xx unavailable, other 4xx
  bad request), and without one the error's names do (``rate_limit``, ``auth``/``api_key``/``permission``,
  ``invalid_request``/``not_found``, ``overloaded``/``server_error``/``unavailable``); an error nothing
  names is put on the provider's side (``provider_unavailable``).

An error object names its kind in ``type``, ``code`` or ``status``; all three are read, and a numeric code
(Gemini's) stands for the HTTP status it equals.
"""

from __future__ import annotations

import email.utils
import json
import math
import re
import time
from typing import Any

from tether.errors import (
    AuthFailed,
    BadRequest,
    ContextOverflow,
    ProviderError,
    ProviderUnavailable,
    RateLimited,
    RequestTimeout,
    TransportError,
)

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504, 529})

_CONTEXT_OVERFLOW = re.compile(
    r"context[ _-]?(length|window)|maximum context|prompt is too long|too many (input )?tokens|"
    r"exceeds? the (model'?s? )?(maximum )?context|exceeds? the maximum number of tokens|input (is )?too long",
    re.IGNORECASE,
)
_INVALID_KEY = re.compile(r"api[ _-]?key.*\b(not valid|invalid|expired)\b|\binvalid api[ _-]?key", re.IGNORECASE)
"""A message that says the request's API key was refused (Gemini's: "API key not valid. Please pass a valid
API key.", "API key expired. Please renew the API key.")."""
_BY_NAME: tuple[tuple[tuple[str, ...], type[ProviderError]], ...] = (
    (("rate_limit", "resource_exhausted"), RateLimited),
    (("auth", "api_key", "permission"), AuthFailed),
    (("invalid_request", "invalid_argument", "not_found"), BadRequest),
)
"""Words in an error's names and the kind they mean when no status says it (first match wins)."""


def classify(status: int | None, names: frozenset[str], message: str) -> tuple[type[ProviderError], dict[str, Any]]:
    """The kind of error and its extra ``details`` for an error with this HTTP status (``None`` inside a
    stream), these lower-cased names (its ``type``, ``code`` and ``status`` fields) and this message."""

    def named(*words: str) -> bool:
        return any(word in name for name in names for word in words)

    if named("insufficient_quota"):
        return RateLimited, {"insufficient_quota": True}
    if (status is None or status in (400, 413, 422)) and (named("context_length") or _CONTEXT_OVERFLOW.search(message)):
        return ContextOverflow, {}
    if (status is None or status == 400) and _INVALID_KEY.search(message):
        return AuthFailed, {}
    if status is not None:
        return _kind_for_status(status), {}
    for words, kind in _BY_NAME:
        if named(*words):
            return kind, {}
    return ProviderUnavailable, {}  # overloaded, server_error, unavailable, or unknown: the provider's side


def _kind_for_status(status: int) -> type[ProviderError]:
    if status in (401, 403):
        return AuthFailed
    if status == 408:
        return RequestTimeout
    if status == 429:
        return RateLimited
    if status >= 500:
        return ProviderUnavailable
    return BadRequest


def is_retryable(error: ProviderError) -> bool:
    """Whether another attempt may succeed: rate limits, overload (the HTTP statuses of ``RETRY_STATUSES``),
    broken connections and timeouts; never an exhausted quota."""
    if error.details.get("insufficient_quota"):
        return False
    if error.status is not None and not isinstance(error, TransportError | RequestTimeout):
        return error.status in RETRY_STATUSES
    return isinstance(error, RateLimited | ProviderUnavailable | TransportError | RequestTimeout)


def error_for_response(provider: str, status: int, body: str, headers: Any) -> ProviderError:
    """The ``ProviderError`` for an HTTP error response, with the provider's message and request id."""
    data = _json_or_none(body)
    message, code = provider_message(body)
    code = code or _aws_error_type(headers)
    kind, details = classify(status, _names(data), message)
    return kind(
        f"{provider} returned HTTP {status}: {message}",
        status=status,
        provider_message=message,
        request_id=_first_header(
            headers, "x-request-id", "request-id", "x-goog-request-id", "x-amzn-requestid", "cf-ray"
        )
        or _body_request_id(data),
        retry_after=retry_after(headers),
        details=({"provider_code": code} if code else {}) | details,
    )


def error_for_payload(provider: str, payload: Any) -> ProviderError:
    """The ``ProviderError`` for an error object sent inside a stream (see the module docstring)."""
    message, code = provider_message(json.dumps(payload))
    names = _names(payload)
    status = next((int(name) for name in names if name.isdigit() and int(name) >= 400), None)
    kind, details = classify(status, names, message)
    return kind(
        f"{provider} reported an error in the stream: {message}",
        provider_message=message,
        details=({"provider_code": code} if code else {}) | details,
    )


def _names(data: Any) -> frozenset[str]:
    """The lower-cased ``type``, ``code`` and ``status`` of the error object in ``data``."""
    if isinstance(data, list) and data and isinstance(data[0], dict):  # Gemini streams errors as [ {...} ]
        data = data[0]
    error = data.get("error", data) if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return frozenset()
    return frozenset(str(error[key]).lower() for key in ("type", "code", "status") if error.get(key) is not None)


def _aws_error_type(headers: Any) -> str | None:
    """An AWS service's error name (Bedrock's ``x-amzn-ErrorType: ThrottlingException:http://...``)."""
    value = _first_header(headers, "x-amzn-errortype")
    return value.partition(":")[0] or None if value is not None else None


def _json_or_none(body: str) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


def _body_request_id(data: Any) -> str | None:
    """The request id some providers (Anthropic) also write into an error body."""
    request_id = data.get("request_id") if isinstance(data, dict) else None
    return request_id if isinstance(request_id, str) else None


def provider_message(body: str) -> tuple[str, str | None]:
    """The human message and the machine code in an error body, whichever of the usual shapes it has."""
    data = _json_or_none(body)
    if data is None:
        return (body.strip()[:500] or "(empty body)"), None
    if isinstance(data, list) and data and isinstance(data[0], dict):  # Gemini streams errors as [ {...} ]
        data = data[0]
    error = data.get("error", data) if isinstance(data, dict) else data
    if isinstance(error, str):
        return error[:500], None
    if not isinstance(error, dict):
        return str(error)[:500], None
    message = error.get("message") or error.get("detail") or data.get("message") or json.dumps(error)[:500]
    upstream = (error.get("metadata") or {}).get("raw") if isinstance(error.get("metadata"), dict) else None
    if isinstance(upstream, str) and upstream not in str(message):  # a gateway's wrapper around the real reason
        message = f"{message}: {upstream}"
    code = error.get("code") or error.get("type") or error.get("status")
    return str(message)[:1000], (str(code) if code is not None else None)


def retry_after(headers: Any) -> float | None:
    """Seconds to wait, from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    milliseconds = _first_header(headers, "retry-after-ms")
    if milliseconds is not None:
        try:
            wait = float(milliseconds) / 1000
        except ValueError:
            pass
        else:
            if math.isfinite(wait):
                return wait
    value = _first_header(headers, "retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        return seconds if math.isfinite(seconds) else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _first_header(headers: Any, *names: str) -> str | None:
    for name in names:
        value = headers.get(name)
        if value is not None:
            return str(value)
    return None
