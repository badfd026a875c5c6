"""Telemetry: OpenTelemetry spans and metrics, a logging sink, and redaction (``docs/observability.md``).

A run is observed through a :class:`~tether.telemetry.observer.RunObserver` that :func:`observer_for` builds
when the run starts:

* OpenTelemetry spans and metrics, following the GenAI semantic conventions, when a tracer or meter
  provider is configured (globally, or passed in :class:`Telemetry`) and ``opentelemetry-api`` is installed
  (``tether[otel]``);
* log records on the standard ``logging`` module (``tether.loop``, ``tether.tools``, ``tether.providers``),
  when the application enables them.

When none of these is wanted, ``observer_for`` returns ``None`` and the loop calls nothing: OpenTelemetry is
not even imported unless the application imported it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tether.telemetry.logs import log_observer
from tether.telemetry.observer import Fanout, RunInfo, RunObserver
from tether.telemetry.redact import DEFAULT_SECRET_ARGUMENTS, Redaction

__all__ = [
    "CAPTURE_CONTENT_VARIABLE",
    "DEFAULT_SECRET_ARGUMENTS",
    "Redaction",
    "RunInfo",
    "RunObserver",
    "Telemetry",
    "observer_for",
]

CAPTURE_CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""The environment variable the GenAI conventions name for capturing message content (``true`` to capture)."""


@dataclass(frozen=True, slots=True)
class Telemetry:
    """How an agent's runs are observed: ``Agent(..., telemetry=Telemetry(...))``; ``telemetry=False``: not at all.

    By default (``telemetry=None``) runs use OpenTelemetry's global tracer and meter providers when the
    application configured them, and log records when it enabled logging.
    """

    tracer_provider: Any = None
    """An OpenTelemetry ``TracerProvider``; ``None``: the global one, if one is configured."""
    meter_provider: Any = None
    """An OpenTelemetry ``MeterProvider``; ``None``: the global one, if one is configured."""
    capture_content: bool | None = None
    """Put prompts, answers, tool arguments and results on spans (redacted). ``None``: as the environment
    variable ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` says; off when it is not set."""
    agent_name: str | None = None
    """``gen_ai.agent.name`` on the run's span, and in its name (``invoke_agent <name>``)."""
    secret_arguments: Sequence[str] = field(default=DEFAULT_SECRET_ARGUMENTS)
    """Tool argument names whose values are hidden in spans, logs and the CLI (``telemetry/redact.py``)."""
    logs: bool = True
    """Emit log records (they are still silent unless the application configures logging)."""
    observers: Sequence[Callable[[], RunObserver]] = ()
    """Factories of more observers, called once per run: a host's own :class:`RunObserver` (an exporter to a
    tool that does not speak OpenTelemetry, a test)."""

    def redaction(self, masker: Any = None) -> Redaction:
        """The :class:`Redaction` these settings ask for, masking ``masker``'s known keys."""
        return Redaction(masker, self.secret_arguments)


DISABLED = Telemetry(logs=False, observers=())
"""What ``telemetry=False`` means."""


def observer_for(settings: Telemetry, redaction: Redaction) -> RunObserver | None:
    """The observer of one run, or ``None`` when nothing observes it (the loop then calls nothing)."""
    if settings is DISABLED:
        return None
    observers = [make() for make in settings.observers] if settings.observers else []
    if (
        settings.tracer_provider is not None
        or settings.meter_provider is not None
        or "opentelemetry.trace" in sys.modules
        or "opentelemetry.metrics" in sys.modules
    ):
        from tether.telemetry.otel import otel_observer

        if (otel := otel_observer(settings, redaction)) is not None:
            observers.append(otel)
    if settings.logs and (log := log_observer(redaction)) is not None:
        observers.append(log)
    if not observers:
        return None
    return observers[0] if len(observers) == 1 else Fanout(observers)
