"""One benchmark scenario in one client process; prints its figures as JSON on stdout.

Run: python bench/workload.py IMPL SCENARIO BASE_URL   (IMPL is ``tether`` or ``floor``)

``TETHER_BENCH_TELEMETRY`` (read by ``bench/telemetry.py``) sets what observes tether's runs: unset or ``off``
(nothing: OpenTelemetry not imported), ``api`` (``opentelemetry-api`` imported, no provider configured),
``traces`` (the SDK's tracer and meter providers, spans batched to an exporter that drops them, metrics to an
in-memory reader), ``logs`` (logging at INFO to a handler that formats each record and drops it).

The process is fresh for every scenario so that peak RSS is the scenario's own. One warm-up run opens the
connection and loads what is loaded lazily before the clock starts. CPU is the process's user+system time.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import resource
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import floor

EXPECTED_END = "is done."


@dataclass(frozen=True)
class Scenario:
    runs: int
    concurrency: int
    tool_turns: int = 5
    parallel: int = 1
    stream: bool = False

    @property
    def model(self) -> str:
        suffix = f"-parallel-{self.parallel}" if self.parallel > 1 else ""
        return f"tools-{self.tool_turns}{suffix}"

    @property
    def steps_per_run(self) -> int:
        return self.tool_turns + 1


SCENARIOS = {
    "sequential": Scenario(runs=40, concurrency=1),
    "streaming": Scenario(runs=40, concurrency=1, stream=True),
    "parallel-calls": Scenario(runs=40, concurrency=1, parallel=3),
    "concurrent-200": Scenario(runs=200, concurrency=200),
    "concurrent-1000": Scenario(runs=1000, concurrency=1000),
    "concurrent-10000": Scenario(runs=10000, concurrency=10000),
    "long-60": Scenario(runs=4, concurrency=1, tool_turns=59),
    "sequential-400": Scenario(runs=400, concurrency=1),
    "sequential-20": Scenario(runs=20, concurrency=1),
    "sequential-60": Scenario(runs=60, concurrency=1),
    "ttft": Scenario(runs=60, concurrency=1, tool_turns=0, stream=True),
}


@dataclass
class Observations:
    turn_cpu_ns: list[list[int]] = field(default_factory=list)
    """Per run, the process CPU time at the start of each turn."""
    ttft_ns: list[int] = field(default_factory=list)
    """Per run, the time from the server's stamp to the consumer's first text."""

    def first_text(self, text: str) -> None:
        if text.startswith("t="):
            self.ttft_ns.append(time.monotonic_ns() - int(text[2:].split(" ", 1)[0]))

    def turn(self, number: int) -> None:
        if number == 1:
            self.turn_cpu_ns.append([])
        self.turn_cpu_ns[-1].append(time.process_time_ns())


RunOnce = Callable[[Observations], Awaitable[str]]


def floor_runner(base_url: str, scenario: Scenario) -> RunOnce:
    async def run(seen: Observations) -> str:
        return await floor.run(
            base_url, scenario.model, "Add the numbers.", stream=scenario.stream,
            on_turn=seen.turn, on_first_text=seen.first_text,
        )  # fmt: skip

    return run


def tether_runner(base_url: str, scenario: Scenario) -> RunOnce:
    from tether import Agent, Limits, tool
    from tether.events import RunCompleted, RunEvent, TextDelta, TurnStarted
    from tether.providers.openai_chat import OpenAIChatProvider
    from tether.providers.registry import PROFILES

    @tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    provider = OpenAIChatProvider(scenario.model, profile=PROFILES["openai-compatible"], base_url=base_url,
                                  stream=scenario.stream)  # fmt: skip
    agent = Agent(provider, tools=[add], limits=Limits(max_turns=200, max_tool_calls=1000, request_timeout=600))
    observe(os.environ.get("TETHER_BENCH_TELEMETRY", "off"))
    watch_turns = scenario.tool_turns > 20

    async def streamed(seen: Observations) -> str:
        first = True
        async for event in agent.stream("Add the numbers."):
            kind = type(event)
            if kind is TextDelta and first:
                first = False
                seen.first_text(event.text)  # type: ignore[union-attr]
            elif kind is TurnStarted:
                seen.turn(event.turn)  # type: ignore[union-attr]
            elif kind is RunCompleted:
                return event.result.text  # type: ignore[union-attr]
        return ""

    async def ran(seen: Observations) -> str:
        def on_event(event: RunEvent) -> None:
            if type(event) is TurnStarted:
                seen.turn(event.turn)

        return (await agent.run("Add the numbers.", on_event=on_event if watch_turns else None)).text

    return streamed if scenario.stream else ran


def observe(how: str) -> None:
    """Set up what observes the runs (see the module docstring); the default observes nothing."""
    if how == "api":
        import opentelemetry.metrics
        import opentelemetry.trace  # noqa: F401 - imported, and no provider configured
    elif how == "traces":
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

        class Dropped(SpanExporter):
            def export(self, spans: Any) -> SpanExportResult:
                return SpanExportResult.SUCCESS

        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(BatchSpanProcessor(Dropped()))
        trace.set_tracer_provider(tracer_provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
    elif how == "logs":
        handler = logging.StreamHandler(open(os.devnull, "w"))  # noqa: SIM115 - lives as long as the process
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        logging.basicConfig(level=logging.INFO, handlers=[handler])
    elif how != "off":
        raise SystemExit(f"TETHER_BENCH_TELEMETRY must be off, api, traces or logs, not {how!r}")


def rss_kb() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() // 1024


async def main(impl: str, name: str, base_url: str) -> dict[str, Any]:
    scenario = SCENARIOS[name]
    run = tether_runner(base_url, scenario) if impl == "tether" else floor_runner(base_url, scenario)
    await run(Observations())  # warm-up: imports, connection, caches
    seen = Observations()
    failures = 0
    baseline_rss = rss_kb()
    started_cpu = resource.getrusage(resource.RUSAGE_SELF)
    started_wall = time.perf_counter()
    for first in range(0, scenario.runs, scenario.concurrency):
        batch = min(scenario.concurrency, scenario.runs - first)
        texts = await asyncio.gather(*(run(Observations() if batch > 1 else seen) for _ in range(batch)))
        failures += sum(not text.endswith(EXPECTED_END) for text in texts)
    wall = time.perf_counter() - started_wall
    ended_cpu = resource.getrusage(resource.RUSAGE_SELF)
    if impl == "floor":
        await floor.close()
    cpu = (ended_cpu.ru_utime - started_cpu.ru_utime) + (ended_cpu.ru_stime - started_cpu.ru_stime)
    steps = scenario.runs * scenario.steps_per_run
    peak_rss = ended_cpu.ru_maxrss
    return {
        "impl": impl,
        "scenario": name,
        "runs": scenario.runs,
        "steps": steps,
        "requests_expected": steps,
        "cpu_ms_per_step": cpu * 1000 / steps,
        "wall_s": wall,
        "peak_rss_kb": peak_rss,
        "rss_per_run_kb": (peak_rss - baseline_rss) / scenario.concurrency if scenario.concurrency > 1 else None,
        "failures": failures,
        "ttft_ns": seen.ttft_ns,
        "turn_cpu_ns": seen.turn_cpu_ns,
    }


if __name__ == "__main__":
    impl_name, scenario_name, url = sys.argv[1:4]
    print(json.dumps(asyncio.run(main(impl_name, scenario_name, url))))
