"""A configuration becomes what Agent takes: the provider for runtime.model (key read from the named variable)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.config.helpers import Dirs
from tests.config.unavailable import unavailable_server
from tether import Agent
from tether.config import RuntimeConfig, build_provider, model_target
from tether.errors import ConfigInvalid, ProviderUnavailable
from tether.providers.http import RetryPolicy
from tether.secret_refs import forget, resolved_values

KEY = "sk-from-a-file-0123456789abcdef"


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


def test_a_providers_api_key_reference_is_resolved_when_the_provider_is_built(dirs: Dirs, tmp_path: Path) -> None:
    forget()
    path = tmp_path / "key"
    path.write_text(KEY + "\n")
    path.chmod(0o600)
    dirs.write_project(
        f'[runtime]\nmodel = "gpu:qwen3"\n\n[providers.gpu]\nprofile = "vllm"\nbase_url = "http://gpu:8000/v1"\n'
        f'api_key = "file:{path}"\n'
    )
    target = model_target(dirs.load().config, {})

    assert KEY not in resolved_values()  # not read while the configuration is
    assert target.provider().credentials() == (KEY,)  # type: ignore[attr-defined]


def test_a_literal_key_in_agent_toml_is_refused(dirs: Dirs) -> None:
    dirs.write_project(f'[runtime]\nmodel = "openai:gpt-4o-mini"\n\n[providers.openai]\napi_key = "{KEY}"\n')

    with pytest.raises(ConfigInvalid, match="never the key itself") as raised:
        dirs.load()
    assert KEY not in str(raised.value)


def test_an_azure_table_gives_the_endpoint_key_and_api_version_of_the_deployments_route(dirs: Dirs) -> None:
    dirs.write_project(
        '[runtime]\nmodel = "azure:my-gpt4o"\n\n[providers.azure]\nbase_url = "https://res.openai.azure.com"\n'
        'api_key_env = "WORK_AZURE_KEY"\napi_version = "2024-10-21"\n'
    )

    provider = build_provider(dirs.load().config, {"WORK_AZURE_KEY": "azure-key-0123456789"})

    assert repr(provider) == (
        "AzureOpenAIProvider('my-gpt4o', base_url='https://res.openai.azure.com/openai/deployments/my-gpt4o')"
    )
    assert getattr(provider, "path", None) == "/chat/completions?api-version=2024-10-21"
    assert provider.info.model_string == "azure:my-gpt4o"


def test_api_version_is_refused_for_a_provider_that_is_not_azure(dirs: Dirs) -> None:
    dirs.write_project('[providers.ollama]\napi_version = "2024-10-21"\n')

    (issue,) = dirs.issues()

    assert (issue["key"], issue["line"]) == ("providers.ollama.api_version", 2)
    assert issue["message"] == "only an Azure OpenAI provider takes an api_version"


async def test_a_list_of_models_is_a_fallback_each_built_from_its_own_table(dirs: Dirs) -> None:
    """``runtime.model = [...]``: the first model (a server of its own naming, answering 503) fails before its
    answer begins, and the run completes on the next."""
    with unavailable_server() as server:
        dirs.write_project(
            '[runtime]\nmodel = ["box:qwen3", "scripted:echo"]\nretries = 0\n\n'
            f'[providers.box]\nbase_url = "{server.base_url}"\n'
        )
        config = dirs.load().config
        result = await Agent(build_provider(config, {})).run("hi")

        assert config.runtime.first_model == "box:qwen3"
        assert result.stop_reason == "complete"
        assert server.attempts == 1
        assert [record.error for record in result.turn_records] == ["provider_unavailable", None]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("[]", "must name at least one model"),
        ('["openai:gpt-4o", "gpt-4o-mini"]', "must be 'provider:model'"),
        ('["openai:gpt-4o", "nowhere:m"]', "unknown provider 'nowhere' in 'nowhere:m'"),
    ],
)
def test_every_model_of_a_list_is_checked(dirs: Dirs, value: str, message: str) -> None:
    dirs.write_project(f"[runtime]\nmodel = {value}\n")

    (issue,) = dirs.issues()

    assert issue["key"] == "runtime.model"
    assert message in issue["message"]


def test_the_anthropic_table_sets_the_prompt_cache_ttl_or_turns_it_off(dirs: Dirs) -> None:
    table = (
        '[runtime]\nmodel = "anthropic:claude-sonnet-4-5"\n\n'
        '[providers.anthropic]\nprompt_cache = "{}"\napi_key_env = "KEY"\n'
    )
    for setting in ("1h", "off"):
        dirs.write_project(table.format(setting))
        provider = build_provider(dirs.load().config, {"KEY": "k"})
        assert provider.prompt_cache == setting  # type: ignore[attr-defined]


def test_a_prompt_cache_setting_is_checked_and_refused_for_a_provider_that_has_none(dirs: Dirs) -> None:
    dirs.write_project(
        '[runtime]\nmodel = "anthropic:claude-sonnet-4-5"\n\n[providers.anthropic]\nprompt_cache = "2h"\n'
    )
    (issue,) = dirs.issues()
    assert issue["key"] == "providers.anthropic.prompt_cache"

    dirs.write_project(
        '[runtime]\nmodel = "openai:gpt-4o"\n\n[providers.openai]\nprompt_cache = "5m"\napi_key_env = "KEY"\n'
    )
    with pytest.raises(ConfigInvalid, match="applies to 'anthropic:' models"):
        build_provider(dirs.load().config, {"KEY": "k"})


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
