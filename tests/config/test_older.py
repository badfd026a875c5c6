"""A file of the older layout is read key by key as tether's: values converted, one notice, problems named by
the older key and its line; a mix of the two layouts works, and nothing is picked silently."""

from __future__ import annotations

import pytest

from tests.config.helpers import Dirs
from tether.config.issues import annotation_at
from tether.config.older import EACH, RENAMES, milliseconds
from tether.config.schema import Config

OLDER = """\
# written for the older CLI
[runtime]
default_model = "openai:gpt-4o"   # the model we pay for
max_steps = 12
turn_timeout_ms = 1500

[llm]
retry_max = 5
stream_default = false

[policy]
deny_tools = ["bash", "write"]

[[mcp.servers]]
id = "files"
command = "npx"
tool_timeout_ms = 30000

[[mcp.servers]]
id = "search"
transport = "http"
url = "http://localhost:8931/mcp"
tool_timeout_ms = 250
"""


def test_every_older_key_is_read_as_its_tether_key_with_its_value_converted(dirs: Dirs) -> None:
    dirs.write_project(OLDER)

    config = dirs.load().config

    assert config.runtime.model == "openai:gpt-4o"
    assert config.runtime.limits.max_turns == 12
    assert config.runtime.limits.run_timeout == 1.5
    assert config.runtime.retries == 5
    assert config.cli.stream is False
    assert config.tools.deny == ["bash", "write"]
    assert [server.tool_timeout for server in config.mcp.servers] == [30.0, 0.25]


def test_one_notice_names_the_file_and_every_new_key(dirs: Dirs) -> None:
    dirs.write_project(OLDER)

    (notice,) = dirs.load().notices

    assert notice.startswith(f"{dirs.agent_toml} uses the older layout; read ")
    for rename in RENAMES:
        assert f"{rename.old} as {rename.new}" in notice
    assert notice.count("mcp.servers[].tool_timeout_ms") == 1, "one mention for all the servers"
    assert notice.endswith("; 'tether config migrate' rewrites it")


def test_a_file_in_tethers_layout_has_no_notice(dirs: Dirs) -> None:
    dirs.write_project('[runtime]\nmodel = "openai:gpt-4o"\n')

    assert dirs.load().notices == ()


def test_the_users_file_may_be_older_too_and_its_notice_names_it_for_migrate(dirs: Dirs) -> None:
    dirs.write_user("[llm]\nretry_max = 0\n")
    dirs.write_project('[runtime]\ndefault_model = "openai:gpt-4o"\n')

    loaded = dirs.load()

    assert loaded.config.runtime.retries == 0
    assert loaded.config.runtime.model == "openai:gpt-4o"
    user_notice, project_notice = loaded.notices
    assert user_notice.startswith(f"{dirs.user_toml} uses the older layout; read llm.retry_max as runtime.retries;")
    assert user_notice.endswith(f"'tether config migrate {dirs.user_toml}' rewrites it")
    assert project_notice.endswith("'tether config migrate' rewrites it")


def test_a_value_read_from_an_older_key_says_so_where_it_came_from(dirs: Dirs) -> None:
    dirs.write_project(OLDER)

    loaded = dirs.load()

    assert loaded.origin(("runtime", "limits", "max_turns")) == f"{dirs.agent_toml} line 4 (as runtime.max_steps)"
    assert loaded.origin(("mcp", "servers", 1, "tool_timeout")) == (
        f"{dirs.agent_toml} line 23 (as mcp.servers[1].tool_timeout_ms)"
    )
    assert loaded.origin(("mcp", "servers", 1, "url")) == f"{dirs.agent_toml} line 22"


@pytest.mark.parametrize(
    ("written", "seconds"),
    [(1500, 1.5), (1, 0.001), (250, 0.25), (90000, 90.0), (0.5, 0.0005), (1100, 1.1), (3, 0.003)],
)
def test_milliseconds_become_seconds_exactly(written: float, seconds: float) -> None:
    assert milliseconds(written) == seconds


@pytest.mark.parametrize("written", ['"off"', "false"])
def test_a_timeout_of_the_older_layout_can_be_switched_off(dirs: Dirs, written: str) -> None:
    dirs.write_project(f"[runtime]\nturn_timeout_ms = {written}\n")

    assert dirs.load().config.runtime.limits.run_timeout is None


