"""Context windows: the table of known models, what each provider reports in ``ModelInfo.context_window``, and
``context_window=`` overriding it."""

from __future__ import annotations

from typing import Any

import pytest

from tether.errors import ConfigInvalid
from tether.providers.anthropic import AnthropicProvider
from tether.providers.gemini import GeminiProvider
from tether.providers.openai_chat import OpenAIChatProvider
from tether.providers.openai_responses import OpenAIResponsesProvider
from tether.providers.registry import PROFILES, resolve
from tether.providers.windows import WINDOWS, context_window_for


@pytest.mark.parametrize(
    ("provider", "model", "window"),
    [
        # OpenAI: families, dated snapshots, legacy snapshots with their own window, fine-tuned models
        ("openai", "gpt-4o", 128_000),
        ("openai", "gpt-4o-2024-08-06", 128_000),
        ("openai", "gpt-4o-mini-2024-07-18", 128_000),
        ("openai", "chatgpt-4o-latest", 128_000),
        ("openai", "gpt-4.1", 1_047_576),
        ("openai", "gpt-4.1-nano-2025-04-14", 1_047_576),
        ("openai", "gpt-5", 400_000),
        ("openai", "gpt-5-mini-2025-08-07", 400_000),
        ("openai", "gpt-5-chat-latest", 128_000),
        ("openai", "gpt-5.1-chat-latest", 128_000),
        ("openai", "o1-2024-12-17", 200_000),
        ("openai", "o1-mini", 128_000),
        ("openai", "o1-preview-2024-09-12", 128_000),
        ("openai", "o3-mini-2025-01-31", 200_000),
        ("openai", "o4-mini", 200_000),
        ("openai", "gpt-3.5-turbo", 16_385),
        ("openai", "gpt-3.5-turbo-0125", 16_385),
        ("openai", "gpt-3.5-turbo-0613", 4_096),
        ("openai", "gpt-3.5-turbo-16k-0613", 16_385),
        ("openai", "gpt-4", 8_192),
        ("openai", "gpt-4-0613", 8_192),
        ("openai", "gpt-4-32k-0314", 32_768),
        ("openai", "gpt-4-turbo-2024-04-09", 128_000),
        ("openai", "gpt-4-1106-preview", 128_000),
        ("openai", "ft:gpt-4o-mini-2024-07-18:acme::9abc", 128_000),
        ("openai-responses", "GPT-5", 400_000),
        # Anthropic
        ("anthropic", "claude-3-haiku-20240307", 200_000),
        ("anthropic", "claude-3-5-sonnet-latest", 200_000),
        ("anthropic", "claude-3-7-sonnet-20250219", 200_000),
        ("anthropic", "claude-sonnet-4-20250514", 200_000),
        ("anthropic", "claude-opus-4-1-20250805", 200_000),
        ("anthropic", "claude-sonnet-4-5-20250929", 200_000),
        ("anthropic", "claude-haiku-4-5", 200_000),
        ("anthropic", "claude-opus-4-6", 1_000_000),
        ("anthropic", "claude-2.0", 100_000),
        # Gemini
        ("gemini", "gemini-1.5-pro-002", 2_097_152),
        ("gemini", "gemini-1.5-flash-8b", 1_048_576),
        ("gemini", "gemini-2.0-flash-001", 1_048_576),
        ("gemini", "gemini-2.0-flash-exp", 1_048_576),
        ("gemini", "gemini-2.5-pro", 1_048_576),
        ("gemini", "gemini-2.5-flash-preview-05-20", 1_048_576),
        ("gemini", "gemini-2.5-flash-lite-preview-09-2025", 1_048_576),
        ("gemini", "models/gemini-3-pro-preview", 1_048_576),
        # OpenAI-compatible hosted APIs
        ("deepseek", "deepseek-chat", 128_000),
        ("deepseek", "deepseek-reasoner", 128_000),
        ("zai", "glm-4.5-air", 128_000),
        ("zai", "glm-4.5v", 64_000),
        ("zai", "glm-4.6", 200_000),
        ("minimax", "MiniMax-M2", 204_800),
        ("minimax", "MiniMax-M2.1-lightning", 204_800),
    ],
)
def test_known_models_and_their_snapshots_have_their_documented_window(provider: str, model: str, window: int) -> None:
    assert context_window_for(provider, model) == window


