"""Anthropic prompt caching: the breakpoints every request carries, over real HTTP against a server that caches
and counts as the API does (``anthropic_cache_mock.py``), and the rules the API sets on them."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from tests.providers.anthropic_cache_mock import INSTRUCTIONS, RECORD, CacheServer, blocks_of, refusal
from tests.providers.conftest import Serve
from tether import Agent, Limits, Message, tool
from tether.errors import ConfigInvalid
from tether.events import StreamEnd
from tether.messages import Text, Thinking
from tether.providers.anthropic import AnthropicProvider
from tether.providers.base import ModelSettings, Request, ToolDefinition
from tether.providers.registry import resolve

LOOKUP = ToolDefinition("lookup", "Read record n.", {"type": "object", "properties": {"n": {"type": "integer"}}})
MARK = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}


@tool
async def lookup(n: int) -> str:
    """Read record n."""
    return f"record {n}: {RECORD}"


def anthropic(url: str, **options: Any) -> AnthropicProvider:
    return AnthropicProvider("claude-sonnet-4-5", base_url=f"{url}/v1", api_key="k", stream=False, **options)


async def scripted_run(serve: Serve, **options: Any) -> tuple[CacheServer, Any]:
    server = CacheServer(turns=30)
    agent = Agent(anthropic(await serve(server.app()), **options), tools=[lookup], system=INSTRUCTIONS,
                  limits=Limits(max_turns=40))  # fmt: skip
    result = await agent.run("Read records 1 to 29, one at a time, then say you are done.")
    return server, result


def marked(body: dict[str, Any]) -> list[str]:
    """Where ``body``'s breakpoints are: ``tool i``, ``system i``, ``message i block j``."""
    places = [f"tool {i}" for i, t in enumerate(body.get("tools", [])) if "cache_control" in t]
    system = body.get("system")
    if isinstance(system, list):
        places += [f"system {i}" for i, b in enumerate(system) if "cache_control" in b]
    for i, message in enumerate(body["messages"]):
        places += [f"message {i} block {j}" for j, b in enumerate(message["content"]) if "cache_control" in b]
    return places


async def test_a_30_turn_run_marks_the_last_tool_the_system_prompt_and_the_moving_end_within_four(
    serve: Serve,
) -> None:
    server, result = await scripted_run(serve)

    assert result.text == "All records read."
    assert len(server.bodies) == 30
    for body in server.bodies:
        assert refusal(body) is None
        last = len(body["messages"]) - 1
        expected = [f"message {last} block {len(body['messages'][last]['content']) - 1}", "tool 0", "system 0"]
        if last >= 2:  # the previous request's last message, where it wrote
            expected.append(f"message {last - 2} block {len(body['messages'][last - 2]['content']) - 1}")
        assert sorted(marked(body)) == sorted(expected)
        assert [m for _, m in blocks_of(body) if m is not None] == [MARK] * len(expected)


async def test_each_turn_reads_what_the_turn_before_wrote_and_the_run_counts_it(serve: Serve) -> None:
    server, result = await scripted_run(serve)

    first, *later = server.usages
    assert first["cache_read_input_tokens"] == 0
    assert first["cache_creation_input_tokens"] > 1024
    for before, usage in zip(server.usages, later, strict=False):
        prefix = before["cache_read_input_tokens"] + before["cache_creation_input_tokens"]
        assert usage["cache_read_input_tokens"] == prefix, "the whole of the previous prompt is read back"
    assert result.usage.cache_read_tokens == sum(u["cache_read_input_tokens"] for u in server.usages)
    assert result.usage.cache_write_tokens == sum(u["cache_creation_input_tokens"] for u in server.usages)
    assert result.usage.input_tokens == sum(u["input_tokens"] for u in server.usages)


async def test_with_the_cache_off_no_breakpoint_is_sent_nothing_is_read_and_the_run_costs_several_times_more(
    serve: Serve,
) -> None:
    off_server, off = await scripted_run(serve, prompt_cache="off")
    _, on = await scripted_run(serve)

    assert all(marked(body) == [] for body in off_server.bodies)
    assert off.usage.cache_read_tokens == off.usage.cache_write_tokens == 0
    assert off.cost is not None
    assert on.cost is not None
    assert off.cost.total_usd > 3 * on.cost.total_usd


