"""What one more layer of async generator costs a step: the figure behind flattening the engine's generators.

Run: .venv/bin/python bench/layers.py          (needs valgrind; about a minute)

A step of the loop hands its events up through async generators (``Run._turns``, one per run; ``_infer``, one
per provider call; a streamed provider's own). This counts, under callgrind, the instructions of an iteration
that consumes four events from one async generator, and of one that consumes them through a second generator
relaying them, each created and closed per iteration as the engine's are: the difference is what a layer costs
(its creation, asyncio's first-iteration hook and its ``WeakSet``, four hops, the close).
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections.abc import AsyncGenerator

EVENTS = 4


async def leaf() -> AsyncGenerator[int, None]:
    for number in range(EVENTS):
        yield number


async def relay() -> AsyncGenerator[int, None]:
    inner = leaf()
    try:
        async for event in inner:
            yield event
    finally:
        await inner.aclose()


async def consume(layers: int, iterations: int) -> None:
    make = relay if layers == 2 else leaf
    for _ in range(iterations):
        events = make()
        try:
            async for _event in events:
                pass
        finally:
            await events.aclose()


def counted(layers: int, iterations: int) -> int:
    completed = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__,
         str(layers), str(iterations)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    found = re.search(r"Collected : (\d+)", completed.stderr)
    assert found is not None, completed.stderr[-2000:]
    return int(found[1])


def main() -> None:
    small, large = 1_000, 5_000
    per_iteration = {layers: (counted(layers, large) - counted(layers, small)) / (large - small) for layers in (1, 2)}
    print(f"instructions per iteration ({EVENTS} events): one generator {per_iteration[1]:,.0f}, "
          f"two {per_iteration[2]:,.0f}; a layer costs {per_iteration[2] - per_iteration[1]:,.0f}")  # fmt: skip


if __name__ == "__main__":
    if len(sys.argv) == 3:
        asyncio.run(consume(int(sys.argv[1]), int(sys.argv[2])))
    else:
        main()
