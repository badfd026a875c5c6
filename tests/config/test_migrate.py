"""`config migrate` rewrites a file of the older layout into one that loads, with no notice, to the same
configuration: comments kept, the original in `.bak`, nothing written when either side is invalid, and a
second migration changing nothing."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from tests.config.helpers import Dirs
from tether.config.edit import backup_path
from tether.config.load import parse_text, validate
from tether.config.migrate import migrate_file, rewrite
from tether.errors import ConfigInvalid

OLDER = """\
# Team settings -- reviewed by hand.
[runtime]
default_model = "openai:gpt-4o"   # the model we pay for
# runs stay short
max_steps = 12
turn_timeout_ms = 1500  # one and a half seconds

[llm]  # the HTTP side
# a flaky proxy sits in front
retry_max = 5
stream_default = false

[policy]
deny_tools = ["bash"]  # no shell here

[session]
store = "memory"

[[mcp.servers]]
id = "files"
command = "npx"
tool_timeout_ms = 30000  # slow disk
"""

EXPECTED = """\
# Team settings -- reviewed by hand.
[runtime]
model = "openai:gpt-4o"   # the model we pay for
# a flaky proxy sits in front
retries = 5

[runtime.limits]
# runs stay short
max_turns = 12
run_timeout = 1.5  # one and a half seconds
# the HTTP side

[session]
store = "memory"

[[mcp.servers]]
id = "files"
command = "npx"
tool_timeout = 30.0  # slow disk

[cli]
stream = false