async def test_one_hour_breakpoints_carry_their_ttl(serve: Serve) -> None:
    server, _ = await scripted_run(serve, prompt_cache="1h")

    assert all(m == HOUR for body in server.bodies for _, m in blocks_of(body) if m is not None)
    assert all(len(marked(body)) in (3, 4) for body in server.bodies)


async def test_a_compacted_history_still_reads_the_tools_and_system_prompt(serve: Serve) -> None:
    """Compaction replaces messages only: a request whose history changed reads the stable prefix back."""
    server = CacheServer()
    provider = anthropic(await serve(server.app()))
    history = (Message.user("Read record 1."), Message.assistant("Record 1 read."), Message.user("Now record 2."))
    summary = (Message.user("Summary: record 1 was read. Now record 2."),)

    for messages in (history, summary):
        events = [e async for e in provider.stream(Request(messages, system=INSTRUCTIONS, tools=(LOOKUP,)))]
    end = events[-1]

    assert isinstance(end, StreamEnd)
    stable = [block for block, _ in blocks_of(server.bodies[1]) if "role" not in block]
    stable_tokens = sum(len(json.dumps({k: v for k, v in b.items() if k != "cache_control"}, sort_keys=True)) // 4
                        for b in stable)  # fmt: skip
    assert end.usage.cache_read_tokens == server.usages[1]["cache_read_input_tokens"] > 0
    assert abs(end.usage.cache_read_tokens - stable_tokens) <= len(stable)


def body_of(provider: AnthropicProvider, request: Request) -> dict[str, Any]:
    """The body as sent, checked against the same body built as plain data."""
    sent: dict[str, Any] = msgspec.json.decode(provider.request_payload(request))
    assert sent == provider.request_body(request)
    return sent


def offline(**options: Any) -> AnthropicProvider:
    return AnthropicProvider("claude-sonnet-4-5", base_url="http://127.0.0.1:9/v1", api_key="k", **options)


def test_breakpoints_set_in_extra_count_against_the_four_and_the_newest_of_ours_is_kept() -> None:
    system = [
        {"type": "text", "text": "a", "cache_control": MARK},
        {"type": "text", "text": "b", "cache_control": MARK},
    ]
    extra = {"system": system, "cache_control": MARK}  # the API's automatic caching marks the last block
    request = Request((Message.user("hi"),), tools=(LOOKUP,), settings=ModelSettings(extra=extra))

    body = body_of(offline(), request)

    assert refusal(body) is None
    assert marked(body) == ["tool 0", "system 0", "system 1"], "the last message is marked by the top-level field"


def test_a_longer_ttl_is_never_placed_after_a_shorter_one_set_by_hand() -> None:
    extra = {"system": [{"type": "text", "text": "rules", "cache_control": MARK}]}
    history = (Message.user("a"), Message.assistant("b"), Message.user("c"))
    request = Request(history, tools=(LOOKUP,), settings=ModelSettings(extra=extra))

    body = body_of(offline(prompt_cache="1h"), request)

    assert refusal(body) is None
    assert [m for _, m in blocks_of(body) if m is not None] == [HOUR, MARK, MARK, MARK]


def test_a_reasoning_block_is_never_marked_the_block_before_it_is() -> None:
    signed = Thinking("hmm", signature="sig", provider_data={"origin": "anthropic"})
    last = Message("assistant", (Text("so far"), signed))
    body = body_of(offline(), Request((Message.user("go on"), last), system="rules"))

    assert marked(body) == ["system 0", "message 1 block 0"]
    assert body["messages"][1]["content"][1]["type"] == "thinking"


def test_the_setting_is_checked_and_belongs_to_anthropic_models() -> None:
    with pytest.raises(ConfigInvalid, match="prompt_cache must be one of"):
        offline(prompt_cache="2h")
    with pytest.raises(ConfigInvalid, match="applies to 'anthropic:' models"):
        resolve("openai:gpt-4o", api_key="k", prompt_cache="5m")
    assert Agent("anthropic:claude-sonnet-4-5", api_key="k", prompt_cache="off").provider.prompt_cache == "off"  # type: ignore[attr-defined]
