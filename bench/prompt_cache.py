"""What Anthropic prompt caching saves: one 30-turn tool run priced with and without it.

Run: python bench/prompt_cache.py [TURNS]

The run is tests/providers/test_prompt_cache.py's: a system prompt of about 1,600 tokens, one tool whose result
is about 400 tokens a turn, ``TURNS`` requests (30 by default), against the loopback server of
``tests/providers/anthropic_cache_mock.py``, which caches and reports usage as the API does. It is priced at
``claude-sonnet-4-5``'s list prices (input $3, cache write $3.75, cache read $0.30, output $15 per million
tokens), once with ``prompt_cache="off"`` and once with the default breakpoints, and prints both costs, the
tokens of each kind and the ratio.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.providers.anthropic_cache_mock import INSTRUCTIONS, RECORD, CacheServer

from tether import Agent, Limits, tool
from tether.providers.anthropic import AnthropicProvider


@tool
async def lookup(n: int) -> str:
    """Read record n."""
    return f"record {n}: {RECORD}"


async def priced_run(turns: int, prompt_cache: str) -> Any:
    server = CacheServer(turns=turns)
    runner = web.AppRunner(server.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    try:
        provider = AnthropicProvider(
            "claude-sonnet-4-5", base_url=url, api_key="k", stream=False, prompt_cache=prompt_cache
        )
        agent = Agent(provider, tools=[lookup], system=INSTRUCTIONS, limits=Limits(max_turns=turns + 10))
        result = await agent.run(f"Read records 1 to {turns - 1}, one at a time, then say you are done.")
    finally:
        await runner.cleanup()
    assert len(server.bodies) == turns, "every turn reached the server"
    return result


async def main(turns: int) -> None:
    rows = []
    for setting in ("off", "5m"):
        result = await priced_run(turns, setting)
        usage = result.usage
        rows.append((setting, result.cost.total_usd, usage))
        print(
            f"prompt_cache={setting:>3}: ${result.cost.total_usd:.4f}  input {usage.input_tokens:>7,}  "
            f"cache write {usage.cache_write_tokens:>6,}  cache read {usage.cache_read_tokens:>7,}  "
            f"output {usage.output_tokens:>5,}  ({usage.requests} requests)"
        )
    print(f"{turns} turns: {rows[0][1] / rows[1][1]:.1f} times cheaper with caching")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 30))
