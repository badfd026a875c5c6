"""The embedded local model (providers/local.py), run for real: the bundled SmolLM2-135M through llama.cpp."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from tests.helpers import assert_valid
from tether import Agent, Message, tool
from tether.errors import ConfigInvalid
from tether.events import LlmEvent, StreamEnd, StreamStart, TextDelta
from tether.providers import local
from tether.providers.base import ModelSettings, Request
from tether.providers.local import LocalProvider, resolve_model_path
from tether.providers.registry import resolve


def ask(text: str, max_tokens: int = 8) -> Request:
    return Request((Message.user(text),), settings=ModelSettings(max_tokens=max_tokens))


async def collect(provider: LocalProvider, request: Request) -> list[LlmEvent]:
    return [event async for event in provider.stream(request)]


async def test_tokens_stream_as_text_deltas_with_usage() -> None:
    events = await collect(LocalProvider(), ask("Count from one to ten.", max_tokens=6))
    assert isinstance(events[0], StreamStart)
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) == 6, "one delta per generated token"
    end = events[-1]
    assert isinstance(end, StreamEnd)
    assert end.finish_reason == "length"
    assert end.usage.output_tokens == 6
    assert end.usage.input_tokens > 5


async def test_the_model_is_loaded_once_and_concurrent_runs_are_queued_not_crashed() -> None:
    first, second = LocalProvider(), LocalProvider("smollm2")
    results = await asyncio.gather(collect(first, ask("Say hi.")), collect(second, ask("Say bye.")))
    assert all(isinstance(events[-1], StreamEnd) for events in results)
    assert list(local._models) == [str(first.path)]


async def test_cancelling_stops_generation_within_one_token(monkeypatch: pytest.MonkeyPatch) -> None:
    generated_after_stop: list[int] = []
    real_stream_tokens = local._stream_tokens

    def counting(chunks: Any, stop: threading.Event, put: Any) -> Any:
        def tokens() -> Any:
            after = 0
            try:
                for chunk in chunks:
                    after += stop.is_set()
                    yield chunk
            finally:
                generated_after_stop.append(after)

        return real_stream_tokens(tokens(), stop, put)

    monkeypatch.setattr(local, "_stream_tokens", counting)
    stream = LocalProvider().stream(ask("Write a long story about a lighthouse keeper.", max_tokens=200))
    async for event in stream:
        if isinstance(event, TextDelta):
            break
    await stream.aclose()  # type: ignore[attr-defined]
    assert generated_after_stop, "aclose returned before the worker had stopped"
    assert generated_after_stop[0] <= 1


async def test_an_agent_on_the_bundled_model_uses_the_tool_and_answers_42() -> None:
    calls: list[tuple[int, int]] = []

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        calls.append((a, b))
        return a + b

    result = await Agent("local:smollm2", tools=[add]).run("What is 17+25? Use the add tool.")
    assert calls[0] == (17, 25)
    assert "42" in result.text
    assert_valid(result)


def test_a_model_string_can_name_a_gguf_file() -> None:
    bundled = resolve_model_path("smollm2")
    provider = resolve(f"local:{bundled}")
    assert isinstance(provider, LocalProvider)
    assert provider.path == bundled
    assert provider.info.supports_tools is False
    assert provider.info.supports_json_schema is True


def test_a_missing_model_file_is_a_config_error() -> None:
    with pytest.raises(ConfigInvalid, match="no model file"):
        resolve("local:/nowhere/model.gguf")


def test_a_bundled_model_whose_package_is_missing_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(local.BUNDLED, "ghost", ("package_that_is_not_installed", "ghost.gguf"))
    with pytest.raises(ConfigInvalid, match="'local' extra"):
        resolve_model_path("ghost")
