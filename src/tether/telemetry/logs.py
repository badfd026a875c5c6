"""Log records of a run on the standard ``logging`` module: silent unless the application turns them on.

**Loggers.** ``tether.loop`` (run start and end, provider calls, run errors), ``tether.tools`` (tool calls),
``tether.providers`` (retries). Other subsystems log on their own ``tether.*`` loggers (``tether.sessions``,
``tether.mcp``).

**Levels.** Per run: ``run_started`` and ``run_completed`` at INFO. Per step: ``turn`` (one per provider call)
and ``tool_call`` at DEBUG, so an application logging at INFO gets two lines per run, whatever the number of
steps, and ``-v`` on the command line shows runs while ``-vv`` shows every step. Trouble: ``retry`` at WARNING
(the provider failed and is tried again), and ``error`` at WARNING when a run stops on an error
(``error``, ``invalid_response``, ``timeout``), with its stable error code, before that run's
``run_completed``.

**Records.** The message is a short sentence (``run 3f2a1b2c started: openai:gpt-4o-mini``, ``tool add ok in
0.4 ms``); the data rides in ``extra`` fields, so a JSON formatter gets it whole: always ``run_id`` and
``event`` (one of :data:`EVENTS`), ``turn`` where there is one, and the event's own fields (see
:data:`FIELDS`). No field shadows an attribute of ``logging.LogRecord``.

**Redaction.** Everything shown passes through the run's :class:`~tether.redaction.Redaction`: error
messages and details have known keys and bearer tokens masked; tool arguments, on ``tool_call`` records
only (DEBUG), have secret-named values hidden. Prompts, answers and tool results are never logged.

**Silence and cost.** ``tether`` carries a ``NullHandler`` (``tether/_logging.py``), so Python's last-resort
handler never prints tether's warnings for an application that configured no logging. When a run starts,
:func:`log_observer` reads once how logging is set up:

* no handler other than a ``NullHandler`` on the way from tether's loggers to the root, or none of them
  enabled for what they emit: no observer at all (``None``), and the loop calls nothing;
* enabled for WARNING but not INFO (``logging.basicConfig()`` with no level): an observer whose per-step
  hooks return after one attribute test; only retries and run errors are logged;
* INFO or DEBUG: the records of those levels. Levels are read when the run starts: a change takes effect
  from the next run.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from tether._logging import get_logger
from tether.telemetry.observer import RunObserver

if TYPE_CHECKING:
    from tether.errors import ProviderError
    from tether.events import RunResult, ToolCallRecord, TurnRecord
    from tether.messages import Message, ToolCall, ToolResult
    from tether.providers.base import ModelInfo, Request
    from tether.redaction import Redaction
    from tether.telemetry.observer import RunInfo

__all__ = ["ERROR_STOPS", "EVENTS", "FIELDS", "LOGGERS", "LogObserver", "duration_text", "log_observer"]

LOOP = get_logger("tether.loop")
TOOLS = get_logger("tether.tools")
PROVIDERS = get_logger("tether.providers")
LOGGERS = (LOOP, TOOLS, PROVIDERS)

EVENTS = ("run_started", "run_completed", "turn", "tool_call", "retry", "error")
"""The values of a record's ``event`` field."""

FIELDS: dict[str, tuple[str, ...]] = {
    "run_started": ("model", "provider", "agent_name", "session_id", "tool_count"),
    "turn": (
        "attempt", "final", "model", "duration_ms", "ttft_ms", "finish_reason", "input_tokens", "output_tokens",
        "cache_read_tokens", "reasoning_tokens", "retries", "rejected", "error_code",
    ),
    "tool_call": ("tool", "call_id", "duration_ms", "is_error", "code", "exception", "arguments"),
    "retry": ("model", "attempt", "wait_s", "error_code", "error_message"),
    "error": ("model", "stop_reason", "error_code", "detail"),
    "run_completed": (
        "model", "stop_reason", "turns", "duration_ms", "input_tokens", "output_tokens", "cache_read_tokens",
        "reasoning_tokens", "requests", "cost_usd", "degraded",
    ),
}  # fmt: skip
"""The ``extra`` fields of each event, besides ``run_id``, ``event`` and ``turn``."""

