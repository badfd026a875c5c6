"""The results the executor writes itself: a refusal, a failure, a timeout, an error of the model's making, and
an output cut to its limit (``executor.py`` says when each is written)."""

from __future__ import annotations

from tether.errors import TetherError
from tether.messages import ToolCall, ToolResult
from tether.tools.base import Tool


def error_result(call: ToolCall, error: TetherError) -> ToolResult:
    return ToolResult(call.id, call.name, error.message, is_error=True, code=error.code)


def denied_result(call: ToolCall, reason: str) -> ToolResult:
    return ToolResult(call.id, call.name, f"Permission denied: {reason}.", is_error=True, code="permission_denied")


def clip(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters: head and tail kept, the middle replaced by a marker."""
    keep = max(limit - 120, 0)
    head, tail = keep * 2 // 3, keep - keep * 2 // 3
    cut = len(text) - head - tail
    marker = f"\n\n[... {cut} characters cut from the middle of this output ...]\n\n"
    return text[:head] + marker + (text[-tail:] if tail else "")


def failure_result(call: ToolCall, exc: BaseException) -> ToolResult:
    message = f"Tool {call.name!r} failed: {describe_exception(exc)}"
    return ToolResult(call.id, call.name, message, is_error=True, code="tool_failed")


def describe_exception(exc: BaseException) -> str:
    """``Type: message`` of an exception, whatever it is: one whose ``__str__`` raises is still described."""
    name = type(exc).__name__
    try:
        detail = str(exc)
    except BaseException:  # noqa: BLE001 - a hostile __str__ must not take the loop down either
        return f"{name} (its message could not be read)"
    return f"{name}: {detail}" if detail else name


def timeout_result(call: ToolCall, tool: Tool, timeout: float | None) -> ToolResult:
    fate = (
        "was cancelled"
        if tool.is_async
        else "was abandoned (a synchronous tool's thread cannot be stopped and may still be running)"
    )
    message = f"Tool {call.name!r} did not finish within {timeout:g} s and {fate}."
    return ToolResult(call.id, call.name, message, is_error=True, code="tool_timeout")
