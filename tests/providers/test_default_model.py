"""Which model runs without configuration: the configured one, a provider with a key, the local model, or none."""

from __future__ import annotations

import pytest

from tether.providers.default_model import ModelChoice, choose_model


def never() -> bool:
    return False


def always() -> bool:
    return True


def test_a_configured_model_wins_and_needs_no_notice() -> None:
    choice = choose_model("ollama:qwen3", {"OPENAI_API_KEY": "sk-x"}, always)
    assert choice == ModelChoice("ollama:qwen3")


@pytest.mark.parametrize(
    ("variable", "model"),
    [
        ("OPENAI_API_KEY", "openai:gpt-4o-mini"),
        ("ANTHROPIC_API_KEY", "anthropic:claude-haiku-4-5"),
        ("GEMINI_API_KEY", "gemini:gemini-2.5-flash"),
        ("GOOGLE_API_KEY", "gemini:gemini-2.5-flash"),
    ],
)
def test_a_provider_key_in_the_environment_picks_that_provider(variable: str, model: str) -> None:
    choice = choose_model(None, {variable: "secret-value"}, always)
    assert choice.model == model
    assert choice.notice is not None
    assert model in choice.notice
    assert variable in choice.notice
    assert "secret-value" not in choice.notice


def test_openai_comes_before_anthropic_and_gemini_when_several_keys_are_set() -> None:
    env = {"GEMINI_API_KEY": "g", "ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o"}
    assert choose_model(None, env, never).model == "openai:gpt-4o-mini"
    del env["OPENAI_API_KEY"]
    assert choose_model(None, env, never).model == "anthropic:claude-haiku-4-5"


def test_an_empty_key_variable_does_not_count() -> None:
    assert choose_model(None, {"OPENAI_API_KEY": ""}, always).model == "local:smollm2"


def test_without_keys_the_local_model_is_presented_as_a_demo_with_how_to_get_a_better_one() -> None:
    choice = choose_model(None, {}, always)
    assert choice.model == "local:smollm2"
    assert choice.notice is not None
    first, tools, better = choice.notice.splitlines()
    assert "embedded local:smollm2, a 135M demo model that works offline" in first
    assert "It has read-only tools" in tools
    assert "too small for real work" in tools
    assert "tether models pull " in better
    assert "Ollama, LM Studio, llama.cpp or vLLM" in better
    assert "tether config set runtime.model openai:gpt-4o-mini" in better


def test_without_keys_or_local_model_two_lines_say_how_to_configure_or_install() -> None:
    choice = choose_model(None, {}, never)
    assert choice.model is None
    assert choice.notice is None
    assert choice.problem is not None
    lines = choice.problem.splitlines()
    assert len(lines) == 2
    assert "tether config set runtime.model" in lines[1]
    assert "tether[local]" in lines[1]


def test_the_local_check_is_looked_up_when_called(monkeypatch: pytest.MonkeyPatch) -> None:
    import tether.providers.default_model as choose

    monkeypatch.setattr(choose, "local_model_installed", never)
    assert choose_model(None, {}).model is None
    monkeypatch.setattr(choose, "local_model_installed", always)
    assert choose_model(None, {}).model == "local:smollm2"
