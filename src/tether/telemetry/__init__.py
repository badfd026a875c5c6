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

from tether.redaction import DEFAULT_SECRET_ARGUMENTS, Redaction
from tether.telemetry.logs import log_observer
from tether.telemetry.observer import Fanout, RunInfo, RunObserver
from tether.telemetry.settings import CAPTURE_CONTENT_VARIABLE, DISABLED, Telemetry

__all__ = [
    "CAPTURE_CONTENT_VARIABLE",
    "DEFAULT_SECRET_ARGUMENTS",
    "DISABLED",
    "Redaction",
    "RunInfo",
    "RunObserver",
    "Telemetry",
    "observer_for",
]


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
