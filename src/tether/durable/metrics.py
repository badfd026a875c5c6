"""The durable engine's metrics, through OpenTelemetry's meter: what an operator of workers watches.

Why: a run's own metrics (``tether.telemetry``) say what a model call cost; they do not say how deep a queue
is, how many runs a worker holds, or how many it took up again after another died. These do, from the
process that runs the runs (a worker, a batch, a process running ``DurableAgent.run``).

Contract. The meter is the agent's (``Agent(telemetry=Telemetry(meter_provider=...))``) or OpenTelemetry's
global one when the application configured it, as for a run's metrics; with neither, :func:`durable_metrics`
returns ``None`` and the engine calls nothing (``opentelemetry`` is not even imported). The instruments, made
once per meter provider, all under the ``tether`` scope:

* ``tether.durable.runs.running`` (up-down counter, ``{run}``): runs executing in this process now;
* ``tether.durable.runs.completed`` (counter): runs that ended with a ``RunResult`` here (``tether.stop_reason``
  says which; a run cancelled while running is one, stop reason ``cancelled``);
* ``tether.durable.runs.failed`` (counter): runs whose workflow raised here;
* ``tether.durable.runs.recovered`` (counter): runs this process took up from recorded steps, after the
  process running them died (its first step was read from the store, not run);
* ``tether.durable.runs.queued`` (observable gauge): runs waiting on each queue (``tether.queue``; a queue
  this process serves reports 0 when empty), read from the workflow database at each collection without the
  engine, in a process that serves queues; every worker reports the same figures (take the maximum across
  workers, not the sum);
* ``tether.durable.step.duration`` (histogram, seconds): each step's work (a model call, a tool call) where
  it ran, ``tether.step.kind`` ``model`` or ``tool`` (``error.type`` when it raised); a step read back from
  the store is not measured again.

Every instrument has ``tether.agent``, the durable agent's name, except the gauge. Only ``opentelemetry-api``
is used.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from tether.agent import Agent
    from tether.events import RunResult

T = TypeVar("T")
StepRunner = Callable[[Callable[[], Coroutine[Any, Any, T]]], Awaitable[T]]
"""The engine's step: runs the work it is given (or reads its recorded outcome back) and returns its result."""
_SECONDS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]
_NOT_CONFIGURED = frozenset({"_ProxyMeterProvider", "NoOpMeterProvider"})
"""The API's placeholders: no meter provider was configured."""
_lock = threading.Lock()
_by_provider: dict[int, tuple[Any, DurableMetrics]] = {}
_served: list[tuple[Path | None, str | None, tuple[str, ...]]] = []
"""The database and the queues this process serves (at most one entry), for the ``queued`` gauge."""


def durable_metrics(agent: Agent[Any, Any]) -> DurableMetrics | None:
    """The metrics of ``agent``'s durable runs, or ``None`` when no meter provider is configured."""
    from tether.telemetry import DISABLED

    settings = agent.telemetry
    if settings is DISABLED:
        return None
    provider = settings.meter_provider
    if provider is None:
        if "opentelemetry.metrics" not in sys.modules:
            return None  # nothing configured a global provider: OpenTelemetry is not even imported
        from opentelemetry import metrics

        provider = metrics.get_meter_provider()
        if type(provider).__name__ in _NOT_CONFIGURED:
            return None
    with _lock:
        known = _by_provider.get(id(provider))
        if known is not None and known[0] is provider:
            return known[1]
        made = DurableMetrics(provider)
        _by_provider[id(provider)] = (provider, made)  # the provider is kept so that its id stays its own
        return made


def serving(url: str, queues: Sequence[str]) -> None:
    """Say that this process serves ``queues`` of the database ``url`` (``sqlite:///...`` or PostgreSQL), for
    the ``queued`` gauge; an empty ``queues`` says it serves none."""
    _served.clear()
    if queues:
        path = Path(url.removeprefix("sqlite:///")) if url.startswith("sqlite:///") else None
        _served.append((path, None if path is not None else url, tuple(queues)))


