"""The command's OTLP export set up and shut down (``tether/cli/otlp.py``): spans made through the providers
it hands out reach a real OTLP/HTTP receiver on 127.0.0.1 by the time it is left."""

from __future__ import annotations

import io
import os
import sys

import pytest

from tests.e2e.otlp_receiver import otlp_receiver
from tether.cli.otlp import otlp_export, wanted
from tether.cli.render import make_console


def test_without_an_endpoint_nothing_is_set_up() -> None:
    err = io.StringIO()
    with otlp_export({"OTEL_SERVICE_NAME": "x"}, make_console(err)) as telemetry:
        assert telemetry is None
    assert err.getvalue() == ""
    assert not wanted({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "none"})
    assert wanted({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/v1/traces"})


def test_spans_are_exported_when_the_block_is_left(monkeypatch: pytest.MonkeyPatch) -> None:
    with otlp_receiver() as received:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", received.endpoint)
        monkeypatch.setenv("OTEL_SERVICE_NAME", "tether-test")
        err = io.StringIO()
        with otlp_export(os.environ, make_console(err)) as telemetry:
            assert telemetry is not None
            assert telemetry.meter_provider is not None
            tracer = telemetry.tracer_provider.get_tracer("tests")
            with tracer.start_as_current_span("outer"), tracer.start_as_current_span("inner"):
                pass
            counter = telemetry.meter_provider.get_meter("tests").create_counter("tests.count")
            counter.add(1)
        assert received.spans() == [("inner", "tether-test"), ("outer", "tether-test")]
        assert "/v1/metrics" in received.paths
        assert err.getvalue() == ""


def test_a_traces_endpoint_alone_exports_spans_and_no_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    with otlp_receiver() as received:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", received.endpoint + "/v1/traces")
        with otlp_export(os.environ, make_console(io.StringIO())) as telemetry:
            assert telemetry is not None
            assert telemetry.meter_provider is None
            telemetry.tracer_provider.get_tracer("tests").start_span("alone").end()
        assert received.spans() == [("alone", "tether")]


def test_without_the_sdk_one_dim_note_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # importing it now fails
    err = io.StringIO()
    with otlp_export({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}, make_console(err)) as telemetry:
        assert telemetry is None
    assert err.getvalue() == (
        "OTEL_EXPORTER_OTLP_ENDPOINT is set, but spans need OpenTelemetry's SDK and OTLP exporter: "
        "pip install 'tether[otel]'\n"
    )
