"""Each tool choice as each provider's API documents it, on every OpenAI-compatible profile as far as the
server honours it, and never sent as if a server honoured what it does not."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tether.errors import ConfigInvalid
from tether.messages import Message
from tether.providers.anthropic import AnthropicProvider
from tether.providers.base import ForceTool, ModelSettings, Request, ToolChoice, ToolDefinition
from tether.providers.bedrock import BedrockProvider
from tether.providers.gemini import GeminiProvider
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.openai_responses import OpenAIResponsesProvider
from tether.providers.registry import PROFILES

WEATHER = ToolDefinition(
    "weather", "Weather in a city.", {"type": "object", "properties": {"city": {"type": "string"}}}
)
CLOCK = ToolDefinition("clock", "The time.", {"type": "object", "properties": {}})
TOOLS = (WEATHER, CLOCK)
FORCED = ForceTool("clock")


def request(choice: ToolChoice, **options: Any) -> Request:
    return Request((Message.user("hi"),), tools=TOOLS, tool_choice=choice, **options)


def chat(profile: str) -> OpenAIChatProvider:
    return OpenAIChatProvider("m", profile=PROFILES[profile], api_key="k", base_url="http://127.0.0.1:9/v1")


def offered(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools", [])]


# --- the native APIs ----------------------------------------------------------------------------------------

NAMED_AS_DOCUMENTED: dict[str, tuple[Callable[[Request], Any], dict[ToolChoice, Any]]] = {
    "openai chat": (
        lambda r: chat("openai").request_body(r)["tool_choice"],
        {"auto": "auto", "none": "none", "required": "required",
         FORCED: {"type": "function", "function": {"name": "clock"}}},
    ),
    "openai responses": (
        lambda r: OpenAIResponsesProvider("gpt-4o", api_key="k").request_body(r)["tool_choice"],
        {"auto": "auto", "none": "none", "required": "required", FORCED: {"type": "function", "name": "clock"}},
    ),
    "anthropic": (
        lambda r: AnthropicProvider("claude-sonnet-4-5", api_key="k").request_body(r)["tool_choice"],
        {"auto": {"type": "auto"}, "none": {"type": "none"}, "required": {"type": "any"},
         FORCED: {"type": "tool", "name": "clock"}},
    ),
    "gemini": (
        lambda r: GeminiProvider("gemini-2.5-flash", api_key="k").request_body(r)["toolConfig"][
            "functionCallingConfig"
        ],
        {
            "auto": {"mode": "AUTO"},
            "none": {"mode": "NONE"},
            "required": {"mode": "ANY"},
            FORCED: {"mode": "ANY", "allowedFunctionNames": ["clock"]},
        },
    ),
    # Converse has no "none": the tools are left out of that request.
    "bedrock": (
        lambda r: BedrockProvider("anthropic.claude-sonnet-4-5-20250929-v1:0", region="us-east-1", api_key="k",
                                  environ={}).request_body(r).get("toolConfig", {}).get("toolChoice", "no tools"),
        {"auto": {"auto": {}}, "none": "no tools", "required": {"any": {}}, FORCED: {"tool": {"name": "clock"}}},
    ),
}  # fmt: skip


@pytest.mark.parametrize("api", NAMED_AS_DOCUMENTED)
@pytest.mark.parametrize("choice", ["auto", "none", "required", FORCED], ids=str)
def test_every_choice_is_sent_as_each_api_names_it_with_every_tool_defined(api: str, choice: ToolChoice) -> None:
    encode, expected = NAMED_AS_DOCUMENTED[api]
    assert encode(request(choice)) == expected[choice]


# --- OpenAI-compatible servers, by profile ------------------------------------------------------------------

HONOURED = {
    # profile: the body's (tool_choice, tools offered) for auto, none, required, a forced tool
    # (None: the field is left out; ConfigInvalid: refused, the server would silently ignore it)
    "openai": ("auto", "none", "required", "function"),
    "vllm": ("auto", "none", "required", "function"),
    "deepseek": ("auto", "none", "required", "function"),
    "openai-compatible": ("auto", "none", "required", "function"),
    "llamacpp": ("auto", "none", "required", "required, that tool alone"),
    "minimax": ("auto", "none", ConfigInvalid, ConfigInvalid),
    "ollama": ("auto", "no tools", ConfigInvalid, ConfigInvalid),
    "zai": ("auto", "no tools", ConfigInvalid, ConfigInvalid),
    "mistral": ("auto", "none", "required", "function"),
    "groq": ("auto", "none", "required", "function"),
    "xai": ("auto", "none", "required", "function"),
    "openrouter": ("auto", "none", "required", "function"),
    "together": ("auto", "none", "required", "function"),
    "fireworks": ("auto", "none", "required", "function"),
    "azure": ("auto", "none", "required", "function"),
}


@pytest.mark.parametrize("profile", HONOURED)
def test_each_profile_is_sent_only_the_choices_its_server_honours(profile: str) -> None:
    assert set(HONOURED) == set(PROFILES)
    auto, none, required, forced = HONOURED[profile]
    provider = chat(profile)
    body = provider.request_body(request("auto"))
    assert (body["tool_choice"], offered(body)) == (auto, ["weather", "clock"])
    body = provider.request_body(request("none"))
    if none == "no tools":
        assert {"tools", "tool_choice"} & set(body) == set()
    else:
        assert (body["tool_choice"], offered(body)) == ("none", ["weather", "clock"])
    cases: tuple[tuple[ToolChoice, Any], ...] = (("required", required), (FORCED, forced))
    for choice, expected in cases:
        if expected is ConfigInvalid:
            with pytest.raises(ConfigInvalid, match=f"{profile} servers cannot be made to call a tool"):
                provider.request_body(request(choice))
            continue
        body = provider.request_body(request(choice))
        if expected == "function":
            assert (body["tool_choice"], offered(body)) == (
                {"type": "function", "function": {"name": "clock"}},
                ["weather", "clock"],
            )
        elif expected == "required, that tool alone":
            assert (body["tool_choice"], offered(body)) == ("required", ["clock"])
        else:
            assert (body["tool_choice"], offered(body)) == ("required", ["weather", "clock"])


def test_a_profile_s_model_info_keeps_what_the_body_can_keep() -> None:
    kept = {name: chat(name).info.tool_choices for name in PROFILES}
    assert kept["openai"] == kept["llamacpp"] == frozenset({"auto", "none", "required", "tool"})
    assert kept["minimax"] == kept["ollama"] == kept["zai"] == frozenset({"auto", "none"})


def test_an_extra_tool_choice_does_not_undo_none_where_the_server_cannot_be_told_none() -> None:
    settings = ModelSettings(extra={"tool_choice": "auto", "parallel_tool_calls": True})
    body = chat("ollama").request_body(request("none", settings=settings))
    assert {"tools", "tool_choice", "parallel_tool_calls"} & set(body) == set()
    body = chat("minimax").request_body(request("none", settings=settings))
    assert body["tool_choice"] == "none"


def test_the_streamed_payload_is_the_body_for_every_choice() -> None:
    provider = chat("llamacpp")
    for choice in ("auto", "none", "required", FORCED):
        assert json.loads(provider.request_payload(request(choice))) == provider.request_body(request(choice))


# --- Anthropic: thinking takes auto and none only -----------------------------------------------------------


@pytest.mark.parametrize("thinking", [{"type": "enabled", "budget_tokens": 2048}, {"type": "adaptive"}])
def test_anthropic_refuses_a_forced_call_while_thinking_before_anything_is_sent(thinking: dict[str, Any]) -> None:
    provider = AnthropicProvider("claude-sonnet-4-5", api_key="k")
    settings = ModelSettings(extra={"thinking": thinking})
    for choice in ("required", FORCED):
        with pytest.raises(ConfigInvalid, match=r"forced tool call .* while thinking is on"):
            provider.request_body(request(choice, settings=settings))
    assert provider.request_body(request("auto", settings=settings))["tool_choice"] == {"type": "auto"}
    assert provider.request_body(request("none", settings=settings))["tool_choice"] == {"type": "none"}
    disabled = ModelSettings(extra={"thinking": {"type": "disabled"}})
    assert provider.request_body(request("required", settings=disabled))["tool_choice"] == {"type": "any"}
