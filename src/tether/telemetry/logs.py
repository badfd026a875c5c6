"""Log records of a run on the standard ``logging`` module."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tether.telemetry.observer import RunObserver
    from tether.telemetry.redact import Redaction


def log_observer(redaction: Redaction) -> RunObserver | None:
    """The logging observer of a run, or ``None`` when tether's loggers are silent."""
    return None
