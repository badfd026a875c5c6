"""The floor: the smallest agent loop one could write by hand on aiohttp, for the same workload.

No framework: one shared ``ClientSession``, the request built as a dict, the answer parsed with ``json``,
the tool called directly, the messages appended. What tether costs above this is what tether adds.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import aiohttp

_session: aiohttp.ClientSession | None = None

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }
]


def session() -> aiohttp.ClientSession:
    global _session
    if _session is None:
        connector = aiohttp.TCPConnector(limit=4096, limit_per_host=4096)
        _session = aiohttp.ClientSession(connector=connector)
    return _session


async def close() -> None:
    global _session
    if _session is not None:
        await _session.close()
        _session = None


def add(a: int, b: int) -> int:
    return a + b


async def run(
    base_url: str,
    model: str,
    prompt: str,
    *,
    stream: bool,
    on_turn: Callable[[int], None] | None = None,
    on_first_text: Callable[[str], None] | None = None,
) -> str:
    """One agent run; returns the final text."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
    url = base_url + "/chat/completions"
    turn = 0
    while True:
        turn += 1
        if on_turn is not None:
            on_turn(turn)
        body: dict[str, Any] = {"model": model, "messages": messages, "tools": TOOLS, "stream": stream}
        async with session().post(url, data=json.dumps(body), headers={"Content-Type": "application/json"}) as response:
            if stream:
                content, calls = await _read_stream(response, on_first_text)
            else:
                message = (await response.json())["choices"][0]["message"]
                content, calls = message.get("content") or "", message.get("tool_calls") or []
        if not calls:
            return content
        messages.append({"role": "assistant", "content": content or None, "tool_calls": calls})
        for call in calls:
            arguments = json.loads(call["function"]["arguments"])
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": str(add(**arguments))})


async def _read_stream(
    response: aiohttp.ClientResponse, on_first_text: Callable[[str], None] | None
) -> tuple[str, list[dict[str, Any]]]:
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    async for line in response.content:
        if not line.startswith(b"data: "):
            continue
        data = line[6:].strip()
        if data == b"[DONE]":
            break
        chunk = json.loads(data)
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            if content := delta.get("content"):
                if not text and on_first_text is not None:
                    on_first_text(content)
                text.append(content)
            for piece in delta.get("tool_calls") or ():
                call = calls.setdefault(
                    piece["index"], {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                )
                call["id"] = piece.get("id") or call["id"]
                function = piece.get("function") or {}
                call["function"]["name"] += function.get("name") or ""
                call["function"]["arguments"] += function.get("arguments") or ""
    return "".join(text), [calls[i] for i in sorted(calls)]


def now_ns() -> int:
    return time.monotonic_ns()
