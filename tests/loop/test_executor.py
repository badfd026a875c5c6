"""ToolExecutor on its own: grouping, the concurrency cap, results in model order, refusals."""

from __future__ import annotations

import asyncio
from typing import Any

from tether import tool
from tether.events import ToolCallStarted, ToolResultReceived
from tether.loop.executor import ToolBatch, ToolExecutor
from tether.loop.interrupts import Interrupter
from tether.messages import ToolCall
from tether.tools.registry import ToolRegistry


def calls(*specs: tuple[str, dict[str, Any]]) -> list[ToolCall]:
    return [ToolCall(f"c{i}", name, dict(arguments)) for i, (name, arguments) in enumerate(specs)]


async def execute(executor: ToolExecutor, batch: ToolBatch) -> list[ToolCallStarted | ToolResultReceived]:
    executor.interrupter.attach()
    return [event async for event in executor.run(batch, turn=1)]


async def test_no_more_than_max_concurrency_calls_run_at_once() -> None:
    running = 0
    peak = 0

    @tool(concurrent=True)
    async def work(n: int) -> int:
        """Work a little."""
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        for _ in range(3):
            await asyncio.sleep(0)
        running -= 1
        return n

    executor = ToolExecutor(ToolRegistry([work]), Interrupter(), timeout=None, max_concurrency=2)
    batch = ToolBatch(calls(*[("work", {"n": n}) for n in range(6)]), [None] * 6)
    events = await execute(executor, batch)
    assert peak == 2
    assert [e.result.content for e in events if isinstance(e, ToolResultReceived)] == [str(n) for n in range(6)]


async def test_concurrent_tools_setting_runs_ordinary_tools_together() -> None:
    together = asyncio.Barrier(2)

    @tool
    async def meet() -> str:
        """Meet the other call."""
        async with asyncio.timeout(5):
            await together.wait()
        return "met"

    executor = ToolExecutor(ToolRegistry([meet]), Interrupter(), timeout=None, concurrent_tools=True)
    batch = ToolBatch(calls(("meet", {}), ("meet", {})), [None, None])
    await execute(executor, batch)
    assert [r.content for r in batch.ordered_results("-")] == ["met", "met"]


async def test_an_ordinary_call_between_concurrent_ones_splits_them_and_keeps_the_order() -> None:
    log: list[str] = []

    @tool(concurrent=True)
    async def parallel_step(name: str) -> str:
        """Concurrent."""
        log.append(name)
        return name

    @tool
    def serial_step(name: str) -> str:
        """Not concurrent."""
        log.append(name)
        return name

    executor = ToolExecutor(ToolRegistry([parallel_step, serial_step]), Interrupter(), timeout=None)
    batch = ToolBatch(
        calls(("parallel_step", {"name": "a"}), ("serial_step", {"name": "b"}), ("parallel_step", {"name": "c"})),
        [None, None, None],
    )
    events = await execute(executor, batch)
    assert log == ["a", "b", "c"]
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["ToolCallStarted", "ToolResultReceived"] * 3


async def test_refused_calls_are_answered_with_the_reason_and_not_run() -> None:
    ran: list[int] = []

    @tool
    def count(n: int) -> int:
        """Count."""
        ran.append(n)
        return n

    executor = ToolExecutor(ToolRegistry([count]), Interrupter(), timeout=None)
    batch = ToolBatch(calls(("count", {"n": 1}), ("count", {"n": 2})), [None, "limit reached"])
    await execute(executor, batch)
    first, second = batch.ordered_results("-")
    assert ran == [1]
    assert (second.content, second.code, second.is_error) == ("limit reached", "permission_denied", True)
    assert first.content == "1"


async def test_a_tool_returning_structured_data_is_sent_as_json() -> None:
    @tool
    def info() -> dict[str, object]:
        """Info."""
        return {"ok": True, "items": [1, 2]}

    executor = ToolExecutor(ToolRegistry([info]), Interrupter(), timeout=None)
    batch = ToolBatch(calls(("info", {})), [None])
    await execute(executor, batch)
    assert batch.ordered_results("-")[0].content == '{"ok": true, "items": [1, 2]}'


async def test_an_output_past_the_limit_keeps_its_head_and_tail_and_says_how_much_was_cut() -> None:
    @tool
    def flood() -> str:
        """A lot of output."""
        return "HEAD" + "x" * 10_000 + "TAIL"

    @tool(max_output=5_000)
    def roomy() -> str:
        """More room."""
        return "y" * 4_000

    executor = ToolExecutor(ToolRegistry([flood, roomy]), Interrupter(), timeout=None, max_output=1_000)
    batch = ToolBatch(calls(("flood", {}), ("roomy", {})), [None, None])
    await execute(executor, batch)
    clipped, kept = batch.ordered_results("-")
    assert clipped.content.startswith("HEAD")
    assert clipped.content.endswith("TAIL")
    assert len(clipped.content) <= 1_000
    assert "characters cut from the middle of this output" in clipped.content
    assert kept.content == "y" * 4_000, "a tool's own limit wins over the agent's"


async def test_no_output_limit_keeps_everything() -> None:
    @tool
    def flood() -> str:
        """A lot of output."""
        return "z" * 50_000

    executor = ToolExecutor(ToolRegistry([flood]), Interrupter(), timeout=None, max_output=None)
    batch = ToolBatch(calls(("flood", {})), [None])
    await execute(executor, batch)
    assert len(batch.ordered_results("-")[0].content) == 50_000
