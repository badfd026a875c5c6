"""A configuration becomes what Agent takes: the provider for runtime.model (key read from the named variable)."""

from __future__ import annotations

import pytest

from tests.config.helpers import Dirs
from tests.config.unavailable import unavailable_server
from tether import Agent
from tether.config import RuntimeConfig, build_provider, model_target
from tether.errors import ConfigInvalid, ProviderUnavailable
from tether.providers.http import RetryPolicy


def test_a_builtin_model_without_provider_settings_is_passed_through(dirs: Dirs) -> None:
    target = model_target(dirs.load({"TETHER_MODEL": "ollama:qwen3"}).config, {})

    assert (target.model, target.base_url, target.api_key, target.headers) == ("ollama:qwen3", None, None, {})


def test_a_provider_of_your_own_naming_becomes_its_profile_with_its_url_key_and_headers(dirs: Dirs) -> None:
    dirs.write_project(
        '[runtime]\nmodel = "gpu:qwen3"\n\n[providers.gpu]\nprofile = "vllm"\nbase_url = "http://gpu:8000/v1"\n'
        'api_key_env = "GPU_KEY"\nheaders = { "X-Team" = "research" }\n'
    )
    config = dirs.load().config

    target = model_target(config, {"GPU_KEY": "s3cret"})

    assert (target.model, target.base_url, target.headers) == (
        "vllm:qwen3",
        "http://gpu:8000/v1",
        {"X-Team": "research"},
    )
    assert target.api_key is not None
    assert target.api_key.reveal() == "s3cret"
    assert "s3cret" not in repr(target)


def test_a_builtin_provider_takes_its_settings_from_its_table(dirs: Dirs) -> None:
    dirs.write_project('[runtime]\nmodel = "ollama:qwen3"\n\n[providers.ollama]\nbase_url = "http://box:11434/v1"\n')

    provider = build_provider(dirs.load().config, {})

    assert provider.info.model_string == "ollama:qwen3"
    assert "http://box:11434/v1" in repr(provider)
    agent = Agent(provider, limits=dirs.load().config.runtime.limits.to_limits())
    assert agent.limits.max_turns == 20


def test_a_named_key_variable_that_is_unset_is_an_error_when_the_provider_needs_a_key(dirs: Dirs) -> None:
    dirs.write_project(
        '[runtime]\nmodel = "deepseek:deepseek-chat"\n\n[providers.deepseek]\napi_key_env = "WORK_KEY"\n'
    )

    with pytest.raises(ConfigInvalid, match=r"providers\.deepseek\.api_key_env names WORK_KEY, which is not set"):
        model_target(dirs.load().config, {"DEEPSEEK_API_KEY": "personal-key"})


def test_no_model_is_an_error_that_says_how_to_set_one(dirs: Dirs) -> None:
    with pytest.raises(ConfigInvalid, match=r"set runtime\.model"):
        model_target(dirs.load().config, {})


@pytest.mark.parametrize(("setting", "attempts"), [("retries = 0", 1), ("retries = 2", 3), ("", 4)])
async def test_runtime_retries_is_the_number_of_retries_the_provider_makes(
    dirs: Dirs, setting: str, attempts: int
) -> None:
    with unavailable_server() as server:
        dirs.write_project(
            f'[runtime]\nmodel = "box:qwen3"\n{setting}\n\n[providers.box]\nbase_url = "{server.base_url}"\n'
        )
        result = await Agent(build_provider(dirs.load().config, {})).run("hi")

        assert result.stop_reason == "error"
        assert isinstance(result.error, ProviderUnavailable)
        assert server.attempts == attempts


def test_the_default_of_runtime_retries_is_the_providers_own() -> None:
    assert RuntimeConfig().retries == RetryPolicy().max_retries


def test_providers_that_make_no_requests_take_the_retries_setting_without_complaint(dirs: Dirs) -> None:
    dirs.write_project('[runtime]\nmodel = "scripted:echo"\nretries = 5\n')

    assert build_provider(dirs.load().config, {}).info.model_string == "scripted:echo"


@pytest.mark.parametrize("value", ["-1", "true", '"3"', "1.5"])
def test_runtime_retries_must_be_a_whole_number_of_zero_or_more(dirs: Dirs, value: str) -> None:
    dirs.write_project(f"[runtime]\nretries = {value}\n")

    (issue,) = dirs.issues()

    assert (issue["key"], issue["line"]) == ("runtime.retries", 2)
    assert issue["message"].startswith("must be a whole number >= 0")


def test_rpm_and_tpm_of_a_provider_table_become_its_rate_limit(dirs: Dirs) -> None:
    """``[providers.NAME] rpm/tpm`` is the provider's client-side ``RateLimit``, per minute."""
    dirs.write_project(
        '[runtime]\nmodel = "ollama:qwen3"\n\n[providers.ollama]\nbase_url = "http://box:11434/v1"\nrpm = 30\n'
        "tpm = 40000\n"
    )

    provider = build_provider(dirs.load().config, {})

    limiter = provider._client._limiter  # type: ignore[attr-defined]
    assert limiter is not None
    assert (limiter.limit.rpm, limiter.limit.tpm, limiter.limit.window) == (30, 40000, 60.0)


def test_a_provider_table_without_rpm_or_tpm_has_no_limiter(dirs: Dirs) -> None:
    dirs.write_project('[runtime]\nmodel = "ollama:qwen3"\n\n[providers.ollama]\nbase_url = "http://box:11434/v1"\n')

    assert build_provider(dirs.load().config, {})._client._limiter is None  # type: ignore[attr-defined]


@pytest.mark.parametrize("value", ["0", "-5", '"fast"'])
def test_an_rpm_that_is_not_a_positive_integer_is_refused(dirs: Dirs, value: str) -> None:
    dirs.write_project(f'[runtime]\nmodel = "ollama:qwen3"\n\n[providers.ollama]\nrpm = {value}\n')

    with pytest.raises(ConfigInvalid, match=r"rpm"):
        dirs.load()


def test_rpm_for_a_model_run_in_this_process_is_refused(dirs: Dirs) -> None:
    dirs.write_project('[runtime]\nmodel = "local:smollm2"\n\n[providers.local]\nrpm = 5\n')

    with pytest.raises(ConfigInvalid, match=r"rpm and tpm limit requests over HTTP"):
        model_target(dirs.load().config, {})
