"""agent.toml is validated section by section, and every problem names its key and its line."""

from __future__ import annotations

import dataclasses

import pytest

from tests.config.helpers import Dirs
from tether.config.schema import Config, LimitsConfig, RuntimeConfig
from tether.errors import ConfigInvalid
from tether.limits import Limits


def only_issue(dirs: Dirs, text: str) -> dict[str, object]:
    dirs.write_project(text)
    (issue,) = dirs.issues()
    assert issue["origin"] == str(dirs.agent_toml)
    return issue


@pytest.mark.parametrize(
    ("text", "key", "line", "words"),
    [
        pytest.param(
            '# a model\n\n[runtime]\nmodel = "gpt-4o"\n', "runtime.model", 4, "'provider:model'", id="runtime.model"
        ),
        pytest.param(
            "[runtime]\n\n[runtime.limits]\nmax_turns = 20\nmax_tool_calls = 0\n",
            "runtime.limits.max_tool_calls",
            5,
            "whole number >= 1",
            id="limits-count",
        ),
        pytest.param(
            "[runtime.limits]\nstep_timeout = -1.5\n", "runtime.limits.step_timeout", 2, "number > 0", id="limits-time"
        ),
        pytest.param(
            '[runtime.limits]\nmax_turns = "5"\n', "runtime.limits.max_turns", 2, "whole number", id="limits-string"
        ),
        pytest.param(
            '[providers.box]\nbase_url = "gpu-box:8000"\n',
            "providers.box.base_url",
            2,
            "http:// or https://",
            id="providers.base_url",
        ),
        pytest.param(
            '[providers.box]\nbase_url = "http://box/v1"\nprofile = "vlm"\n',
            "providers.box.profile",
            3,
            "'vllm'",
            id="providers.profile",
        ),
        pytest.param(
            '[providers.ollama]\nheaders = { "X-Team" = 5 }\n',
            "providers.ollama.headers.X-Team",
            2,
            "must be a string",
            id="providers.headers",
        ),
        pytest.param(
            '[tools]\nmode = "read_only"\n', "tools.mode", 2, "'read-only', 'full', not \"read_only\"", id="tools.mode"
        ),
        pytest.param('[tools]\ndeny = "shell"\n', "tools.deny", 2, "must be a list", id="tools.deny"),
        pytest.param(
            '[[mcp.servers]]\nid = "a"\ncommand = "x"\n\n[[mcp.servers]]\nid = "b"\ntransport = "sse"\n',
            "mcp.servers[1].transport",
            7,
            "'stdio', 'http'",
            id="mcp.transport",
        ),
        pytest.param(
            '[[mcp.servers]]\nid = "a"\ntransport = "http"\n', "mcp.servers[0].url", 1, "required", id="mcp.url"
        ),
        pytest.param(
            '[[mcp.servers]]\nid = "a"\ncommand = "x"\ntool_timeout = 0\n',
            "mcp.servers[0].tool_timeout",
            4,
            "number > 0",
            id="mcp.tool_timeout",
        ),
        pytest.param(
            '[[mcp.servers]]\nid = "a"\ncommand = "x"\n[[mcp.servers]]\nid = "a"\ncommand = "y"\n',
            "mcp.servers[1].id",
            5,
            "already the id of servers[0]",
            id="mcp.duplicate-id",
        ),
        pytest.param('[session]\nstore = "sqlite3"\n', "session.store", 2, "did you mean 'sqlite'", id="session.store"),
        pytest.param("[session]\npath = 42\n", "session.path", 2, "must be a string, not 42", id="session.path"),
    ],
)
def test_an_invalid_value_is_reported_with_its_key_and_line(
    dirs: Dirs, text: str, key: str, line: int, words: str
) -> None:
    issue = only_issue(dirs, text)

    assert (issue["key"], issue["line"]) == (key, line)
    assert words in str(issue["message"])


def test_the_error_message_itself_names_file_line_and_key(dirs: Dirs) -> None:
    dirs.write_project("[runtime]\n# the cap\n[runtime.limits]\nmax_turns = 0\n")

    with pytest.raises(ConfigInvalid) as caught:
        dirs.load()

    assert caught.value.code == "config_invalid"
    assert f"{dirs.agent_toml} line 4: runtime.limits.max_turns: must be a whole number >= 1" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "key", "line", "hint"),
    [
        ('[runtime]\nmodle = "openai:gpt-4o"\n', "runtime.modle", 2, "did you mean 'model'?"),
        ("[runtime.limits]\nmax_turn = 5\n", "runtime.limits.max_turn", 2, "did you mean 'max_turns'?"),
        ('[providers.ollama]\nbase_ur = "http://x/v1"\n', "providers.ollama.base_ur", 2, "did you mean 'base_url'?"),
        ('\n[tool]\nmode = "full"\n', "tool", 2, "did you mean 'tools'?"),
        ('[[mcp.servers]]\nid = "a"\ncomand = "x"\n', "mcp.servers[0].comand", 3, "did you mean 'command'?"),
        ('[session]\nstroe = "files"\n', "session.stroe", 2, "did you mean 'store'?"),
    ],
)
def test_an_unknown_key_is_an_error_with_the_key_that_was_probably_meant(
    dirs: Dirs, text: str, key: str, line: int, hint: str
) -> None:
    dirs.write_project(text)

    issues = dirs.issues()

    assert [(i["key"], i["line"]) for i in issues] == [(key, line)]
    assert str(issues[0]["message"]).endswith(hint)


def test_an_unknown_key_far_from_any_known_one_lists_the_known_keys(dirs: Dirs) -> None:
    issue = only_issue(dirs, "[tools]\ncolour = 3\n")

    assert issue["message"] == "unknown key 'colour' (known keys: bash, cache_tool_outputs, deny, mode)"


