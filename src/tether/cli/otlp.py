"""The command's spans and metrics over OTLP/HTTP, when the environment asks for it.

``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) set in the environment turns it
on for ``tether run`` and ``tether chat``: before the first run, a ``TracerProvider`` (resource
``service.name`` from ``OTEL_SERVICE_NAME``, else ``tether``) with a ``BatchSpanProcessor`` and the SDK's
``OTLPSpanExporter`` and, when the general endpoint (or ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``) is set, a
``MeterProvider`` with a ``PeriodicExportingMetricReader``. The agent gets them through
``Telemetry(tracer_provider=..., meter_provider=...)``; nothing global is set, so nothing else in the process
is traced by surprise. When the command ends both are shut down, which exports what is still buffered.

The exporters read the rest of the standard variables themselves (``OTEL_EXPORTER_OTLP_HEADERS``,
``..._TIMEOUT``, ``..._COMPRESSION``, ``OTEL_RESOURCE_ATTRIBUTES``); ``OTEL_TRACES_EXPORTER=none`` or
``OTEL_METRICS_EXPORTER=none`` turns either off. Without the SDK and the exporter (``tether[otel]``) the
command says so in one dim line on stderr and goes on without them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.text import Text

from tether.telemetry import Telemetry

ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
METRICS_ENDPOINT = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"
MISSING = "{variable} is set, but spans need OpenTelemetry's SDK and OTLP exporter: pip install 'tether[otel]'"


def wanted(env: Mapping[str, str]) -> bool:
    """Whether the environment asks for the command's spans to be exported."""
    return bool(env.get(ENDPOINT) or env.get(TRACES_ENDPOINT)) and env.get("OTEL_TRACES_EXPORTER") != "none"


@contextmanager
def otlp_export(env: Mapping[str, str], err: Console) -> Iterator[Telemetry | None]:
    """The telemetry settings the command's agents use while this is entered (``None``: the defaults), with
    the providers shut down, and their buffers exported, when it is left."""
    if not wanted(env):
        yield None
        return
    try:
        providers = _providers(env)
    except ImportError:
        variable = ENDPOINT if env.get(ENDPOINT) else TRACES_ENDPOINT
        err.print(Text(MISSING.format(variable=variable), style="dim"))
        yield None
        return
    tracer_provider, meter_provider = providers
    try:
        yield Telemetry(tracer_provider=tracer_provider, meter_provider=meter_provider)
    finally:
        tracer_provider.shutdown()
        if meter_provider is not None:
            meter_provider.shutdown()


def _providers(env: Mapping[str, str]) -> tuple[Any, Any]:
    """A tracer provider exporting over OTLP/HTTP and, if metrics go somewhere, a meter provider; raises
    ``ImportError`` when ``tether[otel]`` is not installed."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.name": env.get("OTEL_SERVICE_NAME") or "tether"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    meter_provider = None
    if (env.get(ENDPOINT) or env.get(METRICS_ENDPOINT)) and env.get("OTEL_METRICS_EXPORTER") != "none":
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        reader = PeriodicExportingMetricReader(OTLPMetricExporter())
        meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
    return tracer_provider, meter_provider
