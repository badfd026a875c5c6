"""Instructions per step, tether against the floor, and tether's loop alone: the figures of record for a step's
cost, because they repeat to a fraction of a percent where CPU time on a shared machine moves by 10%.

Run: .venv/bin/python bench/instructions.py [SCENARIO ...]      (needs valgrind; about 4 minutes)

Each scenario (``sequential``, ``streaming``, ``parallel-calls`` or ``concurrent-N``, as in ``run.py``; by default
the first two) runs ``workload.py`` for the floor and for tether under ``valgrind --tool=callgrind`` with 20 and
with 60 timed runs of six steps against ``mock_server.py``; the difference of the client's instructions, divided by
the 240 steps between them, is the cost of a step with start-up and warm-up cancelled out. ``concurrent-N`` runs N
and 3N runs of six steps, N at a time, and divides by the 12N steps between. Each row is printed when it is counted.
The last row, always counted, is tether's loop with no transport at all: an agent whose provider replays the same
six answers (five ``add`` calls, then the final text) from memory, so what is counted is the engine, the
accumulator, the executor, the guard, the events and the records.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
from pathlib import Path

from run import HERE, PYTHON, start_server

ROOT = HERE.parent
STEPS_BETWEEN = 40 * 6

LOOP_ONLY = """
import asyncio, sys
from tether import Agent, Limits, tool
from tether.events import StreamEnd, StreamStart, TextDelta, ToolCallDelta, ToolCallEnd, ToolCallStart
from tether.providers.base import ModelInfo
from tether.usage import Usage


@tool
async def add(a: int, b: int) -> int:
    '''Add two integers.'''
    return a + b


class Replay:
    info = ModelInfo("openai-compatible", "replay", supports_tools=True)

    def __init__(self):
        self.calls = 0

    async def stream(self, request):
        turn = self.calls % 6
        self.calls += 1
        yield StreamStart(model="replay", response_id=f"r{turn}")
        if turn < 5:
            call_id = f"call_{self.calls}"
            yield ToolCallStart(call_id, "add", 0)
            yield ToolCallDelta(call_id, '{"a": %d, "b": 1}' % turn)
            yield ToolCallEnd(call_id)
            yield StreamEnd("tool_calls", Usage(input_tokens=100, output_tokens=10))
        else:
            yield TextDelta("The sum is done.")
            yield StreamEnd("stop", Usage(input_tokens=100, output_tokens=10))


async def main(runs):
    agent = Agent(Replay(), tools=[add], limits=Limits(max_turns=200, max_tool_calls=1000, request_timeout=600))
    for _ in range(runs + 1):
        result = await agent.run("Add the numbers.")
        assert result.stop_reason == "complete", result.stop_reason


asyncio.run(main(int(sys.argv[1])))
"""


def counted(command: list[str], src: Path = ROOT / "src") -> int:
    """The instructions ``command`` executes under callgrind, with tether imported from ``src``."""
    completed = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command],
        capture_output=True, text=True, check=False, cwd=HERE,
        env={**os.environ, "PYTHONPATH": str(src)},
    )  # fmt: skip
    found = re.search(r"Collected : (\d+)", completed.stderr)
    if completed.returncode != 0 or found is None:
        raise SystemExit(f"{command} failed:\n{completed.stderr[-3000:]}")
    return int(found[1])


def per_step(small: list[str], large: list[str], steps: int = STEPS_BETWEEN, src: Path = ROOT / "src") -> float:
    """Instructions a step: ``large`` less ``small``, over the ``steps`` it makes more. ``small`` runs once first
    without callgrind, so that the interpreter's bytecode caches are written before anything is counted: a
    module compiled during one count and not the other would be counted as a difference of the steps."""
    subprocess.run(small, capture_output=True, check=True, cwd=HERE, env={**os.environ, "PYTHONPATH": str(src)})
    return (counted(large, src) - counted(small, src)) / steps


def scenario_step(impl: str, scenario: str, url: str) -> float:
    """Instructions a step of ``scenario`` for ``impl`` (``floor`` or ``tether``)."""
    workload = [PYTHON, str(HERE / "workload.py"), impl]
    if scenario.startswith("concurrent-"):
        n = int(scenario.rpartition("-")[2])
        return per_step([*workload, scenario, url, str(n)], [*workload, scenario, url, str(3 * n)], steps=12 * n)
    return per_step([*workload, f"{scenario}-20", url], [*workload, f"{scenario}-60", url])


def scenario_name(name: str) -> str:
    """A scenario this script counts, checked before anything runs (a wrong name would fail minutes in)."""
    if name in ("sequential", "streaming", "parallel-calls") or re.fullmatch(r"concurrent-[1-9]\d*", name):
        return name
    raise argparse.ArgumentTypeError(f"{name!r}: sequential, streaming, parallel-calls or concurrent-N")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", type=scenario_name, default=["sequential", "streaming"])
    options = parser.parse_args()
    print("Client instructions per step, callgrind (60 runs less 20 runs, over the 240 steps between)\n")
    print("| scenario | floor | tether | ratio |\n|---|---|---|---|", flush=True)
    server, port = start_server()
    try:
        url = f"http://127.0.0.1:{port}/v1"
        for scenario in options.scenarios:  # each row printed when counted: a long count loses nothing
            floor, tether = (scenario_step(impl, scenario, url) for impl in ("floor", "tether"))
            print(f"| {scenario} | {floor:,.0f} | {tether:,.0f} | {tether / floor:.2f}x |", flush=True)
    finally:
        server.terminate()
        server.wait()
    script = [PYTHON, "-c", LOOP_ONLY]
    print(f"| loop alone (no transport) | | {per_step([*script, '20'], [*script, '60']):,.0f} | |")


if __name__ == "__main__":
    main()
