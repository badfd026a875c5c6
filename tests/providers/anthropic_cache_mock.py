"""A loopback Anthropic Messages server with a prompt cache that counts the way the API does.

It keeps every request body, plays a scripted tool loop (a ``lookup`` call a turn until ``turns`` answers have
been given, then a final text), and reports usage as Anthropic does:

* A request is its blocks in the API's order: each tool, each system block, each message's content blocks.
  A prefix is cached when it ends at a block marked ``cache_control`` (a top-level ``cache_control`` marks the
  last block) and is at least ``minimum`` tokens long; the cache ignores the markers themselves.
* For each breakpoint the server looks for a cached prefix ending there or up to twenty blocks before it; the
  longest hit is read (``cache_read_input_tokens``). What lies between it and the last breakpoint is written
  (``cache_creation_input_tokens``), and the rest is ``input_tokens``: Anthropic's input excludes both.
* A token is four bytes of the block's JSON.

It also refuses, as the API does with a 400, a body with more than four breakpoints or with a TTL longer than an
earlier one's. ``bench/prompt_cache.py`` prices the same run with and without caching against it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from aiohttp import web

LOOKBACK = 20
MAX_BREAKPOINTS = 4


def _canonical(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def blocks_of(body: dict[str, Any]) -> list[tuple[Any, dict[str, Any] | None]]:
    """The body's blocks in the API's order, each with its ``cache_control`` (``None``: not a breakpoint)."""
    blocks: list[tuple[Any, dict[str, Any] | None]] = [(t, t.get("cache_control")) for t in body.get("tools", [])]
    system = body.get("system")
    if isinstance(system, str):
        blocks.append(({"type": "text", "text": system}, None))
    elif isinstance(system, list):
        blocks += [(b, b.get("cache_control")) for b in system]
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        blocks += [({"role": message["role"], **b}, b.get("cache_control")) for b in content]
    if "cache_control" in body and blocks:
        blocks[-1] = (blocks[-1][0], body["cache_control"])
    return blocks


def refusal(body: dict[str, Any]) -> str | None:
    """Why the API would refuse ``body``'s breakpoints, or ``None``."""
    marks = [mark for _, mark in blocks_of(body) if mark is not None]
    if len(marks) > MAX_BREAKPOINTS:
        return f"A maximum of 4 blocks with cache_control may be provided. Found {len(marks)}."
    ttls = [1 if mark.get("ttl", "5m") == "5m" else 2 for mark in marks]
    if any(later > earlier for earlier, later in pairwise(ttls)):
        return "a ttl='1h' cache_control block must not come after a ttl='5m' cache_control block"
    return None


@dataclass
class CacheServer:
    """The server's state: the bodies it was sent, its cache, and the script it plays."""

    turns: int = 30
    minimum: int = 1024
    bodies: list[dict[str, Any]] = field(default_factory=list)
    usages: list[dict[str, int]] = field(default_factory=list)
    cached: set[str] = field(default_factory=set)

    def usage(self, body: dict[str, Any]) -> dict[str, int]:
        """The usage the API would report for ``body``, and the prefixes it writes into the cache."""
        blocks = blocks_of(body)
        digest = hashlib.sha256(body["model"].encode())
        keys, ends, total = [], [], 0
        for block, _ in blocks:
            text = json.dumps(_canonical(block), sort_keys=True)
            digest.update(text.encode())
            keys.append(digest.hexdigest())
            total += len(text) // 4
            ends.append(total)
        marks = [i for i, (_, mark) in enumerate(blocks) if mark is not None]
        read = 0
        for mark in marks:
            for i in range(mark, max(mark - LOOKBACK, -1), -1):
                if keys[i] in self.cached:
                    read = max(read, ends[i])
                    break
        written = 0
        for mark in marks:
            if ends[mark] >= self.minimum and keys[mark] not in self.cached:
                self.cached.add(keys[mark])
                written = max(written, ends[mark] - read)
        return {
            "input_tokens": total - read - written,
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": read,
            "output_tokens": 40,
        }

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant") + 1
        if turn < self.turns:
            content = [{"type": "tool_use", "id": f"toolu_{turn}", "name": "lookup", "input": {"n": turn}}]
            stop = "tool_use"
        else:
            content, stop = [{"type": "text", "text": "All records read."}], "end_turn"
        usage = self.usage(body)
        self.usages.append(usage)
        message = {"id": f"msg_{turn}", "type": "message", "role": "assistant", "model": body["model"]}
        return {**message, "content": content, "stop_reason": stop, "usage": usage}

    def app(self) -> web.Application:
        async def messages(request: web.Request) -> web.Response:
            body = await request.json()
            self.bodies.append(body)
            if (why := refusal(body)) is not None:
                error = {"type": "error", "error": {"type": "invalid_request_error", "message": why}}
                return web.json_response(error, status=400)
            return web.json_response(self.answer(body))

        app = web.Application()
        app.router.add_post("/v1/messages", messages)
        return app


INSTRUCTIONS = " ".join(
    f"Rule {n}: read each record in full, quote its fields exactly, and never guess a value you have not read."
    for n in range(1, 61)
)
"""A system prompt of about 1,600 tokens (at four bytes a token): the run's stable prefix with the tools."""
RECORD = "field=value; " * 120
"""What a lookup gives back: about 400 tokens a turn."""
