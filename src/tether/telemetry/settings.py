"""How an agent's runs are observed (:class:`Telemetry`), as the host sets it: read by the observers below it
(``otel.py``, ``logs.py``) and by :func:`~tether.telemetry.observer_for`, which builds a run's observer from it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tether.redaction import DEFAULT_SECRET_ARGUMENTS, Redaction
from tether.telemetry.observer import RunObserver

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
    """Tool argument names whose values are hidden in spans, logs and the CLI (``redaction.py``)."""
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
