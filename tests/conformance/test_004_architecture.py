"""Document 004 (fae_llm's architecture: providers and profiles, tools, sessions, configuration, observability,
thread safety), its testable statements against tether's public API (docs/conformance.md, section 004)."""

from __future__ import annotations

import typing

import pytest

import tether.errors
from tether import Agent, Limits, Message, StopReason, tool
from tether.errors import ConfigInvalid, SessionInvalid, TetherError
from tether.providers import PROFILES, ScriptedProvider, call, parallel, reply, resolve
from tether.sessions import MemorySessionStore, validate_session


@tool(read_only=True)
def read(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


@tool
def write(path: str, content: str) -> str:
    """Write a file."""
    return "written"


def test_004_a01_every_error_has_one_stable_code_from_the_documented_list() -> None:
    documented = set(typing.get_args(tether.errors.ErrorCode))
    kinds = [
        k
        for k in vars(tether.errors).values()
        if isinstance(k, type) and issubclass(k, TetherError) and k is not TetherError
    ]
    assert len(kinds) > 15
    for kind in kinds:
        assert kind.code in documented, kind.__name__
    assert ConfigInvalid("x").code == "config_invalid"


def test_004_a02_the_built_in_profiles_cover_the_documented_servers() -> None:
    assert {"openai", "ollama", "vllm", "llamacpp", "deepseek", "zai", "minimax"} <= set(PROFILES)
    assert not PROFILES["ollama"].requires_key, "Ollama needs no key"
    assert PROFILES["deepseek"].requires_key


@pytest.mark.parametrize("model", ["ollama:llama3.2", "vllm:qwen", "llamacpp:any"])
def test_004_a03_local_servers_resolve_without_any_key(model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OLLAMA_API_KEY", "VLLM_API_KEY", "LLAMACPP_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    provider = resolve(model)
    assert provider.info.name == model.split(":", 1)[1]


async def test_004_t01_read_only_mode_offers_and_runs_only_read_only_tools() -> None:
    turn = parallel(call("read", {"path": "a.txt"}), call("write", {"path": "a.txt", "content": "x"}))
    model = ScriptedProvider([turn, reply("ok")])
    result = await Agent(model, tools=[read, write], mode="read-only").run("go")
    assert [t.name for t in model.requests[0].tools] == ["read"]
    allowed, refused = result.messages[2].tool_results
    assert allowed.content == "contents of a.txt"
    assert (refused.is_error, refused.code) == (True, "permission_denied")


async def test_004_t02_full_mode_offers_every_tool() -> None:
    model = ScriptedProvider([reply("ok")])
    await Agent(model, tools=[read, write], mode="full").run("go")
    assert [t.name for t in model.requests[0].tools] == ["read", "write"]


async def test_004_t03_a_call_is_checked_for_existence_then_mode_then_arguments() -> None:
    turn = parallel(call("nope"), call("write", {"path": 1}), call("read", {"path": 1}))
    model = ScriptedProvider([turn, reply("ok")])
    result = await Agent(model, tools=[read, write], mode="read-only").run("go")
    assert [r.code for r in result.messages[2].tool_results] == [
        "tool_not_found",
        "permission_denied",
        "invalid_arguments",
    ]


async def test_004_s01_a_session_is_persisted_after_each_turn_and_resumed() -> None:
    store = MemorySessionStore()
    saved_turns: list[int] = []
    original = store.save

    async def counting_save(session: typing.Any) -> None:
        saved_turns.append(len(session.messages))
        await original(session)

    store.save = counting_save  # type: ignore[method-assign]
    model = ScriptedProvider([call("read", {"path": "a"}), reply("done"), reply("again")])
    agent = Agent(model, tools=[read], store=store)
    await agent.run("read a", session="s")
    assert saved_turns[:2] == [3, 4], "saved after the tool turn and after the answer"
    resumed = await agent.run("and now?", session="s")
    assert [m.role for m in resumed.messages] == ["user", "assistant", "tool", "assistant", "user", "assistant"]


def test_004_s02_a_stored_transcript_is_validated_when_it_is_read() -> None:
    with pytest.raises(SessionInvalid) as refused:
        validate_session((Message.assistant("hi"), Message.user("hello")), "s.json")
    assert refused.value.code == "session_invalid"
    assert "s.json" in refused.value.message
    merged = validate_session((Message.user("a"), Message.user("b"), Message.assistant("c")), "s.json")
    assert [m.role for m in merged] == ["user", "assistant"], "two user messages in a row are merged, not refused"


def test_004_g01_the_guards_have_defaults_and_each_can_be_set_or_switched_off() -> None:
    limits = Limits()
    assert (limits.max_turns, limits.max_tool_calls_per_turn, limits.request_timeout, limits.tool_timeout) == (
        20,
        16,
        60.0,
        60.0,
    )
    off = Limits(max_turns=None, max_tool_calls_per_turn=None, request_timeout=None, tool_timeout=None)
    assert off.max_turns is None


async def test_004_g02_the_turn_guard_stops_an_endless_loop() -> None:
    model = ScriptedProvider([call("read", {"path": str(n)}) for n in range(25)] + [reply("enough")])
    result = await Agent(model, tools=[read]).run("go")
    assert result.stop_reason == StopReason.MAX_TURNS
    assert result.turns == 20
