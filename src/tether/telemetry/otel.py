"""OpenTelemetry spans and metrics for a run (GenAI semantic conventions)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tether.telemetry import Telemetry
    from tether.telemetry.observer import RunObserver
    from tether.telemetry.redact import Redaction


def otel_observer(settings: Telemetry, redaction: Redaction) -> RunObserver | None:
    """The OpenTelemetry observer of a run, or ``None`` when no tracer or meter provider is configured."""
    return None
