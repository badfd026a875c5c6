"""Abandoned calls: a synchronous call whose caller gave up (timeout, cancel) gives its thread's place back, so
hung tools cannot starve the pool; past a bound on abandoned threads, calls are refused, not queued forever.

Every hung call here blocks on a ``threading.Event`` the test releases when it ends, and the test then joins
the threads it blocked, so none outlives it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether import Agent, Limits, tool
from tether.errors import ToolError
from tether.providers.scripted import ScriptedProvider, call, parallel, reply
from tether.tools import threads
from tether.tools.files import file_tools
from tether.tools.threads import MAX_TOOL_THREADS, DaemonThreadPool
from tether.tools.workspace import Workspace

WAIT = 10.0
"""Upper bound for any blocking wait, so that a broken pool fails the test instead of hanging it."""


class Hangs:
    """Calls that block until released; records the threads they ran on, to join them afterwards."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Semaphore(0)
        self.threads: list[threading.Thread] = []

    def __call__(self) -> str:
        self.threads.append(threading.current_thread())
        self.started.release()
        self.release.wait()  # no timeout of its own: only the test's release ends it
        return "released"

    async def wait_started(self, count: int) -> None:
        for _ in range(count):
            assert await asyncio.to_thread(self.started.acquire, True, WAIT), "a hung call never started"

    def finish(self) -> None:
        self.release.set()
        for thread in self.threads:
            thread.join(WAIT)
            assert not thread.is_alive(), f"{thread.name} did not exit after its call was released"


@pytest.fixture
def hangs() -> Iterator[Hangs]:
    hung = Hangs()
    yield hung
    hung.finish()


async def test_an_abandoned_call_gives_its_place_to_a_fresh_thread(hangs: Hangs) -> None:
    pool = DaemonThreadPool(2, max_abandoned=4)
    stuck = [pool.submit(hangs), pool.submit(hangs)]
    await hangs.wait_started(2)
    for future in stuck:
        future.cancel()
    # Both threads are still blocked; without giving their places back the pool would have none to offer.
    assert await asyncio.wait_for(pool.submit(threading.get_ident), WAIT) not in {t.ident for t in hangs.threads}
    assert pool.abandoned == 2
    assert pool.threads <= 2


async def test_a_call_waiting_in_line_is_served_once_the_call_ahead_is_abandoned(hangs: Hangs) -> None:
    pool = DaemonThreadPool(1, max_abandoned=4)
    stuck = pool.submit(hangs)
    await hangs.wait_started(1)
    waiting = pool.submit(lambda: "served")
    stuck.cancel()
    assert await asyncio.wait_for(waiting, WAIT) == "served"


async def test_an_abandoned_thread_exits_when_its_call_returns_and_frees_its_count(hangs: Hangs) -> None:
    pool = DaemonThreadPool(1, max_abandoned=1)
    stuck = pool.submit(hangs)
    await hangs.wait_started(1)
    stuck.cancel()
    await asyncio.sleep(0)  # let the cancelled future's callbacks run
    assert pool.abandoned == 1
    hangs.finish()  # released and joined: the thread left instead of returning to the pool
    assert pool.abandoned == 0
    assert await pool.submit(lambda: "accepted again") == "accepted again"


async def test_past_the_bound_on_abandoned_threads_a_call_is_refused(hangs: Hangs) -> None:
    pool = DaemonThreadPool(1, max_abandoned=2)
    for _ in range(2):
        stuck = pool.submit(hangs)
        await hangs.wait_started(1)
        stuck.cancel()
        await asyncio.sleep(0)  # let the cancelled future's callbacks run
    with pytest.raises(ToolError) as refused:
        pool.submit(lambda: "never run")
    assert refused.value.code == "tool_failed"
    assert "2 earlier tool calls that timed out or were cancelled are still running" in refused.value.message


async def test_sync_tools_still_run_after_more_calls_than_threads_hung_past_their_timeout(
    hangs: Hangs, tmp_path: Path
) -> None:
    stuck_calls = MAX_TOOL_THREADS + 8
    (tmp_path / "notes.txt").write_text("still readable\n")

    @tool(concurrent=True, timeout=0.05)
    def stuck() -> str:
        """Hang."""
        return hangs()

    model = ScriptedProvider(
        [parallel(*[call("stuck", {}) for _ in range(stuck_calls)]), call("read", {"path": "notes.txt"}), reply("ok")]
    )
    agent = Agent(
        model,
        tools=[stuck, *file_tools(Workspace(tmp_path))],
        max_concurrency=stuck_calls,
        limits=Limits(max_tool_calls_per_turn=stuck_calls, max_tool_calls=stuck_calls + 1, tool_timeout=WAIT),
    )
    result = await agent.run("go")
    hung_results = result.messages[2].tool_results
    assert [r.code for r in hung_results] == ["tool_timeout"] * stuck_calls
    (read,) = result.messages[4].tool_results
    assert not read.is_error, read.content
    assert "still readable" in read.content


async def test_a_sync_call_refused_for_too_many_abandoned_threads_is_a_tool_failed_result(
    hangs: Hangs, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = DaemonThreadPool(4, max_abandoned=2)
    monkeypatch.setattr(threads, "tool_threads", lambda: pool)

    @tool(timeout=0.05)
    def stuck() -> str:
        """Hang."""
        return hangs()

    @tool
    def quick() -> str:
        """Answer at once."""
        return "quick"

    model = ScriptedProvider([call("stuck", {}), call("stuck", {}), call("quick", {}), reply("ok")])
    result = await Agent(model, tools=[stuck, quick]).run("go")
    codes = [m.tool_results[0].code for m in result.messages if m.role == "tool"]
    assert codes == ["tool_timeout", "tool_timeout", "tool_failed"]
    refused = result.messages[-2].tool_results[0]
    assert "still running on their threads" in refused.content
    assert result.text == "ok"
