"""One benchmark scenario in one client process; prints its figures as JSON on stdout.

Run: python bench/workload.py IMPL SCENARIO BASE_URL [RUNS]   (IMPL is ``tether`` or ``floor``; RUNS replaces the
scenario's number of timed runs)

``TETHER_BENCH_TELEMETRY`` (read by ``bench/telemetry.py``) sets what observes tether's runs: unset or ``off``
(nothing: OpenTelemetry not imported), ``api`` (``opentelemetry-api`` imported, no provider configured),
``traces`` (the SDK's tracer and meter providers, spans batched to an exporter that drops them, metrics to an
in-memory reader), ``logs`` (logging at INFO to a handler that formats each record and drops it).

``TETHER_BENCH_LOOP=uvloop`` runs the client (tether or the floor) on uvloop instead of asyncio's own loop.

``work-60`` (tether only; ``bench/compaction.py`` drives it) is a 60-turn working session: each turn one
``read_file`` call answered with 1,000 to 3,000 characters of source, then a final answer. It runs once per
setting in ``TETHER_BENCH_COMPACTION`` (comma-separated: ``default``, the agent's default; ``off``,
``compaction=False``; a number, ``Compaction(context_window=N)``), the settings alternating run by run in the
one process so that they share its state (memory layout, clock speed). It records *marks*: the setting, the
turn and the process CPU time at the start of each turn, after its tool results, around the provider stream of
each summary call and at each ``Compacted`` event. With ``TETHER_BENCH_CALLGRIND=1`` each mark first calls
``os.getppid()``, which ``valgrind --tool=callgrind --dump-before=getppid`` turns into a dump of the
instructions counted since the previous mark.

``TETHER_BENCH_GC`` sets what the application does with the cyclic collector after the warm-up: unset or
``default`` (nothing), ``freeze`` (``gc.freeze()``: what start-up left is never walked again), ``threshold``
(``gc.set_threshold(50_000, 20, 20)``). tether itself never changes the collector's settings.

The process is fresh for every scenario so that peak RSS is the scenario's own. One warm-up run opens the
connection and loads what is loaded lazily before the clock starts. CPU is the process's user+system time.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import random
import resource
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
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
    "streaming-20": Scenario(runs=20, concurrency=1, stream=True),
    "streaming-60": Scenario(runs=60, concurrency=1, stream=True),
    "parallel-calls-20": Scenario(runs=20, concurrency=1, parallel=3),
    "parallel-calls-60": Scenario(runs=60, concurrency=1, parallel=3),
    "ttft": Scenario(runs=60, concurrency=1, tool_turns=0, stream=True),
    "work-60": Scenario(runs=3, concurrency=1, tool_turns=60),
}


@dataclass
class Observations:
    turn_cpu_ns: list[list[int]] = field(default_factory=list)
    """Per run, the process CPU time at the start of each turn."""
    ttft_ns: list[int] = field(default_factory=list)
    """Per run, the time from the server's stamp to the consumer's first text."""
    marks: list[tuple[str, str, int, int]] = field(default_factory=list)
    """``work-N``: (setting, what, turn, process CPU ns) at each point ``bench/compaction.py`` splits a run on."""
    compactions: list[tuple[str, int, int, int]] = field(default_factory=list)
    """``work-N``: (setting, turn, tokens before, tokens after) of each compaction."""
    setting: str = ""
    """``work-N``: the compaction setting of the run under way."""
    dump: bool = False
    """``work-N``: a mark asks callgrind for a dump (see the module docstring)."""

    def mark(self, what: str, turn: int) -> None:
        if self.dump:
            os.getppid()  # callgrind --dump-before=getppid: what was counted since the last mark goes to its own file
        self.marks.append((self.setting, what, turn, time.process_time_ns()))

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


SYSTEM = (
    "You are a careful code reviewer working in a repository. Read the files you need with read_file, one at a "
    "time, and keep track of what you find. When you have read everything, answer with a short report."
)


def module_source(number: int) -> str:
    """What ``read_file`` returns for module ``number``: 8 to 24 three-line handlers, 1,000 to 3,000 characters."""
    rng = random.Random(number)
    return "\n".join(
        f"def handle_{number:02d}_{i}(request, context):\n"
        f"    value = compute_{i}(request.payload, retries={(number + i) % 5 + 1})\n"
        f"    return respond(value, status={200 + i % 3})\n"
        for i in range(rng.randint(8, 24))
    )


def work_runner(base_url: str, scenario: Scenario, setting: str) -> RunOnce:
    """The ``work-N`` client for one compaction setting (see the module docstring)."""
    from tether import Agent, Compaction, Limits, tool
    from tether.events import Compacted, RunEvent, ToolResultReceived, TurnStarted
    from tether.providers.openai_chat import OpenAIChatProvider
    from tether.providers.registry import PROFILES

    sources = {f"src/app/module_{n:02d}.py": module_source(n) for n in range(scenario.tool_turns)}

    @tool
    async def read_file(path: str) -> str:
        """Read a file of the repository."""
        return sources[path]

    current = [Observations()]

    class MarkedProvider(OpenAIChatProvider):
        """Marks the start and end of the stream of a tools-off call (a compaction's summary)."""

        def stream(self, request: Any) -> Any:
            events = super().stream(request)
            return events if request.tool_choice != "none" else self._marked(events)

        async def _marked(self, events: Any) -> Any:
            current[0].mark("summary_started", 0)
            async for event in events:
                yield event
            current[0].mark("summary_ended", 0)

    compaction = {"default": None, "off": False}.get(setting)
    if compaction is None and setting != "default":
        compaction = Compaction(context_window=int(setting))
    provider = MarkedProvider(f"work-{scenario.tool_turns}", profile=PROFILES["openai-compatible"], base_url=base_url)
    limits = Limits(max_turns=200, max_tool_calls=1000, request_timeout=600)
    agent = Agent(provider, tools=[read_file], system=SYSTEM, limits=limits, compaction=compaction)

    async def ran(seen: Observations) -> str:
        current[0] = seen

        def on_event(event: RunEvent) -> None:
            kind = type(event)
            if kind is TurnStarted:
                seen.mark("turn", event.turn)  # type: ignore[union-attr]
            elif kind is ToolResultReceived:
                seen.mark("tools", event.turn)  # type: ignore[union-attr]
            elif kind is Compacted:
                compacted: Compacted = event  # type: ignore[assignment]
                seen.mark("compacted", compacted.turn)
                seen.compactions.append((seen.setting, compacted.turn, compacted.tokens_before, compacted.tokens_after))

        return (await agent.run("Review the request handlers under src/app.", on_event=on_event)).text

    return ran


async def work_main(name: str, base_url: str, scenario: Scenario) -> dict[str, Any]:
    """Run ``work-N`` for every setting of ``TETHER_BENCH_COMPACTION``, alternating (see the module docstring)."""
    settings = os.environ.get("TETHER_BENCH_COMPACTION", "default").split(",")
    runners = {setting: work_runner(base_url, scenario, setting) for setting in settings}
    for run in runners.values():
        await run(Observations())  # warm-up: imports, connection, caches
    seen = Observations(dump=os.environ.get("TETHER_BENCH_CALLGRIND") == "1")
    failures = 0
    for _ in range(scenario.runs):
        for setting, run in runners.items():
            seen.setting = setting
            failures += not (await run(seen)).endswith(EXPECTED_END)
    return {
        "impl": "tether",
        "scenario": name,
        "runs": scenario.runs,
        "settings": settings,
        "steps": scenario.runs * len(settings) * scenario.steps_per_run,
        "failures": failures,
        "marks": seen.marks,
        "compactions": seen.compactions,
    }


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


def collector(how: str) -> None:
    """What the application does with the cyclic collector after start-up (see the module docstring)."""
    if how == "freeze":
        gc.freeze()
    elif how == "threshold":
        gc.set_threshold(50_000, 20, 20)
    elif how != "default":
        raise SystemExit(f"TETHER_BENCH_GC must be default, freeze or threshold, not {how!r}")


def rss_kb() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize() // 1024


async def main(impl: str, name: str, base_url: str, runs: int | None = None) -> dict[str, Any]:
    scenario = SCENARIOS[name] if runs is None else replace(SCENARIOS[name], runs=runs)
    if name.startswith("work-"):
        if impl != "tether":
            raise SystemExit(f"{name} is a tether scenario only")
        return await work_main(name, base_url, scenario)
    run = tether_runner(base_url, scenario) if impl == "tether" else floor_runner(base_url, scenario)
    await run(Observations())  # warm-up: imports, connection, caches
    collector(os.environ.get("TETHER_BENCH_GC", "default"))
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


def event_loop_runner() -> Callable[[Awaitable[dict[str, Any]]], dict[str, Any]]:
    """``asyncio.run``, or ``uvloop.run`` with ``TETHER_BENCH_LOOP=uvloop`` (imported before the clock starts)."""
    name = os.environ.get("TETHER_BENCH_LOOP", "asyncio")
    if name == "uvloop":
        import uvloop

        return uvloop.run
    if name != "asyncio":
        raise SystemExit(f"TETHER_BENCH_LOOP must be asyncio or uvloop, not {name!r}")
    return asyncio.run


if __name__ == "__main__":
    impl_name, scenario_name, url = sys.argv[1:4]
    timed_runs = int(sys.argv[4]) if len(sys.argv) > 4 else None
    print(json.dumps(event_loop_runner()(main(impl_name, scenario_name, url, timed_runs))))
