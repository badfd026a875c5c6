"""The interruptible wait (``Interrupter.wait``): each step of its contract, on a real event loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

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


async def items(*values: int, waits: asyncio.Event | None = None) -> AsyncIterator[int]:
    for value in values:
        if waits is not None:
            await waits.wait()
        yield value


class Picking:
    """A watch's picker made of a function (the tests' own): ``also`` says what more an item shows, held."""

    def __init__(self, pick: Callable[[int], int | None], also: Callable[[int], list[int]] | None = None) -> None:
        self._pick, self._also = pick, also
        self.held: list[int] | None = None

    def pick(self, value: int) -> int | None:
        if self._also is not None:
            self.held = self._also(value) or None
        return self._pick(value)

    def release(self) -> int:
        assert self.held
        value = self.held.pop(0)
        if not self.held:
            self.held = None
        return value


def only_odd(value: int) -> int | None:
    return value if value % 2 else None


odd = Picking(only_odd)


async def test_a_watched_stream_hands_each_picked_item_out_disarmed_and_none_at_its_end() -> None:
    interrupter = attached()
    seen, picked = [], []

    def pick(value: int) -> int | None:
        picked.append((value, interrupter.armed))  # told of every item, while armed
        return only_odd(value)

    watched = interrupter.watch(items(1, 2, 3, 4), Picking(pick))
    while (item := await watched.next()) is not None:
        seen.append((item, interrupter.armed))
    assert picked == [(1, True), (2, True), (3, True), (4, True)]
    assert seen == [(1, False), (3, False)]
    assert not interrupter.armed


async def test_what_an_item_holds_is_handed_on_before_the_stream_is_waited_for_again() -> None:
    interrupter = attached()
    gate = asyncio.Event()
    gate.set()
    stream = items(1, 2, waits=gate)
    watched = interrupter.watch(stream, Picking(lambda value: value, also=lambda value: [value * 10, value * 100]))
    assert await watched.next() == 1
    gate.clear()  # the stream's next item now waits: what 1 held must not
    assert [await watched.next(), await watched.next()] == [10, 100]
    gate.set()
    assert [await watched.next(), await watched.next(), await watched.next()] == [2, 20, 200]
    assert await watched.next() is None


async def test_an_interrupt_while_the_host_holds_an_item_is_raised_when_the_next_is_asked_for() -> None:
    interrupter = attached()
    watched = interrupter.watch(items(1, 2, 3), odd)
    assert await watched.next() == 1
    interrupter.request(STOP)  # disarmed: recorded, nothing is cancelled under the host's code
    await asyncio.sleep(0)  # the host's own await is not cancelled
    with pytest.raises(Interrupted):
        await watched.next()
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0


async def test_an_interrupt_while_the_stream_waits_cancels_the_wait() -> None:
    interrupter = attached()
    never = asyncio.Event()
    asyncio.get_running_loop().call_soon(interrupter.request, STOP)
    with pytest.raises(Interrupted) as raised:
        await interrupter.watch(items(1, waits=never), odd).next()
    assert raised.value.interrupt is STOP
    assert not interrupter.armed
    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0