[tools]
deny = ["bash"]  # no shell here
"""


def test_migrate_rewrites_the_file_into_one_that_loads_to_the_same_configuration(dirs: Dirs) -> None:
    path = dirs.write_project(OLDER)
    before = dirs.load()
    assert before.notices

    migration = migrate_file(path)

    after = dirs.load()
    assert after.notices == ()
    assert after.config == before.config
    assert path.read_text() == migration.text == EXPECTED
    assert backup_path(path).read_bytes() == OLDER.encode()


def test_migrate_says_what_it_moved(dirs: Dirs) -> None:
    migration = migrate_file(dirs.write_project(OLDER))

    assert migration.lines() == [
        "runtime.default_model -> runtime.model",
        "runtime.max_steps -> runtime.limits.max_turns",
        "runtime.turn_timeout_ms -> runtime.limits.run_timeout (1500 -> 1.5, ms -> s)",
        "llm.retry_max -> runtime.retries",
        "llm.stream_default -> cli.stream",
        "policy.deny_tools -> tools.deny",
        "mcp.servers[0].tool_timeout_ms -> mcp.servers[0].tool_timeout (30000 -> 30.0, ms -> s)",
    ]


def test_every_comment_survives(dirs: Dirs) -> None:
    migrate_file(dirs.write_project(OLDER))

    text = dirs.agent_toml.read_text()
    comments = [line[line.index("#") :] for line in OLDER.splitlines() if "#" in line]
    for comment in comments:
        if comment == "# the HTTP side":  # the comment of a header that went: kept on a line of its own
            assert "\n# the HTTP side\n" in text
        else:
            assert comment in text


def test_migrating_again_changes_nothing(dirs: Dirs) -> None:
    path = dirs.write_project(OLDER)
    migrate_file(path)
    backup = backup_path(path).read_bytes()

    again = migrate_file(path)

    assert again.moves == ()
    assert path.read_text() == EXPECTED
    assert backup_path(path).read_bytes() == backup, "no new backup either"


def test_a_file_already_in_tethers_layout_is_left_alone(dirs: Dirs) -> None:
    path = dirs.write_project('[runtime]\nmodel = "openai:gpt-4o"  # ours\n')

    assert migrate_file(path).moves == ()
    assert path.read_text() == '[runtime]\nmodel = "openai:gpt-4o"  # ours\n'
    assert not backup_path(path).exists()


@pytest.mark.parametrize(
    ("text", "key", "line"),
    [
        ('[runtime]\nmax_steps = 0\n', "runtime.max_steps", 2),
        ('[runtime]\ndefault_model = "openai:a"\nmodel = "openai:b"\n', "runtime.default_model", 2),
        ('[llm]\nretry_max = 1\ntemperature = 0.3\n', "llm.temperature", 3),
        ('[runtime]\nturn_timeout_ms = "later"\n', "runtime.turn_timeout_ms", 2),
    ],
)  # fmt: skip
def test_an_invalid_file_is_refused_naming_key_and_line_and_nothing_is_written(
    dirs: Dirs, text: str, key: str, line: int
) -> None:
    path = dirs.write_project(text)

    with pytest.raises(ConfigInvalid) as caught:
        migrate_file(path)

    (issue,) = caught.value.details["issues"]
    assert (issue["key"], issue["line"], issue["origin"]) == (key, line, str(path))
    assert path.read_text() == text
    assert not backup_path(path).exists()


def test_the_file_is_validated_with_the_users_file_below_it(dirs: Dirs) -> None:
    user = dirs.write_user('[providers.gpu]\nbase_url = "http://gpu:8000/v1"\nprofile = "vllm"\n')
    path = dirs.write_project('[runtime]\ndefault_model = "gpu:qwen3"\n')

    with pytest.raises(ConfigInvalid, match="unknown provider 'gpu'"):
        migrate_file(path)
    assert migrate_file(path, below=[parse_text(user.read_bytes(), user)]).moves
    assert dirs.load().config.runtime.model == "gpu:qwen3"


def test_a_missing_file_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigInvalid, match=f"{tmp_path / 'agent.toml'}: no such file"):
        migrate_file(tmp_path / "agent.toml")


SHAPES = {
    "older tables first": '[llm]\nretry_max = 2\n\n[runtime]\ndefault_model = "openai:x"\n',
    "tether tables there already": (
        '[runtime]\nmax_steps = 4\n\n[runtime.limits]\nrun_timeout = 5\n\n[tools]\nmode = "full"\n\n'
        '[policy]\ndeny_tools = ["a"]\n'
    ),
    "inline tables": 'llm = { retry_max = 2, stream_default = true }\nruntime = { default_model = "openai:x" }\n',
    "dotted keys": 'runtime.default_model = "openai:x"\nllm.retry_max = 1\npolicy.deny_tools = ["b"]\n',
    "CRLF, no final line end": "[runtime]\r\nturn_timeout_ms = 250\r\n[llm]\r\nstream_default = true",
    "two servers": (
        '[[mcp.servers]]\nid = "a"\ncommand = "x"\ntool_timeout_ms = 100\n\n'
        '[[mcp.servers]]\nid = "b"\ncommand = "y"\ntool_timeout_ms = "off"\n'
    ),
    "a table before its parent": '[runtime.limits]\nmax_turns = 5\n\n[runtime]\ndefault_model = "openai:x"\n',
    "dotted keys in a table written in pieces": (
        'runtime.max_steps = 5\nruntime.default_model = "openai:x"\n\n[runtime.limits]\nrun_timeout = 9\n'
    ),
    "a multi-line string": (
        '[runtime]\nmax_steps = 2\n\n[[mcp.servers]]\nid = "a"\ncommand = """x\n\n\n\ny"""\n\n\n[llm]\nretry_max = 0\n'
    ),
}


@pytest.mark.parametrize("text", SHAPES.values(), ids=SHAPES.keys())
def test_every_shape_of_file_migrates_to_the_same_configuration(text: str) -> None:
    path = Path("/project/agent.toml")
    older = parse_text(text.encode(), path)

    rewritten = rewrite(text, older.moves)

    newer = parse_text(rewritten.encode(), path)
    assert newer.moves == []
    assert validate([newer]) == validate([older])
    if "\r\n" in text:
        assert "\n" not in rewritten.replace("\r\n", ""), "the file's line ends are kept"
    assert "[llm]" not in rewritten
    assert "policy" not in tomllib.loads(rewritten)


def test_a_backup_path_that_is_a_directory_is_an_error_and_the_file_is_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text("[runtime]\nmax_steps = 7\n")
    backup_path(path).mkdir()
    with pytest.raises(ConfigInvalid, match=r"cannot be written \(Is a directory: .*agent\.toml\.bak\)"):
        migrate_file(path)
    assert path.read_text() == "[runtime]\nmax_steps = 7\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.toml", "agent.toml.bak"], "no staging file is left"
