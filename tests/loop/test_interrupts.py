"""The interruptible wait (``Interrupter.waiting``): each step of its contract, on a real event loop."""

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


async def test_a_pending_interrupt_raises_on_entry_without_starting_the_wait() -> None:
    interrupter = attached()
    interrupter.request(STOP)
    started = []
    with pytest.raises(Interrupted) as raised:
        async with interrupter.waiting():
            started.append(True)
    assert raised.value.interrupt is STOP
    assert started == []
    assert not interrupter.armed


async def test_an_interrupt_during_the_wait_cancels_it_and_is_raised_as_interrupted() -> None:
    interrupter = attached()
    never = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_soon(interrupter.request, STOP)
    with pytest.raises(Interrupted):
        async with interrupter.waiting():
            await never
    assert not interrupter.armed
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0  # our cancel was withdrawn
    await asyncio.sleep(0)  # and does not land later


async def test_the_hosts_cancel_stays_a_cancel_even_with_an_interrupt_of_ours() -> None:
    interrupter = Interrupter()
    armed = asyncio.Event()

    async def run() -> None:
        interrupter.attach()
        async with interrupter.waiting():
            armed.set()
            await asyncio.get_running_loop().create_future()

    task = asyncio.create_task(run())
    await armed.wait()
    interrupter.request(STOP)  # our cancel
    task.cancel()  # and the host's, before either lands
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_cancel_sent_as_the_wait_ends_is_absorbed_before_the_next_await() -> None:
    interrupter = attached()
    async with interrupter.waiting():
        interrupter.request(STOP)  # fires while armed, but the awaited thing is already done
    assert not interrupter.armed
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0
    await asyncio.sleep(0)  # would raise CancelledError if the cancel had been left on the task
    assert interrupter.pending is STOP


async def test_any_other_way_out_leaves_the_interrupter_disarmed() -> None:
    interrupter = attached()
    with pytest.raises(ValueError, match="boom"):
        async with interrupter.waiting():
            raise ValueError("boom")
    assert not interrupter.armed
