"""The loop's own cost, with no network: CPU per step and how fast a cancel lands.

Run: .venv/bin/python bench/loop_overhead.py

A step is one provider call plus the tool call it asks for; the provider is ScriptedProvider, so what is
measured is tether's loop (accumulator, guard, executor, events), not a transport. Cancel latency is the time
from ``handle.cancel()`` to the awaited ``RunResult``, mid-stream and mid-tool.
"""

from __future__ import annotations

import asyncio
import statistics
import time

from tether import Agent, Limits, tool
from tether.events import TextDelta
from tether.providers.scripted import ScriptedProvider, call, hang, reply

STEPS_PER_RUN = 6  # five tool-call turns and a final answer, as in the transport benchmarks
RUNS = 400


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def script() -> list[object]:
    return [*(call("add", {"a": i, "b": 1}) for i in range(STEPS_PER_RUN - 1)), reply("done", chunk_size=4)]


async def cpu_per_step(concurrency: int) -> float:
    agents = [Agent(ScriptedProvider(script()), tools=[add], limits=Limits()) for _ in range(RUNS)]  # type: ignore[arg-type]
    start = time.process_time()
    for first in range(0, RUNS, concurrency):
        batch = agents[first : first + concurrency]
        results = await asyncio.gather(*(agent.run("go") for agent in batch))
        assert all(r.stop_reason == "complete" for r in results)
    return (time.process_time() - start) / (RUNS * STEPS_PER_RUN) * 1e6


async def one_cancel(mid_tool: bool) -> float:
    """Milliseconds from cancel() to the result, once the run waits on a tool or mid-stream."""
    ready = asyncio.Event()

    @tool
    async def wait() -> str:
        """Waits forever."""
        ready.set()
        await asyncio.Event().wait()
        return "unreachable"

    def on_text(event: object) -> None:
        if isinstance(event, TextDelta):
            ready.set()

    model = ScriptedProvider([call("wait")] if mid_tool else [hang("text")])
    handle = Agent(model, tools=[wait], limits=Limits(tool_timeout=None), on_event=on_text).start("go")
    await ready.wait()
    started = time.perf_counter()
    handle.cancel()
    result = await handle
    assert result.stop_reason == "cancelled"
    return (time.perf_counter() - started) * 1000


async def cancel_latency(mid_tool: bool) -> list[float]:
    return [await one_cancel(mid_tool) for _ in range(50)]


async def main() -> None:
    print(f"loop CPU per step (scripted provider, {RUNS} runs x {STEPS_PER_RUN} steps):")
    for concurrency in (1, 100):
        print(f"  {concurrency:>4} concurrent runs: {await cpu_per_step(concurrency):7.1f} us/step")
    for label, mid_tool in (("mid-stream", False), ("mid-tool", True)):
        latencies = await cancel_latency(mid_tool)
        print(
            f"cancel latency {label:>10}: median {statistics.median(latencies):.3f} ms, "
            f"max {max(latencies):.3f} ms (50 runs)"
        )


if __name__ == "__main__":
    asyncio.run(main())
