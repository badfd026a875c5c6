"""Without a configured provider nothing observes a run, and OpenTelemetry is never imported by tether itself;
with the application's global providers, runs use them (each checked in a fresh interpreter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[2] / "src")


def run_python(code: str) -> str:
    env = {**os.environ, "PYTHONPATH": SRC}
    env.pop("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", None)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_a_run_imports_no_opentelemetry() -> None:
    code = """
import sys
from tether import Agent
from tether.providers.scripted import ScriptedProvider, reply
print(Agent(ScriptedProvider([reply("hi")])).run_sync("go").text, "opentelemetry" in str(sorted(sys.modules)))
"""
    assert run_python(code) == "hi False"


def test_with_opentelemetry_imported_but_nothing_configured_there_is_no_observer() -> None:
    code = """
import opentelemetry.trace, opentelemetry.metrics
from tether.telemetry import Telemetry, observer_for
print(observer_for(Telemetry(logs=False), Telemetry().redaction()))
"""
    assert run_python(code) == "None"


def test_runs_use_the_global_providers_the_application_configured() -> None:
    code = """
import json
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tether import Agent, tool
from tether.providers.scripted import ScriptedProvider, call, reply

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
reader = InMemoryMetricReader()
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))

@tool
def add(a: int, b: int) -> int:
    '''Add.'''
    return a + b

Agent(ScriptedProvider([call("add", {"a": 1, "b": 2}), reply("3")]), tools=[add]).run_sync("go")
spans = {s.context.span_id: s for s in exporter.get_finished_spans()}
names = sorted([s.name, spans[s.parent.span_id].name if s.parent else None] for s in spans.values())
found = [m.name for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics for m in sm.metrics]
print(json.dumps({"spans": names, "duration": "gen_ai.invoke_agent.duration" in found}))
"""
    seen = json.loads(run_python(code))
    assert seen["spans"] == [
        ["chat scripted", "invoke_agent"],
        ["chat scripted", "invoke_agent"],
        ["execute_tool add", "invoke_agent"],
        ["invoke_agent", None],
    ]
    assert seen["duration"] is True
