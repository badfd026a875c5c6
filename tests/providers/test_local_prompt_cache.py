"""The embedded model's prompt cache on disk (providers/local/prompt_cache.py): a new process starts from the
context an earlier one evaluated, and a cache that is corrupt, foreign or unwritable costs only speed."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tether import Message
from tether.events import LlmEvent, StreamEnd, TextDelta
from tether.providers.base import ModelSettings, Request
from tether.providers.local import LocalProvider
from tether.providers.local import provider as local
from tether.providers.local.prompt_cache import (
    MAGIC,
    MAX_ENTRIES,
    MIN_SAVED_TOKENS,
    PromptCache,
    Snapshot,
    default_directory,
    model_key,
)

SYSTEM = "You are a careful assistant. Answer in one short sentence, and never invent facts. " * 5

PROCESS = textwrap.dedent(
    """
    import asyncio, json, sys
    from tether import Message
    from tether.events import StreamEnd, TextDelta
    from tether.providers.base import ModelSettings, Request
    from tether.providers.local import LocalProvider

    async def main() -> None:
        system, question, cache = sys.argv[1], sys.argv[2], sys.argv[3]
        provider = LocalProvider(prompt_cache=cache if cache != "off" else False)
        request = Request((Message.user(question),), system=system, settings=ModelSettings(max_tokens=12))
        text, usage = "", None
        async for event in provider.stream(request):
            if isinstance(event, TextDelta):
                text += event.text
            elif isinstance(event, StreamEnd):
                usage = event.usage
        print(json.dumps({"text": text, "evaluated": usage.input_tokens, "reused": usage.cache_read_tokens}))

    asyncio.run(main())
    """
)


def in_a_new_process(question: str, cache: Path | str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", PROCESS, SYSTEM, question, str(cache)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    answer: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return answer


def test_a_new_process_evaluates_only_what_its_prompt_adds_to_an_earlier_processs(tmp_path: Path) -> None:
    first = in_a_new_process("What colour is the sky?", tmp_path)
    assert first["reused"] == 0, "nothing to start from yet"
    assert len(list(tmp_path.rglob("*.prompt"))) == 1, "the long prompt it evaluated was kept"

    second = in_a_new_process("What colour is grass?", tmp_path)
    assert second["reused"] >= first["evaluated"] - 12, "the system prompt came from the cache"
    assert second["evaluated"] <= 12, "only the new question was evaluated"
    uncached = in_a_new_process("What colour is grass?", "off")
    assert uncached["reused"] == 0
    assert second["text"] == uncached["text"], "a restored context answers as an evaluated one does"


def ask(question: str) -> Request:
    return Request((Message.user(question),), system=SYSTEM, settings=ModelSettings(max_tokens=4))


async def first_call(provider: LocalProvider, question: str) -> tuple[str, StreamEnd]:
    """The call a newly loaded model makes first (the model is dropped before it, as a new process would start)."""
    local._close_all()
    events: list[LlmEvent] = [event async for event in provider.stream(ask(question))]
    provider.loaded().llama.prompt_cache.wait()
    end = events[-1]
    assert isinstance(end, StreamEnd)
    return "".join(e.text for e in events if isinstance(e, TextDelta)), end


def damage_one_byte(folder: Path) -> None:
    (snapshot,) = folder.rglob("*.prompt")
    data = bytearray(snapshot.read_bytes())
    data[-100] ^= 0xFF  # one byte of llama.cpp's state
    snapshot.write_bytes(bytes(data))


def files_in(folder: Path) -> list[Path]:
    return list(folder.rglob("*"))


async def test_a_corrupt_snapshot_is_removed_and_the_prompt_evaluated(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    provider = LocalProvider(prompt_cache=tmp_path)
    try:
        expected, _ = await first_call(provider, "Name a fruit.")
        damage_one_byte(tmp_path)
        with caplog.at_level(logging.WARNING, logger="tether.providers.local.prompt_cache"):
            text, end = await first_call(provider, "Name a fruit.")
        assert end.usage.cache_read_tokens == 0, "the damaged snapshot was not given to llama.cpp"
        assert text == expected
        assert "unusable" in caplog.text
        _, again = await first_call(provider, "Name a fruit.")
        assert again.usage.cache_read_tokens > 100, "the snapshot written after the evaluation is whole"
    finally:
        local._close_all()


async def test_an_unwritable_cache_folder_costs_a_warning_not_the_answer(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    provider = LocalProvider(prompt_cache=blocker / "cache")
    try:
        with caplog.at_level(logging.WARNING, logger="tether.providers.local.prompt_cache"):
            text, end = await first_call(provider, "Name a fruit.")
        assert text
        assert end.usage.input_tokens > 100
        assert "could not be written" in caplog.text
    finally:
        local._close_all()


async def test_without_a_prompt_cache_nothing_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TETHER_CACHE_DIR", str(tmp_path))
    provider = LocalProvider(prompt_cache=False)
    try:
        local._close_all()
        [event async for event in provider.stream(ask("Name a fruit."))]
        assert provider.loaded().llama.prompt_cache is None
        assert not files_in(tmp_path)
    finally:
        local._close_all()


def snapshot(first: int, length: int = MIN_SAVED_TOKENS) -> Snapshot:
    return Snapshot(tuple(range(first, first + length)), bytes([first % 256]) * 1000)


def test_the_snapshot_sharing_the_longest_prefix_is_chosen(tmp_path: Path) -> None:
    cache = PromptCache(tmp_path)
    cache.save(Snapshot(tuple(range(100)), b"hundred"))
    cache.save(Snapshot((*range(50), *range(1000, 1050)), b"fifty"))
    chosen = cache.best([*range(80), 7, 7])
    assert chosen is not None
    assert chosen.state == b"hundred"
    assert cache.best([*range(20), 9]) is None, "a prefix shorter than MIN_REUSED_TOKENS is not worth loading"


def test_short_prompts_are_not_kept_and_the_oldest_snapshots_go_first(tmp_path: Path) -> None:
    cache = PromptCache(tmp_path)
    cache.save(snapshot(0, MIN_SAVED_TOKENS - 1))
    assert not list(tmp_path.iterdir())
    for index in range(MAX_ENTRIES + 2):
        cache.save(snapshot(index * 1000))
        newest = max(path.stat().st_mtime_ns for path in tmp_path.iterdir())
        os.utime(next(p for p in tmp_path.iterdir() if p.stat().st_mtime_ns == newest), ns=(index, index))
    kept = {cache.best(list(range(index * 1000, index * 1000 + 64))) is not None for index in (0, 1)}
    assert kept == {False}, "the two oldest were dropped"
    assert len(list(tmp_path.iterdir())) == MAX_ENTRIES


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda data: b"something else\n" + data, id="not a snapshot"),
        pytest.param(lambda data: data[: len(data) // 2], id="truncated"),
        pytest.param(lambda data: MAGIC + b'{"tokens": ["a"], "bytes": 1, "sha256": ""}\n!', id="tokens not integers"),
        pytest.param(lambda data: MAGIC + b"{not json\n", id="header not JSON"),
        pytest.param(lambda data: MAGIC + b'{"tokens": [1]}\n', id="header incomplete"),
        pytest.param(lambda data: data + b"more", id="longer than its header says"),
        pytest.param(
            lambda data: MAGIC + b'{"tokens": [1], "bytes": 999999999999, "sha256": ""}\n', id="absurdly large"
        ),
    ],
)
def test_a_damaged_snapshot_is_deleted_not_loaded(
    tmp_path: Path, damage: Any, caplog: pytest.LogCaptureFixture
) -> None:
    cache = PromptCache(tmp_path)
    cache.save(snapshot(0))
    (path,) = tmp_path.iterdir()
    path.write_bytes(damage(path.read_bytes()))
    with caplog.at_level(logging.WARNING, logger="tether.providers.local.prompt_cache"):
        assert cache.best(list(range(64))) is None
    assert not path.exists()
    assert "unusable" in caplog.text


def test_a_snapshot_belongs_to_one_model_file_context_size_and_build(tmp_path: Path) -> None:
    model = tmp_path / "model.gguf"
    model.write_bytes(b"weights")
    key = model_key(model, 8192, "0.3.36")
    assert model_key(model, 8192, "0.3.36") == key
    assert model_key(model, 4096, "0.3.36") != key
    assert model_key(model, 8192, "0.3.37") != key
    os.utime(model, ns=(1, 1))
    assert model_key(model, 8192, "0.3.36") != key, "a changed file is another model"


def test_the_cache_lives_in_the_users_cache_folder_unless_told(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TETHER_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_directory() == tmp_path / "xdg" / "tether" / "local-prompts"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_directory() == tmp_path / "home" / ".cache" / "tether" / "local-prompts"
    monkeypatch.setenv("TETHER_CACHE_DIR", str(tmp_path / "mine"))
    assert default_directory() == tmp_path / "mine" / "local-prompts"
    assert LocalProvider(prompt_cache=tmp_path / "there").prompt_cache == tmp_path / "there"