@pytest.mark.parametrize(
    ("text", "key", "line", "message"),
    [
        ('[runtime]\nmodel = "openai:x"\nmax_steps = "12"\n', "runtime.max_steps", 3,
         'must be a whole number >= 1, or "off", not "12"'),
        ("[runtime]\n\nturn_timeout_ms = -1500\n", "runtime.turn_timeout_ms", 3,
         'must be a number > 0, or "off", not -1500'),
        ('[runtime]\nturn_timeout_ms = "soon"\n', "runtime.turn_timeout_ms", 2,
         'must be a number > 0, or "off", not "soon"'),
        ("[llm]\nretry_max = -1\n", "llm.retry_max", 2, "must be a whole number >= 0, not -1"),
        ("[llm]\nretry_max = true\n", "llm.retry_max", 2, "must be a whole number >= 0, not true"),
        ('[llm]\nstream_default = "no"\n', "llm.stream_default", 2, 'must be true or false, not "no"'),
        ('[policy]\ndeny_tools = "bash"\n', "policy.deny_tools", 2, 'must be a list, not "bash"'),
        ("[policy]\ndeny_tools = [1]\n", "policy.deny_tools[0]", 2, "must be a string, not 1"),
        ('[runtime]\ndefault_model = "gpt-4o"\n', "runtime.default_model", 2, "must be 'provider:model'"),
        ('[runtime]\ndefault_model = "nosuch:x"\n', "runtime.default_model", 2, "unknown provider 'nosuch'"),
        ('[[mcp.servers]]\nid = "a"\ncommand = "x"\ntool_timeout_ms = []\n', "mcp.servers[0].tool_timeout_ms", 4,
         'must be a number > 0, or "off", not a list'),
    ],
)  # fmt: skip
def test_a_bad_value_under_an_older_key_names_that_key_and_its_line(
    dirs: Dirs, text: str, key: str, line: int, message: str
) -> None:
    dirs.write_project(text)

    (issue,) = dirs.issues()

    assert (issue["key"], issue["origin"], issue["line"]) == (key, str(dirs.agent_toml), line)
    assert message in issue["message"]


def test_the_two_layouts_mix_in_one_file(dirs: Dirs) -> None:
    dirs.write_project(
        '[runtime]\nmodel = "openai:gpt-4o"\nmax_steps = 3\n\n[runtime.limits]\nrun_timeout = 60\n\n'
        '[tools]\nmode = "read-only"\n\n[policy]\ndeny_tools = ["bash"]\n'
    )

    config = dirs.load().config

    assert (config.runtime.model, config.runtime.limits.max_turns, config.runtime.limits.run_timeout) == (
        "openai:gpt-4o",
        3,
        60.0,
    )
    assert (config.tools.mode, config.tools.deny) == ("read-only", ["bash"])


def test_an_older_key_and_its_tether_key_both_set_is_an_error_naming_both(dirs: Dirs) -> None:
    dirs.write_project(
        '[runtime]\ndefault_model = "openai:a"\nmodel = "openai:b"\n\n'
        "[runtime.limits]\nmax_turns = 3\n\n[llm]\nretry_max = 1\n"
    )
    # runtime.max_steps is not set: max_turns alone is fine; runtime.retries is not set: retry_max alone is fine.
    (issue,) = dirs.issues()

    assert (issue["key"], issue["line"]) == ("runtime.default_model", 2)
    assert issue["message"] == "is the older name of runtime.model, which line 3 sets too: keep one of them"


def test_both_set_for_one_mcp_server_names_that_server(dirs: Dirs) -> None:
    dirs.write_project('[[mcp.servers]]\nid = "a"\ncommand = "x"\ntool_timeout = 5\ntool_timeout_ms = 5000\n')

    (issue,) = dirs.issues()

    assert (issue["key"], issue["line"]) == ("mcp.servers[0].tool_timeout_ms", 5)
    assert "mcp.servers[0].tool_timeout, which line 4 sets too" in issue["message"]


def test_an_older_key_with_no_equivalent_is_an_error_naming_it_and_its_line(dirs: Dirs) -> None:
    dirs.write_project('[runtime]\ndefault_model = "openai:x"\n\n[llm]\nretry_max = 2\ntemperature = 0.2\n')

    (issue,) = dirs.issues()

    assert (issue["key"], issue["origin"], issue["line"]) == ("llm.temperature", str(dirs.agent_toml), 6)
    assert issue["message"].startswith("unknown key: tether has no equivalent")
    assert "retry_max and stream_default" in issue["message"]


def test_an_unknown_key_in_a_file_of_the_older_layout_fails_as_in_any_file(dirs: Dirs) -> None:
    dirs.write_project('[runtime]\ndefault_model = "openai:x"\nmax_step = 3\n')

    (issue,) = dirs.issues()

    assert (issue["key"], issue["line"]) == ("runtime.max_step", 3)
    assert "unknown key 'max_step'" in issue["message"]


def test_every_problem_of_both_kinds_is_reported_at_once(dirs: Dirs) -> None:
    dirs.write_project('[runtime]\nmax_steps = 0\nmodle = "x"\n\n[policy]\nallow_tools = ["a"]\n')

    issues = dirs.issues()

    assert [(issue["key"], issue["line"]) for issue in issues] == [
        ("runtime.max_steps", 2),
        ("runtime.modle", 3),
        ("policy.allow_tools", 6),
    ]


def test_the_table_moves_older_keys_to_keys_of_the_schema() -> None:
    for rename in RENAMES:
        new = tuple(0 if part == EACH else part for part in rename.new_path)
        old = tuple(0 if part == EACH else part for part in rename.old_path)
        assert annotation_at(new) is not None, f"{rename.new} is not a key of the schema"
        assert annotation_at(old) is None, f"{rename.old} is a key of the schema: it needs no renaming"
    assert len({rename.old for rename in RENAMES}) == len(RENAMES)
    assert len({rename.new for rename in RENAMES}) == len(RENAMES)
    assert "llm" not in Config.model_fields
