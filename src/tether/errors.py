"""The errors tether raises, each with a stable machine-readable ``code``.

Codes are part of the public API (ARCHITECTURE.md §3): callers branch on ``error.code``, never on message text or
class names, so a code never changes meaning once released. Messages are for people and may improve.

Errors that are the model's fault (``tool_not_found``, ``invalid_arguments``, ``tool_failed``,
``tool_timeout``, ``permission_denied``) never escape the loop: they become error tool results the model reads.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

ErrorCode = Literal[
    "rate_limited",
    "auth_failed",
    "bad_request",
    "context_overflow",
    "provider_unavailable",
    "timeout",
    "transport",
    "invalid_response",
    "invalid_output",
    "tool_not_found",
    "invalid_arguments",
    "tool_failed",
    "tool_timeout",
    "permission_denied",
    "config_invalid",
    "secret_unavailable",
    "skill_invalid",
    "session_invalid",
    "store_unavailable",
    "format_unsupported",
    "decision_invalid",
    "state_invalid",
    "cancelled",
    "download_failed",
    "checksum_mismatch",
    "script_exhausted",
    "content_filter",
    "empty_answer",
    "guardrail",
    "worker_alive",
]


class TetherError(Exception):
    """Base of every error tether raises on purpose; ``code`` says what kind of failure it is."""

    code: ClassVar[ErrorCode]

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details or {}

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


# --- provider errors: what a model endpoint did wrong or could not do -------------------------------------


class ProviderError(TetherError):
    """A provider call failed; carries the HTTP status, the provider's own message and its request id.

    ``retry_after`` is the wait in seconds the provider asked for (``Retry-After``), when it said.
    """

    code: ClassVar[ErrorCode] = "bad_request"

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        provider_message: str | None = None,
        request_id: str | None = None,
        retry_after: float | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message, details=details)
        self.status = status
        self.provider_message = provider_message
        self.request_id = request_id
        self.retry_after = retry_after


class RateLimited(ProviderError):
    """HTTP 429 or an in-band rate limit."""

    code: ClassVar[ErrorCode] = "rate_limited"


class AuthFailed(ProviderError):
    """The API key is missing, wrong or lacks access to the model."""

    code: ClassVar[ErrorCode] = "auth_failed"


class BadRequest(ProviderError):
    """The provider rejected the request as malformed (HTTP 400, 404, 422)."""

    code: ClassVar[ErrorCode] = "bad_request"


class ContextOverflow(ProviderError):
    """The conversation no longer fits the model's context window."""

    code: ClassVar[ErrorCode] = "context_overflow"


class ProviderUnavailable(ProviderError):
    """The provider is down or overloaded (5xx, 529, Anthropic ``overloaded_error``)."""

    code: ClassVar[ErrorCode] = "provider_unavailable"


class TransportError(ProviderError):
    """The connection failed or broke: DNS, refused, reset, TLS."""

    code: ClassVar[ErrorCode] = "transport"


class RequestTimeout(ProviderError):
    """The provider did not answer in time: no connection, no first byte, or a stream that went quiet."""

    code: ClassVar[ErrorCode] = "timeout"


class InvalidResponse(ProviderError):
    """The provider answered with something that is not a usable turn (malformed stream, empty answer)."""

    code: ClassVar[ErrorCode] = "invalid_response"


class TimeoutExceeded(TetherError):
    """A deadline passed: a request, a step or the whole run (``details['deadline']`` says which)."""

    code: ClassVar[ErrorCode] = "timeout"


# --- tool errors: the model's fault; they become error tool results -----------------------------------------


class ToolError(TetherError):
    """Raise from a tool to send the model a plain message (no exception type) as an error result."""

    code: ClassVar[ErrorCode] = "tool_failed"


class ToolNotFound(ToolError):
    """The model asked for a tool that does not exist."""

    code: ClassVar[ErrorCode] = "tool_not_found"


class InvalidArguments(ToolError):
    """The model's arguments are not valid JSON or do not match the tool's schema."""

    code: ClassVar[ErrorCode] = "invalid_arguments"


class ToolTimeout(ToolError):
    """A tool did not finish within its timeout."""

    code: ClassVar[ErrorCode] = "tool_timeout"


class PermissionDenied(ToolError):
    """A tool call was refused: a permission decision, a limit, or a path outside the workspace."""

    code: ClassVar[ErrorCode] = "permission_denied"