ERROR_STOPS = frozenset({"error", "invalid_response", "timeout"})
"""Stop reasons that make a run's end a WARNING (``error`` record)."""


def log_observer(redaction: Redaction) -> RunObserver | None:
    """The logging observer of a run, or ``None`` when tether's records would go nowhere (module docstring)."""
    loop, tools, providers = LOGGERS
    errors = loop.isEnabledFor(logging.WARNING)
    retries = providers.isEnabledFor(logging.WARNING)
    tool_calls = tools.isEnabledFor(logging.DEBUG)
    if not (errors or retries or tool_calls) or not _handled():
        return None
    return LogObserver(
        redaction,
        runs=loop.isEnabledFor(logging.INFO),
        turns=loop.isEnabledFor(logging.DEBUG),
        tools=tool_calls,
        retries=retries,
        errors=errors,
    )


def _handled() -> bool:
    """Whether a record of tether's loggers reaches a handler that is not a ``NullHandler``."""
    for logger in LOGGERS:
        current: logging.Logger | None = logger
        while current is not None:
            for handler in current.handlers:
                if type(handler) is not logging.NullHandler:
                    return True
            current = current.parent if current.propagate else None
    return False


class LogObserver(RunObserver):
    """Writes one record per run start and end, provider call, tool call, retry and run error (module
    docstring); the flags say which of them the loggers' levels let through, read once per run."""

    __slots__ = ("_errors", "_retries", "_runs", "_tools", "_turns", "model", "redaction", "run_id", "short", "turn")

    def __init__(
        self,
        redaction: Redaction,
        *,
        runs: bool = True,
        turns: bool = True,
        tools: bool = True,
        retries: bool = True,
        errors: bool = True,
    ) -> None:
        self.redaction = redaction
        self._runs, self._turns, self._tools, self._retries, self._errors = runs, turns, tools, retries, errors
        self.run_id = self.short = self.model = ""
        self.turn: int | None = None

    def run_started(self, run: RunInfo) -> None:
        self.run_id, self.short, self.model = run.run_id, run.run_id[:8], run.model_string
        if self._runs:
            fields = {
                "model": self.model,
                "provider": run.provider,
                "agent_name": run.agent_name,
                "session_id": run.session_id,
                "tool_count": len(run.tools),
            }
            self._log(LOOP, logging.INFO, "run_started", f"run {self.short} started: {self.model}", fields)

    def call_started(self, turn: int, attempt: int, final: bool, request: Request) -> None:
        self.turn = turn

    def retry(self, error: ProviderError, attempt: int, wait: float) -> None:
        if not self._retries:
            return
        code = getattr(error, "code", type(error).__name__)
        message = self.redaction.text(getattr(error, "message", str(error)))
        fields = {"model": self.model, "attempt": attempt, "wait_s": wait, "error_code": code, "error_message": message}
        text = f"retry {attempt} of {self.model} after {code}, waiting {wait:.2f} s"
        self._log(PROVIDERS, logging.WARNING, "retry", text, fields)

    def fell_back(self, error: ProviderError, failed: ModelInfo, to: ModelInfo) -> None:
        if not self._retries:
            return
        message = self.redaction.text(error.message)
        fields = {"model": failed.model_string, "next_model": to.model_string, "error_code": error.code,
                  "error_message": message}  # fmt: skip
        text = f"{failed.model_string} failed ({error.code}): asking {to.model_string}"
        self._log(PROVIDERS, logging.WARNING, "fallback", text, fields)

    def call_ended(self, record: TurnRecord, message: Message, error: BaseException | None) -> None:
        if self._turns:
            self._log(LOOP, logging.DEBUG, "turn", self._turn_text(record), self._turn_fields(record))

    def _turn_text(self, record: TurnRecord) -> str:
        usage = record.usage
        head = f"turn {record.turn}" + (f" attempt {record.attempt}" if record.attempt > 1 else "")
        head += " (final)" if record.final else ""
        outcome = f"failed ({record.error})" if record.error else record.finish_reason
        text = f"{head}: {outcome} in {duration_text(record.duration_ms)}"
        text += f", {usage.input_tokens} in / {usage.output_tokens} out tokens"
        if record.retries:
            text += f", {record.retries} {'retry' if record.retries == 1 else 'retries'}"
        if record.rejected:
            text += f", rejected: {self.redaction.text(record.rejected)}"
        return text

    def _turn_fields(self, record: TurnRecord) -> dict[str, Any]:
        usage = record.usage
        return {
            "turn": record.turn,
            "attempt": record.attempt,
            "final": record.final,
            "model": record.model or self.model,
            "duration_ms": record.duration_ms,
            "ttft_ms": record.ttft_ms,
            "finish_reason": record.finish_reason,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cache_read_tokens": usage.cache_read_tokens,
            "reasoning_tokens": usage.reasoning_tokens,
            "retries": record.retries,
            "rejected": self.redaction.text(record.rejected) if record.rejected else None,
            "error_code": record.error,
        }

    def tool_ended(
        self, call: ToolCall, result: ToolResult, record: ToolCallRecord, exception: BaseException | None
    ) -> None:
        if not self._tools:
            return
        if record.is_error:
            text = f"tool {record.name} failed ({record.code or 'error'})"
        else:
            text = f"tool {record.name} ok" + (f" ({record.code})" if record.code else "")
        text += f" in {duration_text(record.duration_ms)}" if record.duration_ms is not None else ", not run"
        fields = {
            "tool": record.name,
            "call_id": record.call_id,
            "duration_ms": record.duration_ms,
            "is_error": record.is_error,
            "code": record.code,
            "exception": type(exception).__name__ if exception is not None else None,
            "arguments": self.redaction.arguments(call.arguments),
        }
        self._log(TOOLS, logging.DEBUG, "tool_call", text, fields)

    def run_ended(self, result: RunResult) -> None:
        stop = str(result.stop_reason)
        if self._errors and stop in ERROR_STOPS:
            code = getattr(result.error, "code", None) or stop
            detail = self.redaction.text(result.detail)
            fields = {"model": self.model, "stop_reason": stop, "error_code": code, "detail": detail}
            text = f"run {self.short} stopped on {stop} ({code}): {detail}"
            self._log(LOOP, logging.WARNING, "error", text, fields)
        if self._runs:
            text = _run_text(self.short, result)
            self._log(LOOP, logging.INFO, "run_completed", text, _run_fields(self.model, result))

    def _log(self, logger: logging.Logger, level: int, event: str, text: str, fields: dict[str, Any]) -> None:
        extra: dict[str, Any] = {"run_id": self.run_id, "event": event}
        if self.turn is not None:
            extra["turn"] = self.turn
        extra.update(fields)
        logger.log(level, text, extra=extra)


def _run_text(short: str, result: RunResult) -> str:
    usage = result.usage
    turns = f"{result.turns} turn{'' if result.turns == 1 else 's'}"
    text = f"run {short} {result.stop_reason} after {turns} in {duration_text(result.duration_ms)}"
    return text + f", {usage.input_tokens} in / {usage.output_tokens} out tokens"


def _run_fields(model: str, result: RunResult) -> dict[str, Any]:
    usage = result.usage
    return {
        "model": model,
        "stop_reason": str(result.stop_reason),
        "turns": result.turns,
        "duration_ms": result.duration_ms,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "requests": usage.requests,
        "cost_usd": result.cost.total_usd if result.cost is not None else None,
        "degraded": result.degraded,
    }


def duration_text(ms: float) -> str:
    """``0.4 ms``, ``412 ms``, ``1.2 s``: a duration as the log records and the CLI's trace show it."""
    if ms < 10:
        return f"{ms:.1f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    return f"{ms / 1000:.1f} s"
