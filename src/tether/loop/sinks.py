"""The host's event sinks of one run: every event is handed to each, and a sink that raises stops the run.

A sink (``Agent(on_event=...)``, ``run(on_event=...)``) must not block and should not raise. One that raises is
dropped at once, the run's other sinks and its consumer still get every event, and the run stops with
``error`` after the step it raised in, saying which sink failed and how: the failure is reported, never lost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tether.events import RunEvent
from tether.limits import StopReason
from tether.loop.guard import Stop

EventSink = Callable[[RunEvent], None]


class Sinks:
    """The sinks of one run (see the module docstring); call it with an event to hand it to each."""

    __slots__ = ("error", "sinks")

    def __init__(self, sinks: Sequence[EventSink]) -> None:
        self.sinks: tuple[EventSink, ...] = tuple(sinks)
        """A tuple, the shared empty one without sinks: a run waiting on its provider holds one object fewer."""
        self.error: Exception | None = None
        """What the first sink that raised raised."""

    def __call__(self, event: RunEvent) -> None:
        for sink in self.sinks:
            try:
                sink(event)
            except Exception as error:  # noqa: BLE001 - reported as the run's error, not lost
                self.sinks = tuple(kept for kept in self.sinks if kept is not sink)
                self.error = self.error or error

    def stop(self) -> Stop | None:
        """The stop a sink that raised asks for, or ``None``."""
        error = self.error
        if error is None:
            return None
        return Stop(StopReason.ERROR, f"an event sink raised {type(error).__name__}: {error}", error)


NO_SINKS = Sinks(())
"""The sinks of a run that has none: shared (with no sink, nothing ever changes in it), one object fewer a run."""