def test_every_problem_is_reported_at_once_in_file_order(dirs: Dirs) -> None:
    dirs.write_project('[tools]\nmode = "all"\n\n[session]\nstore = "disk"\n\n[runtime]\nmodel = "x"\n')

    issues = dirs.issues()

    assert [(i["key"], i["line"]) for i in issues] == [("tools.mode", 2), ("session.store", 5), ("runtime.model", 8)]


def test_a_toml_syntax_error_names_its_line(dirs: Dirs) -> None:
    issue = only_issue(dirs, '[runtime]\nmodel = "openai:gpt-4o"\nmax_turns 5\n')

    assert issue["line"] == 3
    assert str(issue["message"]).startswith("is not valid TOML")


def test_a_model_with_an_unknown_provider_prefix_suggests_the_known_one(dirs: Dirs) -> None:
    issue = only_issue(dirs, '[runtime]\nmodel = "antropic:claude-sonnet-4-5"\n')

    assert (issue["key"], issue["line"]) == ("runtime.model", 2)
    assert "did you mean 'anthropic'?" in str(issue["message"])


def test_a_model_may_use_a_provider_named_in_the_configuration(dirs: Dirs) -> None:
    dirs.write_project(
        '[runtime]\nmodel = "gpu:qwen3"\n\n[providers.gpu]\nprofile = "vllm"\nbase_url = "http://gpu/v1"\n'
    )

    assert dirs.load().config.runtime.model == "gpu:qwen3"


def test_a_provider_of_your_own_naming_needs_a_url_when_its_profile_has_none(dirs: Dirs) -> None:
    issue = only_issue(dirs, '\n[providers.gpu]\napi_key_env = "GPU_KEY"\n')

    assert (issue["key"], issue["line"]) == ("providers.gpu.base_url", 2)
    assert "'openai-compatible' has no default URL" in str(issue["message"])


def test_an_api_key_written_where_the_variable_name_belongs_is_refused_and_not_echoed(dirs: Dirs) -> None:
    key = "sk-proj-abcdefghijklmnop1234567890"
    dirs.write_project(f'[providers.openai]\napi_key_env = "{key}"\n')

    with pytest.raises(ConfigInvalid) as caught:
        dirs.load()

    message = str(caught.value)
    assert "line 2: providers.openai.api_key_env: must be the name of an environment variable" in message
    assert key not in message
    assert key not in repr(caught.value.details)


def test_limits_can_be_switched_off_with_off_or_false(dirs: Dirs) -> None:
    dirs.write_project('[runtime.limits]\nmax_turns = "off"\nrun_timeout = false\nmax_cost_usd = 2\n')

    limits = dirs.load().config.runtime.limits.to_limits()

    assert (limits.max_turns, limits.run_timeout, limits.max_cost_usd) == (None, None, 2.0)


def test_invalid_response_retries_cannot_be_off(dirs: Dirs) -> None:
    issue = only_issue(dirs, '[runtime.limits]\ninvalid_response_retries = "off"\n')

    assert issue["key"] == "runtime.limits.invalid_response_retries"


def test_limits_config_has_exactly_the_fields_and_defaults_of_limits() -> None:
    assert list(LimitsConfig.model_fields) == [field.name for field in dataclasses.fields(Limits)]
    assert LimitsConfig().to_limits() == Limits()


def test_every_setting_is_documented() -> None:
    models = [
        Config,
        *(field.annotation for field in Config.model_fields.values() if isinstance(field.annotation, type)),
    ]
    undocumented = [
        f"{model.__name__}.{name}"
        for model in models
        if isinstance(model, type) and hasattr(model, "model_fields")
        for name, field in model.model_fields.items()
        if not field.description
    ]
    assert undocumented == []


def test_mcp_env_values_keep_their_variable_references_as_written(dirs: Dirs) -> None:
    dirs.write_project(
        '[[mcp.servers]]\nid = "gh"\ncommand = "gh-mcp"\nenv = { GITHUB_TOKEN = "${GITHUB_TOKEN}", MIX = "a-${B}-c" }\n'
    )

    (server,) = dirs.load(env={"GITHUB_TOKEN": "ghp_realtokenvalue1234567890", "B": "b"}).config.mcp.servers

    assert server.env == {"GITHUB_TOKEN": "${GITHUB_TOKEN}", "MIX": "a-${B}-c"}


def test_an_empty_configuration_is_all_defaults(dirs: Dirs) -> None:
    config = dirs.load().config

    assert config == Config()
    assert (config.runtime.model, config.tools.mode, config.session.store) == (None, "full", "sqlite")


def test_an_mcp_server_id_is_refused_here_when_the_connection_would_refuse_it(dirs: Dirs) -> None:
    issue = only_issue(dirs, '[[mcp.servers]]\nid = "my.server"\ncommand = "x"\n')
    assert "1-32 letters" in str(issue["message"])


@pytest.mark.parametrize("written", ["openai:gpt-4o-mini,anthropic:claude-x", "openai:gpt-4o-mini, anthropic:claude-x"])
def test_a_model_string_of_models_joined_by_commas_is_a_fallback_list(written: str) -> None:
    """``--model a,b`` and ``TETHER_MODEL=a,b`` give one string: it is the list, as ``model = [...]`` is."""
    assert RuntimeConfig.model_validate({"model": written}).model == ["openai:gpt-4o-mini", "anthropic:claude-x"]
    assert RuntimeConfig.model_validate({"model": "openai:gpt-4o-mini"}).model == "openai:gpt-4o-mini"
