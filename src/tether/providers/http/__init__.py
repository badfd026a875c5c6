"""The HTTP layer every wire provider speaks through, in layers (the contract is ``client.py``'s docstring).

* ``pool.py``: one pooled ``aiohttp.ClientSession`` per event loop and origin;
* ``attempt.py``: one attempt: posted once, redirects refused, the status mapped to an error;
* ``retry.py``: the one retry ladder around attempts, for streamed and whole answers;
* ``body.py``: how much of an answer is read, and a whole body's JSON;
* ``sse.py``: server-sent events framed from the bytes of a stream; ``stream.py``: a stream read chunk by chunk;
* ``errors.py``: one mapping from HTTP statuses and in-stream errors to ``ProviderError``s;
* ``client.py``: ``HttpClient``, the layers composed, the protocol's decoder fed where the bytes are read.

This face hands on the names providers and their users need; the modules import each other directly.
"""

from tether.providers.http.attempt import redirect_error
from tether.providers.http.body import ResponseLimits, parse_json
from tether.providers.http.client import HttpClient, Secret, parse_event_json
from tether.providers.http.errors import (
    RETRY_STATUSES,
    error_for_payload,
    error_for_response,
    is_retryable,
    provider_message,
    retry_after,
)
from tether.providers.http.pool import MAX_CONNECTIONS, close_sessions, origin_of, session_for
from tether.providers.http.retry import RetryPolicy

__all__ = [
    "MAX_CONNECTIONS",
    "RETRY_STATUSES",
    "HttpClient",
    "ResponseLimits",
    "RetryPolicy",
    "Secret",
    "close_sessions",
    "error_for_payload",
    "error_for_response",
    "is_retryable",
    "origin_of",
    "parse_event_json",
    "parse_json",
    "provider_message",
    "redirect_error",
    "retry_after",
    "session_for",
]
