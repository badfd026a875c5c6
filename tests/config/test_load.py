"""Layers merge with precedence flags > env > ./agent.toml > user config > defaults, and say where values came from."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.config.helpers import Dirs
from tether.config.load import env_layer, load, parse_value, split_key, user_path
from tether.errors import ConfigInvalid


def test_each_layer_overrides_the_one_below_it(dirs: Dirs) -> None:
    dirs.write_user("[runtime.limits]\nmax_turns = 1\n")
    assert dirs.load().config.runtime.limits.max_turns == 1

    dirs.write_project("[runtime.limits]\nmax_turns = 2\n")
    assert dirs.load().config.runtime.limits.max_turns == 2

    env = {"TETHER_RUNTIME__LIMITS__MAX_TURNS": "3"}
    assert dirs.load(env).config.runtime.limits.max_turns == 3

    loaded = dirs.load(env, flags={"runtime.limits.max_turns": 4})
    assert loaded.config.runtime.limits.max_turns == 4
    assert loaded.origin(("runtime", "limits", "max_turns")) == "command line (runtime.limits.max_turns)"


def test_layers_merge_key_by_key(dirs: Dirs) -> None:
    dirs.write_user(
        '[runtime]\nmodel = "ollama:llama3.2"\n[runtime.limits]\nmax_turns = 7\n'
        '[providers.ollama]\nbase_url = "http://box:11434/v1"\napi_key_env = "BOX_KEY"\n'
    )
    dirs.write_project('[runtime.limits]\nrun_timeout = 120\n[providers.ollama]\nbase_url = "http://other:11434/v1"\n')

    config = dirs.load({"TETHER_TOOLS__MODE": "read-only"}).config

    assert config.runtime.model == "ollama:llama3.2"
    assert (config.runtime.limits.max_turns, config.runtime.limits.run_timeout) == (7, 120.0)
    assert config.providers["ollama"].base_url == "http://other:11434/v1"
    assert config.providers["ollama"].api_key_env == "BOX_KEY"
    assert config.tools.mode == "read-only"


def test_a_list_is_replaced_whole_by_a_higher_layer(dirs: Dirs) -> None:
    dirs.write_user('[tools]\ndeny = ["shell", "write_file"]\n')
    dirs.write_project('[tools]\ndeny = ["fetch"]\n')

    assert dirs.load().config.tools.deny == ["fetch"]


def test_origins_name_the_file_and_line_the_variable_or_the_default(dirs: Dirs) -> None:
    dirs.write_user('[runtime]\nmodel = "ollama:llama3.2"\n')
    dirs.write_project('# project\n\n[tools]\nmode = "read-only"\n')

    loaded = dirs.load({"TETHER_SESSION__STORE": "memory"})

    assert loaded.origin(("runtime", "model")) == f"{dirs.user_toml} line 2"
    assert loaded.origin(("tools", "mode")) == f"{dirs.agent_toml} line 4"
    assert loaded.origin(("session", "store")) == "environment variable TETHER_SESSION__STORE"
    assert loaded.origin(("tools", "deny")) is None
    assert loaded.files == [dirs.user_toml, dirs.agent_toml]


def test_an_error_from_the_user_file_names_that_file(dirs: Dirs) -> None:
    dirs.write_user('\n[tools]\nmode = "everything"\n')
    dirs.write_project('[runtime]\nmodel = "openai:gpt-4o"\n')

    (issue,) = dirs.issues()

    assert (issue["origin"], issue["line"], issue["key"]) == (str(dirs.user_toml), 3, "tools.mode")


def test_the_user_file_follows_xdg_config_home(tmp_path: Path) -> None:
    assert user_path({"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "HOME": "/nowhere"}) == (
        tmp_path / "xdg" / "tether" / "config.toml"
    )
    assert user_path({"HOME": str(tmp_path)}) == tmp_path / ".config" / "tether" / "config.toml"
    # The XDG spec: a relative XDG_CONFIG_HOME is invalid and ignored.
    assert user_path({"XDG_CONFIG_HOME": "relative", "HOME": str(tmp_path)}).parent.parent == tmp_path / ".config"


def test_a_user_file_under_xdg_config_home_is_read(dirs: Dirs, tmp_path: Path) -> None:
    xdg = tmp_path / "xdg"
    (xdg / "tether").mkdir(parents=True)
    (xdg / "tether" / "config.toml").write_text('[session]\nstore = "files"\n')
    dirs.write_user('[session]\nstore = "memory"\n')  # under ~/.config: not read when XDG_CONFIG_HOME is set

    assert dirs.load({"XDG_CONFIG_HOME": str(xdg)}).config.session.store == "files"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("5", 5),
        ("2.5", 2.5),
        ("true", True),
        ('["shell", "fetch"]', ["shell", "fetch"]),
        ('{ a = "b" }', {"a": "b"}),
        ('"quoted string"', "quoted string"),
        ("read-only", "read-only"),
        ("ollama:qwen3:8b", "ollama:qwen3:8b"),
        ("http://localhost:8000/v1", "http://localhost:8000/v1"),
        ("5\nmodel = 'x'", "5\nmodel = 'x'"),  # two keys: not one value, so a string
    ],
)
def test_a_value_is_read_as_toml_when_it_is_one_else_as_a_string(text: str, value: object) -> None:
    assert parse_value(text) == value


def test_environment_variables_map_double_underscores_to_dots(dirs: Dirs) -> None:
    env = {
        "TETHER_MODEL": "ollama:qwen3",
        "TETHER_RUNTIME__LIMITS__RUN_TIMEOUT": "90",
        "TETHER_TOOLS__DENY": '["shell"]',
        "TETHER_PROVIDERS__OLLAMA__BASE_URL": "http://box:11434/v1",
        "TETHER_SESSION__STORE": "memory",
    }

    config = dirs.load(env).config

    assert config.runtime.model == "ollama:qwen3"
    assert config.runtime.limits.run_timeout == 90.0
    assert config.tools.deny == ["shell"]
    assert config.providers["ollama"].base_url == "http://box:11434/v1"
    assert config.session.store == "memory"


def test_tether_model_is_always_a_string_and_wins_over_tether_runtime_model() -> None:
    layer = env_layer({"TETHER_RUNTIME__MODEL": "openai:gpt-4o", "TETHER_MODEL": "ollama:qwen3"})

    assert layer is not None
    assert layer.data == {"runtime": {"model": "ollama:qwen3"}}


def test_other_tether_variables_and_empty_ones_are_not_configuration() -> None:
    assert env_layer({"TETHER_PROBE_API_KEY": "x", "TETHER_MODEL": "", "PATH": "/bin"}) is None


def test_a_bad_environment_value_is_reported_with_the_variable_name(dirs: Dirs) -> None:
    (issue,) = dirs.issues({"TETHER_RUNTIME__LIMITS__MAX_TURNS": "many"})

    assert issue["origin"] == "environment variable TETHER_RUNTIME__LIMITS__MAX_TURNS"
    assert issue["key"] == "runtime.limits.max_turns"


def test_an_unknown_key_in_an_environment_variable_is_an_error_with_a_suggestion(dirs: Dirs) -> None:
    (issue,) = dirs.issues({"TETHER_SESION__STORE": "memory"})

    assert issue["origin"] == "environment variable TETHER_SESION__STORE"
    assert issue["message"] == "unknown key 'sesion'; did you mean 'session'?"


def test_an_environment_variable_with_an_empty_segment_is_an_error(dirs: Dirs) -> None:
    (issue,) = dirs.issues({"TETHER_RUNTIME____MODEL": "x:y"})

    assert issue["origin"] == "environment variable TETHER_RUNTIME____MODEL"


def test_flags_given_as_none_are_ignored(dirs: Dirs) -> None:
    dirs.write_project('[runtime]\nmodel = "openai:gpt-4o"\n')

    assert dirs.load(flags={"runtime.model": None}).config.runtime.model == "openai:gpt-4o"


def test_a_bad_flag_value_names_the_flag(dirs: Dirs) -> None:
    with pytest.raises(ConfigInvalid) as caught:
        dirs.load(flags={"tools.mode": "rw"})

    assert "command line (tools.mode): tools.mode: must be one of 'read-only', 'full'" in str(caught.value)


@pytest.mark.parametrize(
    ("key", "parts"),
    [
        ("runtime.model", ["runtime", "model"]),
        ("runtime . limits . max_turns", ["runtime", "limits", "max_turns"]),
        ('providers."my.box".base_url', ["providers", "my.box", "base_url"]),
    ],
)
def test_dotted_keys_follow_toml_key_syntax(key: str, parts: list[str]) -> None:
    assert split_key(key) == parts


@pytest.mark.parametrize("key", ["", "runtime..model", "a = 1 #", "a\nb", ".model", "model."])
def test_a_malformed_dotted_key_is_refused(key: str) -> None:
    with pytest.raises(ConfigInvalid):
        split_key(key)


def test_a_file_that_is_not_utf8_is_an_error_naming_the_line(dirs: Dirs) -> None:
    dirs.agent_toml.write_bytes(b'[runtime]\nmodel = "caf\xe9"\n')

    (issue,) = dirs.issues()

    assert (issue["origin"], issue["line"]) == (str(dirs.agent_toml), 2)


def test_load_reads_agent_toml_from_the_given_directory_only(dirs: Dirs) -> None:
    dirs.write_project('[session]\nstore = "memory"\n')
    nested = dirs.project / "sub"
    nested.mkdir()

    assert load(nested, dirs.env).config.session.store == "sqlite"