class InvalidOutput(TetherError):
    """A typed output failed its validation after every retry: the run's error when it stops as
    ``invalid_output``, never raised out of a run. ``raw`` is the model's last answer (the JSON or the text it
    gave), ``errors`` what was wrong with it, one line each."""

    code: ClassVar[ErrorCode] = "invalid_output"

    def __init__(self, message: str, *, raw: str, errors: tuple[str, ...]) -> None:
        super().__init__(message, details={"raw": raw, "errors": list(errors)})
        self.raw = raw
        self.errors = errors

    def __reduce__(self) -> tuple[Any, ...]:  # kept by a durable run's result: pickled with its keywords
        return (_invalid_output, (self.message, self.raw, self.errors))


def _invalid_output(message: str, raw: str, errors: tuple[str, ...]) -> InvalidOutput:
    return InvalidOutput(message, raw=raw, errors=errors)


class GuardrailBlocked(TetherError):
    """A guardrail blocked the run's input or its answer (``tether.team.guardrails``): the run's error when it
    stops as ``guardrail``, never raised out of a run. ``guardrail`` is its name, the message its words."""

    code: ClassVar[ErrorCode] = "guardrail"

    def __init__(self, message: str, *, guardrail: str) -> None:
        super().__init__(message, details={"guardrail": guardrail})
        self.guardrail = guardrail

    def __reduce__(self) -> tuple[Any, ...]:  # kept by a durable run's result: pickled with its keywords
        return (_guardrail_blocked, (self.message, self.guardrail))


def _guardrail_blocked(message: str, guardrail: str) -> GuardrailBlocked:
    return GuardrailBlocked(message, guardrail=guardrail)


# --- host errors: configuration and stored state -------------------------------------------------------------


class ConfigInvalid(TetherError):
    """The agent, its limits or a configuration file are invalid; raised before any model call."""

    code: ClassVar[ErrorCode] = "config_invalid"


class WorkerAlive(ConfigInvalid):
    """A durable runs' process id is held by a live process (its heartbeat is recent): taking it, recovering its
    runs or resuming a run it is running would run them twice (``tether.durable.liveness``)."""

    code: ClassVar[ErrorCode] = "worker_alive"


class SessionInvalid(TetherError):
    """Stored messages are corrupt, truncated or not a valid transcript."""

    code: ClassVar[ErrorCode] = "session_invalid"


class StoreUnavailable(TetherError):
    """A session store or a workflow database cannot be written or reached: a read-only directory, a full disk,
    a database locked by another process, a server out of reach. Stores themselves raise the ``OSError`` or
    database error they meet (``sessions/base.py``); a health check reports it under this code."""

    code: ClassVar[ErrorCode] = "store_unavailable"


class FormatUnsupported(TetherError):
    """A stored value this version of tether cannot read: written by a newer format version, or damaged, or
    naming a type that no longer exists here. The message says which, and why."""

    code: ClassVar[ErrorCode] = "format_unsupported"


class DecisionInvalid(TetherError):
    """The decisions given to resume a paused run do not fit its pending calls: an unknown call id, a call left
    undecided, a digest that is not the call's arguments', an ``Approve`` for an external call or an
    ``ExternalResult`` for one that needs approval. ``details["calls"]`` names the call ids; nothing was run."""

    code: ClassVar[ErrorCode] = "decision_invalid"


class StateInvalid(TetherError):
    """A paused run's stored state cannot be read: not JSON, or not the shape ``PausedRun.to_json`` writes (a
    newer format version is :class:`FormatUnsupported` instead)."""

    code: ClassVar[ErrorCode] = "state_invalid"


class Cancelled(TetherError):
    """The run or a tool call was cancelled by its host."""

    code: ClassVar[ErrorCode] = "cancelled"


# --- model files fetched from a hub ---------------------------------------------------------------------------


class DownloadFailed(TetherError):
    """A model file could not be fetched: the hub out of reach, a repository or revision it does not have, an
    answer that does not say what the file should be. What was downloaded so far is kept for the next try."""

    code: ClassVar[ErrorCode] = "download_failed"


class ChecksumMismatch(DownloadFailed):
    """A downloaded model file is not the one the hub describes (its SHA-256 differs); it was deleted."""

    code: ClassVar[ErrorCode] = "checksum_mismatch"
