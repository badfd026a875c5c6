"""The daemon thread pool that runs synchronous tools: real concurrency, a cap on threads, thread reuse,
context variables, exceptions and cancellation reaching (or not breaking) the awaiting side."""

import asyncio
import contextvars
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tether.tools.threads import DaemonThreadPool, run_in_tool_thread, tool_threads

WAIT = 5.0
"""Upper bound for any blocking wait, so that a broken pool fails the test instead of hanging it."""

request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="unset")


@pytest.fixture
async def loop_errors() -> AsyncIterator[list[dict[str, Any]]]:
    """What reaches the event loop's exception handler during the test (errors in callbacks, say)."""
    loop = asyncio.get_running_loop()
    errors: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: errors.append(context))
    yield errors
    loop.set_exception_handler(previous)


async def test_blocking_calls_submitted_together_run_concurrently() -> None:
    # Each call blocks until all four are inside the barrier; run one after another, the first would time out.
    barrier = threading.Barrier(4, timeout=WAIT)

    def meet() -> int:
        barrier.wait()
        return threading.get_ident()

    idents = await asyncio.gather(*(run_in_tool_thread(meet) for _ in range(4)))
    assert len(set(idents)) == 4


async def test_calls_do_not_run_on_the_event_loop_thread() -> None:
    assert await run_in_tool_thread(threading.get_ident) != threading.get_ident()


async def test_the_result_reaches_the_awaiting_coroutine() -> None:
    assert await run_in_tool_thread(lambda: {"answer": 42}) == {"answer": 42}


async def test_tool_threads_are_daemon_threads() -> None:
    assert await run_in_tool_thread(lambda: threading.current_thread().daemon) is True


def test_every_caller_shares_one_pool() -> None:
    assert tool_threads() is tool_threads()


async def test_sequential_calls_reuse_threads() -> None:
    pool = DaemonThreadPool(8)
    idents = {await pool.submit(threading.get_ident) for _ in range(20)}
    # At most one call is in flight, so one thread would do; a second may start when a call is submitted
    # in the instant between the previous result arriving and its thread marking itself free.
    assert len(idents) <= 2


async def test_calls_past_the_thread_limit_wait_for_a_free_thread() -> None:
    pool = DaemonThreadPool(1)
    started, release = threading.Event(), threading.Event()

    def hold() -> int:
        started.set()
        release.wait(WAIT)
        return threading.get_ident()

    first = pool.submit(hold)
    assert await asyncio.to_thread(started.wait, WAIT)
    second = pool.submit(threading.get_ident)
    release.set()
    assert await first == await second


async def test_pool_with_room_for_two_runs_two_at_once() -> None:
    pool = DaemonThreadPool(2)
    barrier = threading.Barrier(2, timeout=WAIT)
    await asyncio.gather(pool.submit(barrier.wait), pool.submit(barrier.wait))


async def test_context_variables_are_copied_into_the_thread() -> None:
    request_id.set("r-42")
    assert await run_in_tool_thread(request_id.get) == "r-42"


async def test_context_changes_do_not_leak_into_the_next_call_on_the_same_thread() -> None:
    pool = DaemonThreadPool(1)
    request_id.set("caller")

    def change() -> str:
        request_id.set("changed")
        return request_id.get()

    assert await pool.submit(change) == "changed"
    assert await pool.submit(request_id.get) == "caller"


async def test_exception_propagates_to_the_awaiting_coroutine() -> None:
    error = KeyError("missing")

    def fail() -> None:
        raise error

    with pytest.raises(KeyError) as caught:
        await run_in_tool_thread(fail)
    assert caught.value is error


async def test_pool_keeps_working_after_a_call_raised() -> None:
    pool = DaemonThreadPool(1)

    def fail() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await pool.submit(fail)
    assert await pool.submit(lambda: "still here") == "still here"


async def test_stop_iteration_raised_by_a_call_reaches_the_awaiting_coroutine(
    loop_errors: list[dict[str, Any]],
) -> None:
    # asyncio futures refuse StopIteration; the pool must still settle the future somehow.
    pool = DaemonThreadPool(1)
    exhausted = pool.submit(lambda: next(iter([])))
    await pool.submit(lambda: None)  # one thread, results in order: the first has been settled by now
    assert exhausted.done(), f"future never settled; the event loop got: {loop_errors}"
    error = exhausted.exception()
    assert error is not None
    assert isinstance(error, StopIteration) or isinstance(error.__cause__, StopIteration)


async def test_a_call_abandoned_while_waiting_in_line_is_not_run(loop_errors: list[dict[str, Any]]) -> None:
    pool = DaemonThreadPool(1)
    started, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def hold() -> None:
        started.set()
        release.wait(WAIT)

    busy = pool.submit(hold)
    assert await asyncio.to_thread(started.wait, WAIT)
    waiting = pool.submit(lambda: ran.append("abandoned call"))  # in line behind the busy thread
    waiting.cancel()
    release.set()
    await busy
    # One thread, jobs in order: the abandoned one has been taken up (and skipped) before this one runs.
    assert await pool.submit(lambda: "next") == "next"
    assert ran == []
    assert waiting.cancelled()
    assert loop_errors == []


async def test_cancelling_the_awaiting_task_does_not_break_the_pool(loop_errors: list[dict[str, Any]]) -> None:
    pool = DaemonThreadPool(1)
    started, release = threading.Event(), threading.Event()

    def hold() -> None:
        started.set()
        release.wait(WAIT)
        raise RuntimeError("failed after its caller left")

    waiter = asyncio.ensure_future(pool.submit(hold))
    assert await asyncio.to_thread(started.wait, WAIT)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    release.set()
    assert await pool.submit(lambda: "next") == "next"
    assert loop_errors == []
