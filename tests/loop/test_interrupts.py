"""The interruptible wait (``Interrupter.wait``): each step of its contract, on a real event loop."""

from __future__ import annotations

import asyncio

import pytest

from tether.limits import StopReason
from tether.loop.interrupts import Interrupt, Interrupted, Interrupter

STOP = Interrupt(StopReason.CANCELLED, "stop")


def attached() -> Interrupter:
    interrupter = Interrupter()
    interrupter.attach()
    return interrupter


async def forever() -> None:
    await asyncio.get_running_loop().create_future()


async def test_a_pending_interrupt_raises_at_once_and_the_wait_never_starts() -> None:
    interrupter = attached()
    interrupter.request(STOP)
    started = []

    async def waited() -> None:
        started.append(True)

    with pytest.raises(Interrupted) as raised:
        await interrupter.wait(waited())
    assert raised.value.interrupt is STOP
    assert started == []
    assert not interrupter.armed


async def test_an_interrupt_during_the_wait_cancels_it_and_is_raised_as_interrupted() -> None:
    interrupter = attached()
    asyncio.get_running_loop().call_soon(interrupter.request, STOP)
    with pytest.raises(Interrupted):
        await interrupter.wait(forever())
    assert not interrupter.armed
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0  # our cancel was withdrawn
    await asyncio.sleep(0)  # and does not land later


async def test_the_hosts_cancel_stays_a_cancel_even_with_an_interrupt_of_ours() -> None:
    interrupter = Interrupter()
    armed = asyncio.Event()

    async def waited() -> None:
        armed.set()
        await forever()

    async def run() -> None:
        interrupter.attach()
        await interrupter.wait(waited())

    task = asyncio.create_task(run())
    await armed.wait()
    interrupter.request(STOP)  # our cancel
    task.cancel()  # and the host's, before either lands
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_cancel_sent_as_the_wait_ends_is_absorbed_before_the_next_await() -> None:
    interrupter = attached()

    async def waited() -> int:
        interrupter.request(STOP)  # fires while armed, but the wait is already over
        return 7

    assert await interrupter.wait(waited()) == 7
    assert not interrupter.armed
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0
    await asyncio.sleep(0)  # would raise CancelledError if the cancel had been left on the task
    assert interrupter.pending is STOP


async def test_any_other_way_out_leaves_the_interrupter_disarmed() -> None:
    interrupter = attached()

    async def waited() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await interrupter.wait(waited())
    assert not interrupter.armed
