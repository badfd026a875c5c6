"""What a long run pays each turn for its history: a request's body, per wire protocol, and a session's save, per
store, at turn 1 and at turn 60.

Run: .venv/bin/python bench/encoding.py [--repeat N]          (about 20 seconds)

A run sends its whole history every turn, and saves it after every turn. Each provider builds its body from each
message's JSON kept since the message was first sent (``src/tether/message_memo.py``,
``src/tether/providers/memo.py``), so a request at turn 60 (121 messages: the prompt and
60 turns of a tool call and its result) costs about what the new messages cost to encode plus one join.
The tools are kept encoded the same way (while the requests offer the same definitions, as a run's do), which
matters with many of them: ``40 tools`` offers forty described tools (about 40 KB of JSON, a few MCP servers'
worth). ``dict`` is the same request built as a dict of every message and tool and encoded whole
(``request_body`` then ``msgspec.json.encode``), which is what every request cost before the memo (OpenAI
Chat Completions excepted: it kept its messages' and tools' JSON already): it grows with the history.

The history is the one ``run.py``'s ``long-60`` scenario makes (an ``add`` call and its result per turn, the
same message objects turn after turn), with a system prompt and one tool. The figure is CPU microseconds per
request, the median of ``--repeat`` rounds of 300 requests each, in this process (the per-message JSON is kept
from the first round on, as a run keeps it from the turn a message was first sent).

A session is saved the same way: each message is encoded and checked to read back once, when it is first saved
(``src/tether/sessions/codec.py``). The figure is CPU microseconds per save of the whole session at turn 1 and at
turn 60, after the run's saves before it, the median of ``--repeat`` rounds of 50 saves. The file store rewrites
its file every save (atomically, keeping a backup); SQLite writes only the new messages.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from tether.messages import Message, Text, ToolCall, ToolResult
from tether.providers.anthropic import AnthropicProvider
from tether.providers.base import Request, ToolDefinition
from tether.providers.gemini import GeminiProvider
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.openai_responses import OpenAIResponsesProvider
from tether.sessions import FileSessionStore, MemorySessionStore, Session, SQLiteSessionStore

ADD = ToolDefinition(
    "add",
    "Add two integers.",
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]},
)
TOOLS = (ADD,)
"""One tuple for every request, as a run's definitions are."""
MANY_TOOLS = tuple(
    ToolDefinition(
        f"tool_{number}",
        "A tool an MCP server offers, described in a sentence or two as servers describe theirs. " * 2,
        {
            "type": "object",
            "properties": {
                f"option_{n}": {"type": "string", "description": "What this option does. " * 4} for n in range(8)
            },
            "required": ["option_0"],
        },
    )
    for number in range(40)
)
"""Forty tools of eight described parameters each (about 40 KB of JSON), as a few MCP servers offer."""
SYSTEM = "Be brief."
REQUESTS = 300
SAVES = 50

PROVIDERS: dict[str, Callable[[], Any]] = {
    "openai (Chat Completions)": lambda: OpenAIChatProvider("gpt-4o-mini", api_key="k"),
    "openai-responses": lambda: OpenAIResponsesProvider("gpt-4o-mini", api_key="k"),
    "anthropic": lambda: AnthropicProvider("claude-sonnet-4-5", api_key="k"),
    "gemini (3, calls signed)": lambda: GeminiProvider("gemini-3-pro-preview", api_key="k"),
}


def history(turns: int) -> list[Message]:
    """The prompt and ``turns`` tool turns, as a run's transcript holds them."""
    messages = [Message("user", (Text("Add the numbers."),))]
    for turn in range(turns):
        call = ToolCall(f"call_{turn}", "add", {"a": turn, "b": 1}, f'{{"a": {turn}, "b": 1}}')
        messages.append(Message("assistant", (call,)))
        messages.append(Message("tool", (ToolResult(f"call_{turn}", "add", str(turn + 1)),)))
    return messages


def per_request_us(
    encode: Callable[[Request], bytes], messages: tuple[Message, ...], tools: tuple[ToolDefinition, ...], repeat: int
) -> float:
    """Median CPU microseconds to encode a request of ``messages`` (a new ``Request`` each time, as a run makes)."""
    rounds = []
    for _ in range(repeat):
        started = time.process_time()
        for _ in range(REQUESTS):
            encode(Request(messages, system=SYSTEM, tools=tools))
        rounds.append((time.process_time() - started) / REQUESTS * 1e6)
    return statistics.median(rounds)


async def save_us(store: Any, transcript: list[Message], end: int, repeat: int) -> float:
    """Median CPU microseconds to save a session of ``transcript[:end]`` (after the run's saves before it)."""
    session = Session.new(id="bench", model="openai:gpt-4o-mini")
    for turn_end in range(1, end, 2):
        await store.save(session.updated(messages=tuple(transcript[:turn_end])))
    rounds = []
    for _ in range(repeat):
        started = time.process_time()
        for _ in range(SAVES):
            await store.save(session.updated(messages=tuple(transcript[:end])))
        rounds.append((time.process_time() - started) / SAVES * 1e6)
    return statistics.median(rounds)


async def saves(repeat: int) -> None:
    """The session half of the figures: a save at turn 1 and at turn 60, per store."""
    print(f"\nCPU us per session save (median of {repeat} rounds of {SAVES})\n")
    print("| store | turn 1 | turn 60 |")
    print("|---|---|---|")
    with tempfile.TemporaryDirectory() as root:
        stores = {
            "memory": MemorySessionStore(),
            "files": FileSessionStore(Path(root) / "files"),
            "sqlite": SQLiteSessionStore(Path(root) / "sessions.sqlite"),
        }
        for name, store in stores.items():
            transcript = history(60)
            one = await save_us(store, transcript, 1, repeat)
            sixty = await save_us(store, transcript, len(transcript), repeat)
            print(f"| {name} | {one:.1f} | {sixty:.1f} ({sixty / one:.1f}x) |")
        stores["sqlite"].close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    repeat = parser.parse_args().repeat
    print(f"CPU us per request (median of {repeat} rounds); kept: as sent, dict: every message and tool encoded anew\n")
    print("| protocol | turn 1 | turn 60 | turn 1, 40 tools | turn 1, dict | turn 60, dict | turn 1, 40 tools, dict |")
    print("|---|---|---|---|---|---|---|")
    for name, make in PROVIDERS.items():
        provider = make()
        transcript = history(60)
        first, last = tuple(transcript[:1]), tuple(transcript)
        for end in range(1, len(transcript) + 1, 2):  # the run's requests so far: each message sent once before
            provider.request_payload(Request(tuple(transcript[:end]), system=SYSTEM, tools=TOOLS))

        def whole(request: Request, provider: Any = provider) -> bytes:
            return msgspec.json.encode(provider.request_body(request))

        cells = []
        for encode in (provider.request_payload, whole):
            one = per_request_us(encode, first, TOOLS, repeat)
            sixty = per_request_us(encode, last, TOOLS, repeat)
            many = per_request_us(encode, first, MANY_TOOLS, repeat)
            cells += [f"{one:.1f}", f"{sixty:.1f} ({sixty / one:.1f}x)", f"{many:.1f}"]
        print(f"| {name} | " + " | ".join(cells) + " |")
    asyncio.run(saves(repeat))


if __name__ == "__main__":
    main()
