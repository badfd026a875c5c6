"""The project's file is ``--config`` (``load(config_file=)``), else ``TETHER_CONFIG``, else ``./agent.toml``: the
named file replaces ./agent.toml, the user's file still lies below it, variables and flags still win."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.config.helpers import Dirs
from tether.config.load import env_layer, load, project_file
from tether.errors import ConfigInvalid

BROKEN = '[runtime]\nmodel = "openai:from-agent-toml"\nnot_a_key = 1\n'


def test_the_rule_flag_then_variable_then_agent_toml(tmp_path: Path) -> None:
    env = {"TETHER_CONFIG": "from-variable.toml"}

    assert project_file(tmp_path, {}).path == tmp_path / "agent.toml"
    assert project_file(tmp_path, {}).given_by is None
    assert project_file(tmp_path, env) == project_file(tmp_path, env, None)
    assert project_file(tmp_path, env).path == tmp_path / "from-variable.toml"
    assert project_file(tmp_path, env).given_by == "TETHER_CONFIG"
    flagged = project_file(tmp_path, env, "/etc/team.toml")
    assert (flagged.path, flagged.given_by) == (Path("/etc/team.toml"), "--config")
    assert project_file(tmp_path, {"TETHER_CONFIG": ""}).path == tmp_path / "agent.toml", "empty: not set"


def test_the_named_file_replaces_agent_toml_which_is_not_read_at_all(dirs: Dirs, tmp_path: Path) -> None:
    dirs.write_project(BROKEN)
    named = tmp_path / "team.toml"
    named.write_text('[runtime]\nmodel = "openai:from-config"\n')

    loaded = load(dirs.project, dirs.env, config_file=named)

    assert loaded.config.runtime.model == "openai:from-config"
    assert loaded.files == [named]
    assert loaded.origin(("runtime", "model")) == f"{named} line 2"


def test_the_variable_names_the_file_and_the_flag_beats_it(dirs: Dirs, tmp_path: Path) -> None:
    dirs.write_project(BROKEN)
    (tmp_path / "by-variable.toml").write_text('[runtime]\nmodel = "openai:by-variable"\n')
    (tmp_path / "by-flag.toml").write_text('[runtime]\nmodel = "openai:by-flag"\n')
    env = {**dirs.env, "TETHER_CONFIG": str(tmp_path / "by-variable.toml")}

    assert load(dirs.project, env).config.runtime.model == "openai:by-variable"
    assert load(dirs.project, env, config_file=tmp_path / "by-flag.toml").config.runtime.model == "openai:by-flag"


def test_a_relative_path_is_taken_from_the_working_directory(dirs: Dirs) -> None:
    (dirs.project / "conf").mkdir()
    (dirs.project / "conf" / "a.toml").write_text('[runtime]\nmodel = "openai:relative"\n')

    assert load(dirs.project, dirs.env, config_file="conf/a.toml").config.runtime.model == "openai:relative"
    env = {**dirs.env, "TETHER_CONFIG": "conf/a.toml"}
    assert load(dirs.project, env).config.runtime.model == "openai:relative"


def test_the_user_file_lies_below_the_named_file_and_variables_and_flags_win(dirs: Dirs, tmp_path: Path) -> None:
    dirs.write_user('[runtime]\nmodel = "openai:user"\n[runtime.limits]\nmax_turns = 7\nrun_timeout = 30\n')
    named = tmp_path / "team.toml"
    named.write_text("[runtime.limits]\nmax_turns = 9\n")

    env = {**dirs.env, "TETHER_RUNTIME__LIMITS__RUN_TIMEOUT": "45"}
    loaded = load(dirs.project, env, {"runtime.model": "openai:flag"}, config_file=named)

    assert loaded.config.runtime.limits.max_turns == 9
    assert loaded.config.runtime.limits.run_timeout == 45.0
    assert loaded.config.runtime.model == "openai:flag"
    assert loaded.files == [dirs.user_toml, named]


@pytest.mark.parametrize("by", ["--config", "TETHER_CONFIG"])
def test_a_named_file_that_does_not_exist_is_an_error_naming_it(dirs: Dirs, tmp_path: Path, by: str) -> None:
    missing = tmp_path / "nowhere" / "team.toml"
    env = {**dirs.env, "TETHER_CONFIG": str(missing)} if by == "TETHER_CONFIG" else dirs.env

    with pytest.raises(ConfigInvalid) as caught:
        load(dirs.project, env, config_file=missing if by == "--config" else None)

    assert caught.value.code == "config_invalid"
    assert caught.value.message == f"invalid configuration: {missing}: no such file (named by {by})"


def test_a_named_file_that_cannot_be_read_is_an_error_naming_it(dirs: Dirs, tmp_path: Path) -> None:
    with pytest.raises(ConfigInvalid) as caught:
        load(dirs.project, dirs.env, config_file=tmp_path)  # a directory

    assert caught.value.message.startswith(f"invalid configuration: {tmp_path}: cannot be read: ")
    assert caught.value.message.endswith("(named by --config)")


def test_tether_config_is_not_itself_configuration() -> None:
    assert env_layer({"TETHER_CONFIG": "/etc/team.toml"}) is None
