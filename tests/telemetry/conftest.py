"""OpenTelemetry SDK pieces for the telemetry tests: in-memory spans and metrics, and a span tree to check."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tether.telemetry import Telemetry


@dataclass
class Otel:
    """An SDK tracer and meter provider, what they recorded, and the ``Telemetry`` that uses them."""

    tracer_provider: TracerProvider
    exporter: InMemorySpanExporter
    meter_provider: MeterProvider
    reader: InMemoryMetricReader

    def telemetry(self, **options: Any) -> Telemetry:
        return Telemetry(tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **options)

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [span for span in self.spans() if span.name.startswith(prefix)]

    def metrics(self) -> dict[str, list[Any]]:
        """Every metric's data points by name."""
        data = self.reader.get_metrics_data()
        found: dict[str, list[Any]] = {}
        if data is None:
            return found
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    found.setdefault(metric.name, []).extend(metric.data.data_points)
        return found


@pytest.fixture
def otel() -> Iterator[Otel]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    yield Otel(tracer_provider, exporter, meter_provider, reader)
    tracer_provider.shutdown()
    meter_provider.shutdown()


def attrs(item: Any) -> dict[str, Any]:
    """A span's or an event's attributes, as a plain dict."""
    return dict(item.attributes or {})


def parent_of(span: ReadableSpan, spans: list[ReadableSpan]) -> ReadableSpan | None:
    """The span's parent among ``spans``, ``None`` if it has none there."""
    if span.parent is None:
        return None
    return next((other for other in spans if other.context.span_id == span.parent.span_id), None)


def check_tree(spans: list[ReadableSpan]) -> dict[str, ReadableSpan]:
    """Every run's spans hang under its own ``invoke_agent`` (matched by ``tether.run.id`` through the tree):
    exactly one root per run, chat and execute_tool spans its direct children, all in one trace.
    Returns the runs' spans by run id."""
    runs: dict[str, ReadableSpan] = {}
    for span in spans:
        if span.name.startswith("invoke_agent"):
            run_id = str(attrs(span)["tether.run.id"])
            assert run_id not in runs, f"two invoke_agent spans for run {run_id}"
            runs[run_id] = span
    for span in spans:
        assert span.end_time is not None, f"{span.name} was not ended"
        if span.name.startswith(("chat ", "execute_tool ")):
            parent = parent_of(span, spans)
            assert parent is not None, f"{span.name} is not under a run"
            assert parent.name.startswith("invoke_agent"), f"{span.name} is not under a run"
            assert parent.context.trace_id == span.context.trace_id
    return runs