class DurableMetrics:
    """The instruments of durable runs, made from one meter provider (see the module docstring)."""

    __slots__ = ("completed", "failed", "queued", "recovered", "running", "step_duration")

    def __init__(self, provider: Any) -> None:
        from tether._version import __version__

        meter = provider.get_meter("tether", __version__)
        self.running = meter.create_up_down_counter(
            "tether.durable.runs.running", unit="{run}", description="Durable runs executing in this process."
        )
        self.completed = meter.create_counter(
            "tether.durable.runs.completed", unit="{run}", description="Durable runs that ended with a result here."
        )
        self.failed = meter.create_counter(
            "tether.durable.runs.failed", unit="{run}", description="Durable runs whose workflow raised here."
        )
        self.recovered = meter.create_counter(
            "tether.durable.runs.recovered", unit="{run}",
            description="Durable runs taken up here from their recorded steps after their process died.",
        )  # fmt: skip
        self.queued = meter.create_observable_gauge(
            "tether.durable.runs.queued", callbacks=[_observe_queued], unit="{run}",
            description="Durable runs waiting on each queue this process serves.",
        )  # fmt: skip
        self.step_duration = meter.create_histogram(
            "tether.durable.step.duration", unit="s", description="The work of a durable run's step where it ran.",
            explicit_bucket_boundaries_advisory=_SECONDS,
        )  # fmt: skip

    def run(self, agent: str) -> RunMetrics:
        """The metrics of one execution of a run of the durable agent ``agent`` (started now)."""
        return RunMetrics(self, {"tether.agent": agent})


class RunMetrics:
    """One execution of a run: counted running from :meth:`~DurableMetrics.run` until :meth:`end`."""

    __slots__ = ("_attributes", "_first", "_metrics")

    def __init__(self, metrics: DurableMetrics, attributes: dict[str, str]) -> None:
        self._metrics = metrics
        self._attributes = attributes
        self._first = True
        metrics.running.add(1, attributes)

    async def step(self, name: str, function: Callable[[], Awaitable[T]], run_step: StepRunner[T]) -> T:
        """``run_step(call)``, the engine's step around ``function``, with the work of ``function`` measured when
        it runs; the first step of an execution read back from the store (not run) marks the run recovered."""
        ran = False
        kind = "model" if name.startswith("model:") or "/model:" in name else "tool"

        async def call() -> T:
            nonlocal ran
            ran = True
            attributes = {**self._attributes, "tether.step.kind": kind}
            started = time.perf_counter()
            try:
                return await function()
            except BaseException as error:
                attributes["error.type"] = type(error).__name__
                raise
            finally:
                self._metrics.step_duration.record(time.perf_counter() - started, attributes)

        try:
            return await run_step(call)
        finally:
            if self._first:
                self._first = False
                if not ran:
                    self._metrics.recovered.add(1, self._attributes)

    def end(self, result: RunResult[Any] | None, *, failed: bool) -> None:
        """The execution ended: with ``result``, raising (``failed``), or neither (stopped with its process,
        to be recovered: only no longer running here)."""
        self._metrics.running.add(-1, self._attributes)
        if failed:
            self._metrics.failed.add(1, self._attributes)
        elif result is not None:
            self._metrics.completed.add(1, {**self._attributes, "tether.stop_reason": str(result.stop_reason)})


def _observe_queued(options: Any) -> Iterable[Any]:
    """The ``queued`` gauge's figures: runs waiting on each queue, read from the database now."""
    if not _served:
        return []
    from opentelemetry.metrics import Observation

    from tether.durable.store import queued_counts

    path, url, queues = _served[0]
    try:
        counts = queued_counts(path=path, url=url)
    except Exception:  # noqa: BLE001 - the database out of reach for a moment: no figure this time
        return []
    counts = {**dict.fromkeys(queues, 0), **counts}
    return [Observation(count, {"tether.queue": queue}) for queue, count in sorted(counts.items())]