@pytest.mark.parametrize(
    ("provider", "model"),
    [
        ("openai", "gpt-4o-audio-preview-2024-12-17"),  # a variant with its own limits
        ("openai", "gpt-7"),  # a model newer than the table
        ("anthropic", "claude-opus-4-7"),
        ("gemini", "gemini-2.5-flash-image-preview"),
        ("gemini", "gemini-exp-1206"),
        ("gemini", "tunedModels/my-model"),
        ("deepseek", "deepseek-coder"),
        ("anthropic", "gpt-4o"),  # a name of another provider
        ("ollama", "llama3.1"),  # local servers: the window is the server's setting
        ("vllm", "Qwen/Qwen3-8B"),
        ("llamacpp", "gpt-4o"),
        ("openai-compatible", "gpt-4o"),
        ("scripted", "echo"),
    ],
)
def test_unknown_models_and_servers_that_set_their_own_window_have_none(provider: str, model: str) -> None:
    assert context_window_for(provider, model) is None


def test_every_window_is_a_positive_whole_number_of_tokens_under_a_lower_case_name() -> None:
    for table in WINDOWS.values():
        for name, window in table.items():
            assert name == name.lower()
            assert type(window) is int
            assert window >= 4_096, name


# --- what providers report ----------------------------------------------------------------------------------

KEY: dict[str, Any] = {"api_key": "test-key"}


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("openai:gpt-4o-mini", 128_000),
        ("openai-responses:o3", 200_000),
        ("anthropic:claude-sonnet-4-5", 200_000),
        ("gemini:gemini-2.5-flash", 1_048_576),
        ("deepseek:deepseek-chat", 128_000),
        ("zai:glm-4.6", 200_000),
        ("minimax:MiniMax-M2", 204_800),
        ("openai:some-future-model", None),
        ("ollama:llama3.1", None),
        ("vllm:Qwen/Qwen3-8B", None),
        ("llamacpp:gpt-4o", None),
    ],
)
def test_each_http_provider_reports_the_known_window_of_its_model(model: str, window: int | None) -> None:
    assert resolve(model, **KEY).info.context_window == window


def test_an_openai_compatible_server_reports_no_window_whatever_the_model_is_called() -> None:
    provider = resolve("openai-compatible:gpt-4o", base_url="http://127.0.0.1:9/v1", **KEY)
    assert provider.info.context_window is None


@pytest.mark.parametrize(
    "build",
    [
        lambda **o: OpenAIChatProvider("gpt-4o", **KEY, **o),
        lambda **o: OpenAIResponsesProvider("gpt-5", **KEY, **o),
        lambda **o: AnthropicProvider("claude-sonnet-4-5", **KEY, **o),
        lambda **o: GeminiProvider("gemini-2.5-pro", **KEY, **o),
    ],
    ids=["openai", "openai-responses", "anthropic", "gemini"],
)
def test_context_window_given_to_a_provider_replaces_the_known_one(build: Any) -> None:
    assert build(context_window=32_000).info.context_window == 32_000
    assert build().info.context_window not in (None, 32_000)


@pytest.mark.parametrize(
    "model",
    ["openai:gpt-4o", "openai-responses:gpt-5", "anthropic:claude-opus-4-6", "gemini:gemini-2.5-pro", "ollama:qwen3"],
)
def test_context_window_passes_through_a_model_string(model: str) -> None:
    assert resolve(model, context_window=50_000, **KEY).info.context_window == 50_000


def test_a_local_server_reports_the_window_it_is_told() -> None:
    provider = OpenAIChatProvider("Qwen/Qwen3-8B", profile=PROFILES["vllm"], context_window=40_960)
    assert (provider.info.provider, provider.info.context_window) == ("vllm", 40_960)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "100000", True])
def test_a_context_window_that_is_not_a_positive_whole_number_is_refused_naming_the_model(bad: object) -> None:
    with pytest.raises(ConfigInvalid) as error:
        resolve("anthropic:claude-sonnet-4-5", context_window=bad, **KEY)
    assert error.value.code == "config_invalid"
    assert "'anthropic:claude-sonnet-4-5': context_window must be a positive whole number" in str(error.value)
