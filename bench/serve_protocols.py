"""What a served run's stream costs per event, per protocol: a run's events translated and encoded as the server
sends them (``tether.serve``): AG-UI (``agui``: pydantic events, the official encoder), the AI SDK's UI message
stream (``vercel``: dicts, msgspec) and the page's JSON (``events_json.Stream``), each with and without a known key
to hold text back for (``HeldText``).

Run: .venv/bin/python bench/serve_protocols.py [--deltas N] [--repeat N]          (about 10 seconds)

The run is scripted (``ScriptedProvider``): a turn of thinking, text and two tool calls, then an answer of
``--deltas`` text deltas (a streamed answer is mostly deltas). Its events are made once; the figure is CPU
microseconds per event to translate and encode them all, the median of ``--repeat`` rounds, with the events per
run and the bytes sent per event.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

from tether import Agent
from tether.events import RunEvent
from tether.providers.scripted import ScriptedProvider, call, parallel, reply
from tether.redaction import Redaction
from tether.secrets import Masker
from tether.serve import agui, events_json, vercel
from tether.tools import tool

KEY = "sk-bench-0123456789abcdefghij"


@tool
def lookup(number: str) -> str:
    """Look an invoice up."""
    return f"invoice {number}: 12.5 EUR"


async def run_events(deltas: int) -> list[RunEvent]:
    answer = "The invoice A1 costs twelve euros and fifty cents. " * (deltas // 10 + 1)
    model = ScriptedProvider(
        [
            parallel(
                call("lookup", {"number": "A1"}),
                call("lookup", {"number": "B2"}),
                thinking="Look both up.",
                text="Checking.",
            ),
            reply(answer[: deltas * 5], chunk_size=5),
        ]
    )
    return [event async for event in Agent(model, tools=[lookup]).stream("Totals?")]


def agui_stream(redaction: Redaction) -> Callable[[list[RunEvent]], int]:
    def stream(events: list[RunEvent]) -> int:
        translator = agui.Translator("thread", "run", redaction=redaction)
        return sum(len(agui.encode(e)) for event in events for e in translator.events(event))

    return stream


def vercel_stream(redaction: Redaction) -> Callable[[list[RunEvent]], int]:
    def stream(events: list[RunEvent]) -> int:
        translator = vercel.Translator("message", redaction=redaction)
        sent = sum(len(vercel.encode_part(p)) for event in events for p in translator.events(event))
        return sent + len(vercel.DONE)

    return stream


def json_stream(redaction: Redaction) -> Callable[[list[RunEvent]], int]:
    def stream(events: list[RunEvent]) -> int:
        page = events_json.Stream(redaction)
        return sum(len(events_json.sse(data)) for event in events for data in page.events(event))

    return stream


def measure(stream: Callable[[list[RunEvent]], int], events: list[RunEvent], repeat: int) -> tuple[float, int]:
    sent = stream(events)  # warm-up
    rounds = []
    for _ in range(repeat):
        start = time.process_time()
        stream(events)
        rounds.append((time.process_time() - start) / len(events) * 1e6)
    return statistics.median(rounds), sent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deltas", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=15)
    options = parser.parse_args()
    events = asyncio.run(run_events(options.deltas))
    plain, keyed = Redaction(), Redaction(Masker([KEY]))
    print(f"{len(events)} events a run")
    print(f"{'stream':<28}{'µs/event':>10}{'bytes/event':>13}")
    cases: list[tuple[str, Any]] = [
        ("agui", agui_stream(plain)),
        ("agui, a known key", agui_stream(keyed)),
        ("vercel", vercel_stream(plain)),
        ("vercel, a known key", vercel_stream(keyed)),
        ("events_json", json_stream(plain)),
        ("events_json, a known key", json_stream(keyed)),
    ]
    for name, stream in cases:
        cost, sent = measure(stream, events, options.repeat)
        print(f"{name:<28}{cost:>10.1f}{sent / len(events):>13.0f}")


if __name__ == "__main__":
    main()
