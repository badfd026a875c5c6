"""A span around a piece of tether's own work (an MCP request, ...), made only when OpenTelemetry is in use.

:func:`child_span` costs nothing when ``opentelemetry.trace`` was never imported: it hands back a shared
context manager that does nothing, without importing OpenTelemetry. Otherwise the span comes from the *global*
tracer provider (an application that configured one wants it) as a child of the current context: inside a
tool's code that is the tool's ``execute_tool`` span (``tether.telemetry.otel``). Within a run observed with
a tracer provider of its own (``Telemetry(tracer_provider=...)``), the run's tracer is in the context
(:func:`tracer_key`) and the span is made with it, so it lands where the run's spans go. A span whose block raises
gets status ERROR and ``error.type`` (the error's stable code, else its type's name), unless the block set
``error.type`` itself.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any

__all__ = ["child_span", "tracer_key", "tracing"]

_NOTHING: AbstractContextManager[Any] = nullcontext(None)
_KEY: list[str] = []


def tracer_key() -> str:
    """The OpenTelemetry context key under which a run's context carries the run's tracer."""
    if not _KEY:
        from opentelemetry.context import create_key

        _KEY.append(create_key("tether-tracer"))
    return _KEY[0]


def tracing() -> bool:
    """Whether spans may be made at all: OpenTelemetry's tracing API was imported by someone."""
    return "opentelemetry.trace" in sys.modules


def child_span(name: str, attributes: Mapping[str, Any], *, client: bool = True) -> AbstractContextManager[Any]:
    """A context manager giving the span (or ``None`` when OpenTelemetry is not in use) of the block it wraps."""
    if "opentelemetry.trace" not in sys.modules:
        return _NOTHING
    return _ChildSpan(name, attributes, client)


class _ChildSpan(AbstractContextManager[Any]):
    __slots__ = ("_attributes", "_client", "_name", "_scope", "_span")

    def __init__(self, name: str, attributes: Mapping[str, Any], client: bool) -> None:
        self._name = name
        self._attributes = attributes
        self._client = client
        self._span: Any = None
        self._scope: Any = None

    def __enter__(self) -> Any:
        from opentelemetry import context, trace

        kind = trace.SpanKind.CLIENT if self._client else trace.SpanKind.INTERNAL
        tracer: Any = context.get_value(tracer_key()) or trace.get_tracer("tether")
        self._span = span = tracer.start_span(self._name, kind=kind, attributes=dict(self._attributes))
        self._scope = trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False)
        self._scope.__enter__()
        return span

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, traceback: Any) -> None:
        span, scope = self._span, self._scope
        self._span = self._scope = None
        try:
            if error is not None and span.is_recording():
                _failed(span, error)
        finally:
            scope.__exit__(kind, error, traceback)
            span.end()


def _failed(span: Any, error: BaseException) -> None:
    from opentelemetry.trace import Status, StatusCode

    from tether.redaction import Redaction

    attributes = getattr(span, "attributes", None) or {}
    if "error.type" not in attributes:
        code = getattr(error, "code", None)
        span.set_attribute("error.type", code if isinstance(code, str) else type(error).__qualname__)
    message = getattr(error, "message", None)
    span.set_status(Status(StatusCode.ERROR, Redaction().text(message if isinstance(message, str) else str(error))))
